"""The named shapes of the hot path: a planned superstep, an invocation, its outcome.

Plain slotted values, no asyncio and no I/O. :func:`plan_superstep` (pure:
it reads the run's environment and committed point) plans a
:class:`PlannedSuperstep`, an :class:`Invocation` per message; the runner
runs each, handing its handler a context; the context hands back one
:class:`InvocationOutcome`, kept on the invocation, which is all the
barrier reads of it.

They are built once per superstep or per message, so they are slotted
dataclasses without ``frozen`` (whose ``__init__`` costs twice as much);
nothing mutates them once built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._engine._errors import ExecutorFailedError, IterationLimitExceeded
from treadle._engine._slots import blank as _blank

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._engine._barrier import BarrierState
    from treadle._engine._delivery import Envelope, HandoffContext, Outgoing
    from treadle._engine._env import RunEnv
    from treadle._engine._events import WorkflowEvent
    from treadle._engine._spawn import SpawnRecord
    from treadle._engine._state import Op
    from treadle._engine._waits import Suspension
    from treadle._graph._executor import Executor, HandlerSpec


@dataclass(slots=True)
class Invocation:
    """One handler on one message: everything the runner needs to run it.

    Attributes:
        env: The run it belongs to (never the loop: see ``_engine/_env.py``).
        point: The committed point it runs against (its state, its waits).
        superstep: The superstep it runs in.
        executor: The run's instance of the executor.
        rank: The executor's rank (the first part of the stamps of what it sends).
        position: The message's position in the executor's inbox.
        envelope: The message, with its stamp (and journal, if re-delivered).
        earlier: The state writes of the executor's earlier messages this
            superstep, which this one reads through (filled in as they end).
        spec: The handler for the message's class (``None``: there is none,
            which fails the invocation).
        timeout: Seconds it may take (the handler's, else the executor's).
        outcome: What it hands to the barrier; set by the runner once it ends.
    """

    env: RunEnv
    point: BarrierState
    superstep: int
    executor: Executor
    rank: int
    position: int
    envelope: Envelope
    earlier: Sequence[Sequence[Op]]
    spec: HandlerSpec | None
    timeout: float | None
    outcome: InvocationOutcome = field(init=False)


@dataclass(slots=True)
class PlannedSuperstep:
    """What a superstep will run: its invocations, in stamp order.

    That is by executor rank, then inbox position, so the invocations of
    one executor are adjacent; ``order`` names those executors, in rank order.
    """

    number: int
    invocations: list[Invocation]
    order: tuple[str, ...]


def plan_superstep(env: RunEnv, point: BarrierState, number: int) -> PlannedSuperstep:
    """Superstep ``number`` after ``point``: an invocation per pending message.

    Pure: it reads the environment and the committed point, and changes
    neither (the executor pool builds an executor's instance on its first
    message). Each executor's handler for each message is found here, once;
    an executor with several messages shares one ``earlier`` list among them.

    Raises:
        IterationLimitExceeded: the run would pass ``max_supersteps``, or an
            executor ``max_node_iterations``.
    """
    inboxes = point.pending
    ranks = env.ranks
    order = tuple(inboxes) if len(inboxes) == 1 else tuple(sorted(inboxes, key=ranks.__getitem__))
    options = env.options
    if number > options.max_supersteps or options.max_node_iterations is not None:
        _check_limits(env, point, number, order)
    pool = env.pool
    instances = pool.instances
    invocations: list[Invocation] = []
    for executor_id in order:
        executor = instances.get(executor_id)
        if executor is None:  # built on its first message
            try:
                executor = pool.get(executor_id)
            except Exception as error:  # its factory's code: the executor fails, on the record
                raise ExecutorFailedError(executor_id, number, error) from error
        rank = ranks[executor_id]
        inbox = inboxes[executor_id]
        if len(inbox) > 1:
            earlier: list[Sequence[Op]] = []  # shared: each reads the writes of those before
            for position, envelope in enumerate(inbox):
                spec = executor.find_handler(type(envelope.payload))
                timeout = spec.timeout or executor.timeout if spec is not None else None
                invocations.append(
                    Invocation(
                        env,
                        point,
                        number,
                        executor,
                        rank,
                        position,
                        envelope,
                        earlier,
                        spec,
                        timeout,
                    )
                )
            continue
        # One message, the common case, without the loop. (With no handler the
        # invocation fails, before any timeout could matter.)
        envelope = inbox[0]
        spec = executor.find_handler(type(envelope.payload))
        timeout = spec.timeout or executor.timeout if spec is not None else None
        # Built slot by slot (its ``outcome`` left unset, as its ``__init__`` leaves it):
        # a class with a Python ``__init__`` is called the slow way, and this runs
        # at every superstep; so is the plan.
        invocation: Any = _blank(Invocation)
        invocation.env = env
        invocation.point = point
        invocation.superstep = number
        invocation.executor = executor
        invocation.rank = rank
        invocation.position = 0
        invocation.envelope = envelope
        invocation.earlier = ()
        invocation.spec = spec
        invocation.timeout = timeout
        invocations.append(invocation)
    plan: Any = _blank(PlannedSuperstep)
    plan.number = number
    plan.invocations = invocations
    plan.order = order
    planned: PlannedSuperstep = plan
    return planned


def _check_limits(env: RunEnv, point: BarrierState, number: int, order: tuple[str, ...]) -> None:
    """Refuse a superstep past the run's limits, naming who keeps it going.

    Raises:
        IterationLimitExceeded: past ``max_supersteps`` or ``max_node_iterations``.
    """
    options = env.options
    if number > options.max_supersteps:
        looping = env.workflow.loop_members(point.pending)
        msg = (
            f"run {env.run_id!r} reached max_supersteps={options.max_supersteps} "
            f"while {', '.join(map(repr, looping))} kept sending; raise the limit or give "
            f"the loop an exit"
        )
        raise IterationLimitExceeded(msg, looping, number)
    limit = options.max_node_iterations
    if limit is not None:
        for executor_id in order:
            if point.iterations.get(executor_id, 0) + len(point.pending[executor_id]) > limit:
                msg = (
                    f"executor {executor_id!r} would run more than max_node_iterations="
                    f"{limit} times in run {env.run_id!r}"
                )
                raise IterationLimitExceeded(msg, (executor_id,), number)


@dataclass(slots=True)
class LaterWork:
    """What an invocation leaves for after its barrier; made only if it leaves any.

    Attributes:
        scheduled: (due, target, payload, key) from ``schedule_message``.
        approvals: (target, payload, handoff) handoffs awaiting approval.
        spawns: (record, function, arguments) background work to start.
        schedule_calls: How many ``schedule_message`` calls made keys so far.
        cancelled: Keys of scheduled messages to cancel (``cancel_scheduled``).
        continuing: Whether the message is to be delivered again (``continue_later``).
        continue_at: When, if not next superstep.
        outcome: The run's outcome it set (``ctx.set_outcome``): name and summary.
    """

    scheduled: list[tuple[float, str, Any, str]] = field(default_factory=list)
    approvals: list[tuple[str, Any, HandoffContext]] = field(default_factory=list)
    spawns: list[tuple[SpawnRecord, Callable[..., Awaitable[Any]], tuple[Any, ...]]] = field(
        default_factory=list
    )
    schedule_calls: int = 0
    cancelled: list[str] = field(default_factory=list)
    continuing: bool = False
    continue_at: float | None = None
    outcome: tuple[str, str | None] | None = None


@dataclass(slots=True)
class InvocationOutcome:
    """Everything one invocation hands to the barrier, as one value.

    A suspended invocation hands over its ``suspension`` and its ``events``
    only: what it sent, wrote or output is discarded with it.

    Attributes:
        sent: The routed sends, in send order.
        writes: The state writes, in write order.
        outputs: The values passed to ``yield_output``.
        events: The events kept for the barrier's batch (every attempt's).
        later: Scheduled messages, approvals and spawns, if any.
        suspension: The durable wait it reached, if it suspended.
    """

    sent: Sequence[Outgoing]
    writes: Sequence[Op]
    outputs: Sequence[Any]
    events: Sequence[WorkflowEvent]
    later: LaterWork | None
    suspension: Suspension | None
