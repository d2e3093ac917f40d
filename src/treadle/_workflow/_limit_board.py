"""Who keeps the call limits of the runs they drive: a board per driver, found like its leases.

A ``Runtime`` or a worker declares limits once (``limits=[CallLimit(...)]``)
and keeps one :class:`LimitBoard`: the runs it drives find it as their
task's board (:meth:`LimitBoard.declaring`, a context variable holding no
table of runs), so they share its counts. A workflow run by nobody's
driver uses a board of the workflow's own (its runs in this process share
it). The board gives a run the gate its calls wait at: counted in this
process for a run without a store; counted in the store for a stored run
whose store keeps limit slots (every store of treadle does), so that every
process on that store shares the same slots.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING, NoReturn, Protocol

from treadle._checkpoints._limit_gate import StoreGate, stored_gate
from treadle._engine._limit_scope import LimitScope
from treadle._engine._limiter import Limiting, LocalGate
from treadle._exceptions import WorkflowValidationError
from treadle._graph._limits import CallLimit
from treadle._stores._limit_roles import LimitSlots

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

    from treadle._checkpoints._ownership import Ownership
    from treadle._engine._limiter import CallGate
    from treadle._graph._limits import WorkflowLimits
    from treadle._stores._store import Store

_DECLARING: ContextVar[LimitBoard | None] = ContextVar("treadle_limit_board", default=None)


class LimitBoard:
    """The call limits one driver declares, and the gates its runs' calls wait at.

    Args:
        limits: The limits it declares (a name declared here wins over a
            workflow's declaration of it).

    Raises:
        TypeError: an item is not a ``CallLimit``.
        ValueError: a name is declared twice.
    """

    def __init__(self, limits: Iterable[CallLimit] = ()) -> None:
        declared: dict[str, CallLimit] = {}
        for limit in limits:
            if not isinstance(limit, CallLimit):
                msg = f"limits must be CallLimit values, got {limit!r}"
                raise TypeError(msg)
            if limit.name in declared:
                msg = f"limit {limit.name!r} is declared twice"
                raise ValueError(msg)
            declared[limit.name] = limit
        self.declared: Mapping[str, CallLimit] = declared
        self.local = LocalGate()
        self._stored: dict[int, tuple[object, CallGate]] = {}

    @staticmethod
    def current() -> LimitBoard | None:
        """The board of the driver whose task this is (``None``: no driver declares one)."""
        return _DECLARING.get()

    @contextlib.contextmanager
    def declaring(self) -> Iterator[LimitBoard]:
        """Runs opened in this block (and the tasks it starts) use this board."""
        token = _DECLARING.set(self)
        try:
            yield self
        finally:
            _DECLARING.reset(token)

    def check(self, workflow: LimitedGraph) -> None:
        """Refuse a workflow naming a limit neither it nor this board declares.

        Its sub-workflows' executors are checked too, each in what encloses it.

        Raises:
            WorkflowValidationError: naming the workflow, each executor and its limit.
        """
        problems = workflow.limit_problems(self.declared)
        if problems:
            raise WorkflowValidationError([f"workflow {workflow.name!r}: {p}" for p in problems])

    def gate(self, store: Store | None) -> CallGate:
        """Where calls of runs on ``store`` wait: the store's slots, else this process's."""
        if store is None:
            return self.local
        # A worker's run writes through a fenced view of its store; the slots are the
        # store's, shared by every run on it (their own writes are fenced by lease).
        underlying = getattr(store, "store", None)
        slots: object = underlying if isinstance(underlying, LimitSlots) else store
        found = self._stored.get(id(slots))
        if found is not None and found[0] is slots:
            return found[1]
        made = stored_gate(slots)
        gate: CallGate = self.local if made is None else made  # type: ignore[assignment]
        self._stored[id(slots)] = (slots, gate)
        return gate


class LimitedGraph(Protocol):
    """What a run's limits are made from: its workflow's own, and its sub-workflows'."""

    name: str
    limits: WorkflowLimits
    own_limits: LimitBoard
    nests_limits: bool

    def limit_problems(self, host: Mapping[str, CallLimit]) -> list[str]:
        """Each limit named here or in a sub-workflow that nobody declares."""
        ...


def limiting_for(
    workflow: LimitedGraph, store: Store | None, ownership: Ownership | None
) -> tuple[Limiting | None, LimitScope | None]:
    """A run's limits and gate, and what its sub-workflows' calls use of them.

    Its driver's board if it has one, else its workflow's own. The gate is
    the run's (bound to its lease when stored): its sub-workflows' calls
    wait there too (``_engine/_limit_scope.py``).

    Raises:
        WorkflowValidationError: a limit the workflow or a sub-workflow of
            it leaves to its host is declared nowhere.
    """
    limits = workflow.limits
    nests = workflow.nests_limits
    if not limits.by_executor and not nests:
        return None, None
    board = LimitBoard.current() or workflow.own_limits
    host = board.declared
    problems = workflow.limit_problems(host)
    if problems:
        _refuse(workflow.name, problems)
    by_executor = limits.resolve(host)
    gate = board.gate(store)
    if isinstance(gate, StoreGate):
        # A stored run always has an ownership; without one, count here.
        gate = board.local if ownership is None else gate.bound(ownership)
    limiting = Limiting(gate, by_executor) if by_executor else None
    scope = LimitScope(gate, {**limits.declared, **host}) if nests else None
    return limiting, scope


def _refuse(name: str, problems: Sequence[str]) -> NoReturn:
    """Refuse a workflow naming limits nobody declares.

    Its own function: a comprehension reading ``workflow`` in
    :func:`limiting_for` would make it a cell there, built for every run.

    Raises:
        WorkflowValidationError: naming each problem.
    """
    raise WorkflowValidationError([f"workflow {name!r}: {p}" for p in problems])
