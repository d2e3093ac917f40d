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
from typing import TYPE_CHECKING

from treadle._checkpoints._limit_gate import StoreGate, stored_gate
from treadle._engine._limiter import Limiting, LocalGate
from treadle._exceptions import WorkflowValidationError
from treadle._graph._limits import CallLimit
from treadle._stores._limit_roles import LimitSlots

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

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

    def check(self, workflow_name: str, limits: WorkflowLimits) -> None:
        """Refuse a workflow naming a limit neither it nor this board declares.

        Raises:
            WorkflowValidationError: naming the workflow, each executor and its limit.
        """
        problems = limits.missing(self.declared)
        if problems:
            raise WorkflowValidationError([f"workflow {workflow_name!r}: {p}" for p in problems])

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


def limiting_for(
    name: str,
    limits: WorkflowLimits,
    own: LimitBoard,
    store: Store | None,
    ownership: Ownership | None,
) -> Limiting | None:
    """A run's limits and gate: its driver's board if it has one, else its workflow's own.

    Raises:
        WorkflowValidationError: a limit the workflow leaves to its host is declared nowhere.
    """
    if not limits.by_executor:
        return None
    board = LimitBoard.current() or own
    host = board.declared
    try:
        by_executor = limits.resolve(host)
    except ValueError as problem:
        raise WorkflowValidationError([f"workflow {name!r}: {problem}"]) from None
    gate = board.gate(store)
    if isinstance(gate, StoreGate):
        if ownership is None:  # a stored run always has one; without it, count here
            return Limiting(board.local, by_executor)
        return Limiting(gate.bound(ownership), by_executor)
    return Limiting(gate, by_executor)
