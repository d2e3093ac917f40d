"""What a run is opened with, and what each of its barriers commits.

``BarrierState`` is the immutable value a barrier hands to durability (the
content of a checkpoint); ``EventSink`` and ``Checkpointing`` are the two
small ports the loop talks through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from treadle._engine._slots import blank

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from treadle._engine._delivery import Envelope, FanInBuffer
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._result import RunStatus
    from treadle._engine._spawn import SpawnRecord
    from treadle._engine._waits import WaitBook


class EventSink(Protocol):
    """Where a run's events go.

    ``live`` sinks get events the moment they are raised, from any thread's
    point of view via the loop; other sinks get each superstep's events at
    its barrier, in canonical order. ``backpressure``, when set, is awaited
    before each invocation and barrier so a slow consumer slows the run.
    """

    live: bool
    backpressure: Callable[[], Awaitable[None]] | None

    def publish(self, event: WorkflowEvent) -> None:
        """Take one event (and number it)."""


class Checkpointing(Protocol):
    """What the loop needs from durability: save barriers, record statuses."""

    @property
    def last_checkpoint_id(self) -> str | None:
        """The newest checkpoint saved (``None`` before the first)."""
        ...

    @property
    def paused(self) -> bool:
        """Whether a save found the run paused (someone asked it to pause).

        The commit that found it made its checkpoint the run's last, and
        nothing more is written: the loop stops at this barrier, ``PAUSED``.
        """
        ...

    @property
    def paused_point(self) -> BarrierState | None:
        """The barrier whose commit paused the run, once one did (``None`` before, or unknown).

        In background and batched modes it may be one the run went past: the
        run's result is of that barrier, not of the supersteps computed after.
        """
        ...

    async def save(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> str | None:
        """Persist one committed barrier; return its checkpoint id.

        ``None``: it was not written, as the run was paused first (:attr:`paused`).
        """
        ...

    async def record_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Persist a status that commits no superstep."""
        ...

    def relay(self, event: WorkflowEvent) -> None:
        """Hand a live event (ephemeral, or ``before_barrier``) to the run's followers now.

        Never blocks and never raises: followers in any process see it
        before the barrier that commits (or, ephemeral, never logs) it.
        """
        ...

    async def flush(self) -> None:
        """Wait until every barrier handed to :meth:`save` is durable."""
        ...


class CommittedPoint(Protocol):
    """A committed point a run goes on from: a decoded checkpoint, or a sub-workflow's barrier.

    ``RestoredRun`` (a checkpoint read back) and :class:`BarrierState` (a
    barrier kept in memory) both are; a run is opened from either.
    """

    @property
    def superstep(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def state(self) -> Mapping[str, Any]: ...
    @property
    def pending(self) -> Mapping[str, Sequence[Envelope]]: ...
    @property
    def fan_in_buffers(self) -> tuple[FanInBuffer, ...]: ...
    @property
    def iterations(self) -> Mapping[str, int]: ...
    @property
    def outputs(self) -> Sequence[Any]: ...
    @property
    def waits(self) -> WaitBook: ...
    @property
    def deadline_at(self) -> float | None: ...
    @property
    def spawned(self) -> Sequence[SpawnRecord]: ...
    @property
    def outcome(self) -> tuple[str, str | None] | None: ...
    @property
    def branch(self) -> int: ...


_FIELDS = (
    "run_id",
    "superstep",
    "status",
    "pending",
    "fan_in_buffers",
    "state",
    "iterations",
    "outputs",
    "waits",
    "deadline_at",
    "spawned",
    "outcome",
    "written",
    "branch",
)


class BarrierState:
    """Everything one barrier committed: the run's committed point, and the content of a checkpoint.

    The loop holds one as its committed value and replaces it at each
    barrier (``commit_superstep`` returns the next); nothing mutates one
    once made, so it may be kept, compared or persisted while the run goes
    on. The one exception is deliberate: the in-flight part of ``waits``
    (``saved`` steps and ``nested`` sub-workflow runs of invocations under
    way) is written between barriers, and saved with the last barrier by
    ``save_progress``.

    A class of slots whose fields the type checker sees as read-only, not a
    named tuple or a frozen dataclass: one is built and read at every
    superstep, and only slots are read and written by the interpreter's fast
    paths (a named tuple's fields are descriptors it does not specialise, and
    a frozen dataclass is built through ``object.__setattr__``). Build one
    with the constructor, or with :meth:`_replace` from another.
    """

    __slots__ = _FIELDS

    if TYPE_CHECKING:  # read-only to the type checker: a point is never changed once made

        @property
        def run_id(self) -> str: ...
        @property
        def superstep(self) -> int: ...
        @property
        def status(self) -> RunStatus: ...
        @property
        def pending(self) -> Mapping[str, Sequence[Envelope]]: ...
        @property
        def fan_in_buffers(self) -> tuple[FanInBuffer, ...]: ...
        @property
        def state(self) -> Mapping[str, Any]: ...
        @property
        def iterations(self) -> Mapping[str, int]: ...
        @property
        def outputs(self) -> tuple[Any, ...]: ...
        @property
        def waits(self) -> WaitBook: ...
        @property
        def deadline_at(self) -> float | None: ...
        @property
        def spawned(self) -> tuple[SpawnRecord, ...]: ...
        @property
        def outcome(self) -> tuple[str, str | None] | None:
            """The run's outcome as of this barrier (``ctx.set_outcome``): name and summary."""

        @property
        def written(self) -> frozenset[str] | None:
            """The state keys set, updated or deleted since the previous barrier.

            ``None``: not known, so any may have been. A checkpoint stores a
            key not written again only if its value is a new object.
            """

        @property
        def branch(self) -> int:
            """Which branch of its run this point is on (``0``: the run's own line).

            A session's rollback branches the run from where the turn began
            and numbers the branch by the rolling-back message's place in the
            inbox: invocations on it are keyed apart from the abandoned turn's
            at the same places (``WorkflowContext.idempotency_key``, the ids
            of the requests and timers they wait on: ``on_branch``).
            """

    def __init__(
        self,
        run_id: str,
        superstep: int,
        status: RunStatus,
        pending: Mapping[str, Sequence[Envelope]],
        fan_in_buffers: tuple[FanInBuffer, ...],
        state: Mapping[str, Any],
        iterations: Mapping[str, int],
        outputs: tuple[Any, ...],
        waits: WaitBook,
        deadline_at: float | None = None,
        spawned: tuple[SpawnRecord, ...] = (),
        outcome: tuple[str, str | None] | None = None,
        written: frozenset[str] | None = None,
        branch: int = 0,
    ) -> None:
        # The read-only fields are set here (and by the barrier), and only here.
        this: Any = self
        this.run_id = run_id
        this.superstep = superstep
        this.status = status
        this.pending = pending
        this.fan_in_buffers = fan_in_buffers
        this.state = state
        this.iterations = iterations
        this.outputs = outputs
        this.waits = waits
        this.deadline_at = deadline_at
        this.spawned = spawned
        this.outcome = outcome
        this.written = written
        this.branch = branch

    def _replace(self, **changes: Any) -> BarrierState:
        """A copy of this point with ``changes`` (field name → value) made."""
        unknown = changes.keys() - set(_FIELDS)
        if unknown:
            msg = f"BarrierState has no field {min(unknown)!r}"
            raise TypeError(msg)
        return BarrierState(*(changes.get(name, getattr(self, name)) for name in _FIELDS))

    def __eq__(self, other: object) -> bool:
        if type(other) is not BarrierState:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and holds mappings

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"BarrierState({fields})"

    @property
    def wake_at(self) -> float | None:
        """When this barrier's earliest durable timer falls due."""
        return self.waits.next_wake_at()


NOTHING_WRITTEN: frozenset[str] = frozenset()
"""The ``written`` of barriers that wrote no state key, shared (as ``RunLoop.written``).

Immutable, so one serves every run: a set of its own per run in flight, and a
frozenset copied from it at every checkpoint, were objects more for the garbage
collector to walk at each of its passes.
"""


def as_saved(
    point: BarrierState,
    status: RunStatus,
    waits: WaitBook,
    spawned: tuple[SpawnRecord, ...],
    written: frozenset[str] | None,
) -> BarrierState:
    """``point`` with what a checkpoint of it sets besides (``RunLoop.barrier_state``)."""
    return _remade(point, status, point.pending, waits, spawned, written)


def with_arrivals(
    point: BarrierState, pending: Mapping[str, Sequence[Envelope]], waits: WaitBook
) -> BarrierState:
    """``point`` with the messages and waits its arrivals left (``apply_arrivals``)."""
    return _remade(point, point.status, pending, waits, point.spawned, point.written)


def _remade(
    point: BarrierState,
    status: RunStatus,
    pending: Mapping[str, Sequence[Envelope]],
    waits: WaitBook,
    spawned: tuple[SpawnRecord, ...],
    written: frozenset[str] | None,
) -> BarrierState:
    """``point._replace(...)`` of these fields, made slot by slot (see ``_engine/_slots.py``).

    Every durable superstep makes one, and a run applies arrivals at every
    superstep it waits in: ``_replace``'s generic copy costs a generator and
    a call of the class.
    """
    made: Any = blank(BarrierState)
    made.run_id = point.run_id
    made.superstep = point.superstep
    made.status = status
    made.pending = pending
    made.fan_in_buffers = point.fan_in_buffers
    made.state = point.state
    made.iterations = point.iterations
    made.outputs = point.outputs
    made.waits = waits
    made.deadline_at = point.deadline_at
    made.spawned = spawned
    made.outcome = point.outcome
    made.written = written
    made.branch = point.branch
    remade: BarrierState = made
    return remade
