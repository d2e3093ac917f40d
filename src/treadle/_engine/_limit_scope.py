"""How call limits reach sub-workflows: the names they resolve in, and the gate they wait at.

A sub-workflow's run is part of its parent's run (one lease, one
checkpoint), so its calls are counted with the parent's: they wait at the
parent run's gate, in the same lines, whether that gate counts in this
process or in the store. A name an executor inside names is resolved from
the outside in: what the parent run's driver declares (a ``Runtime``, a
worker), then what each enclosing workflow's builder declares, then the
sub-workflow's own builder; the outermost declaration of a name wins, as a
driver's does over a workflow's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._engine._limiter import Limiting

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._engine._limiter import CallGate
    from treadle._graph._limits import CallLimit, WorkflowLimits


@dataclass(frozen=True, slots=True)
class LimitScope:
    """What a run hands its sub-workflows of its call limits.

    Attributes:
        gate: Where the run's calls wait (bound to its lease when stored).
        declared: Name -> the limit, as the run's driver and its enclosing
            workflows declare it (the outermost winning).
    """

    gate: CallGate
    declared: Mapping[str, CallLimit]

    def enter(
        self, limits: WorkflowLimits, nests: bool
    ) -> tuple[Limiting | None, LimitScope | None]:
        """A sub-workflow's limits at this gate, and the scope its own sub-workflows get.

        ``nests``: whether a sub-workflow of it names limits (else no scope is made).

        Raises:
            ValueError: a name it leaves to its host is declared nowhere
                (refused when its parent's run was opened, before anything ran).
        """
        by_executor = limits.resolve(self.declared)
        limiting = Limiting(self.gate, by_executor) if by_executor else None
        inner = LimitScope(self.gate, {**limits.declared, **self.declared}) if nests else None
        return limiting, inner
