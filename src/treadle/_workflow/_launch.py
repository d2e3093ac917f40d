"""Opening a run: fresh from an input, or continued from a checkpoint.

Every entry point (``run``, ``stream``, ``resume``, their sync adapters)
opens runs through :func:`open_run`, given one frozen :class:`Launch`, so
claiming executor instances, wiring the checkpointer and creating the run in
the store happen in one place and in one order.
"""

from __future__ import annotations

import functools
import json
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from treadle._checkpoints._checkpointer import Checkpointer
from treadle._checkpoints._inbox import InboxLedger
from treadle._checkpoints._journal import EventJournal
from treadle._checkpoints._leases import LeaseKeeper
from treadle._checkpoints._ownership import Ownership
from treadle._checkpoints._session_inbox import SessionInbox
from treadle._engine._arrivals import Answer, Expiry, SessionInput
from treadle._engine._env import Opening
from treadle._engine._metrics import RunMeter
from treadle._engine._opening import Continuation, open_fresh, open_loop
from treadle._engine._options import DEFAULT_OPTIONS, RunOptions
from treadle._stores._store import checked_store
from treadle._values._actors import Actor
from treadle._values._ids import checked_run_id, new_run_id
from treadle._values._schedules import tick_run_id_refusal
from treadle._workflow._inputs import misdirected
from treadle._workflow._limit_board import limiting_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from treadle._checkpoints._codec import RestoredRun
    from treadle._engine._arrivals import Arrival
    from treadle._engine._barrier import EventSink
    from treadle._engine._opening import DrivenRun
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow

_NO_INPUT: Any = object()
_NO_ANSWERS: Mapping[str, Any] = MappingProxyType({})
_NO_EXPIRED: frozenset[str] = frozenset()
_tuple_new = tuple.__new__


class Launch(NamedTuple):
    """What one run is opened with.

    A named tuple rather than a frozen dataclass: as immutable, and every
    run builds one, at a quarter of the cost.

    Attributes:
        message: The input (ignored when ``restored`` is given).
        restored: A decoded checkpoint to continue from.
        run_id: The run's id; a fresh UUID for new runs when omitted.
        state: Initial shared state over the declared defaults.
        options: How the run runs (checked already, where the caller entered).
        store: Where to checkpoint (``None``: the workflow's store, if any).
        answers: Request id → answer, applied to a restored run before it
            steps (``respond``).
        inputs: (message, target executor or None) pairs delivered to
            invocations waiting for session input (``send_message``).
        expired: Request ids whose timeout the store kept as their answer
            (a process that decided it died before committing): they time out.
        ownership: The lease a stored run is continued under, taken before
            its checkpoint was read (a new run takes one as it is created).
        started_by: Who starts a new run (an actor as JSON text): its store
            records ``run_started`` with the run's row, which keeps it.
        leases: The keeper of the driver that will drive the run (``None``:
            the keeper of the task opening it, else one of the run's own).
    """

    message: Any = _NO_INPUT
    restored: RestoredRun | None = None
    run_id: str | None = None
    state: Mapping[str, Any] | None = None
    options: RunOptions = DEFAULT_OPTIONS
    store: Store | None = None
    answers: Mapping[str, Any] = _NO_ANSWERS
    inputs: tuple[tuple[Any, str | None], ...] = ()
    ownership: Ownership | None = None
    expired: frozenset[str] = _NO_EXPIRED
    started_by: str | None = None
    leases: LeaseKeeper | None = None


def plain_launch(
    message: Any,
    run_id: str | None,
    state: Mapping[str, Any] | None,
    options: RunOptions,
    store: Store | None,
    started_by: str | None,
) -> Launch:
    """``Launch(message, None, run_id, state, options, store, started_by=started_by)``.

    Made as a named tuple's own ``__new__`` makes it, without that call: calling
    the class goes the slow way (a Python ``__new__``, its keywords and defaults),
    and every plain ``Workflow.run`` makes one.
    """
    fields = (message, None, run_id, state, options, store)
    launch: Launch = _tuple_new(
        Launch, (*fields, _NO_ANSWERS, (), None, _NO_EXPIRED, started_by, None)
    )
    return launch


def _checked(workflow: Workflow, launch: Launch) -> Store | None:
    """The launch's store, once it and the launch are fit to open a run with.

    Raises:
        TypeError: a new run without an input, a store that is not one, a
            run id that is not a ``str``.
        ValueError: a run id other doors could not name (``checked_run_id``),
            or a schedule's tick's, given by another (``tick_run_id_refusal``).
    """
    if launch.restored is None and launch.message is _NO_INPUT:
        msg = "a new run needs an input message"
        raise TypeError(msg)
    if launch.run_id is not None and launch.ownership is None:  # a new run's, made here
        checked_run_id(launch.run_id)  # (a queued run's was checked when it was queued)
        if tick_run_id_refusal(launch.run_id) is not None:  # a schedule's form: its own?
            starter = launch.started_by
            actor = None if starter is None else Actor.from_json(json.loads(starter))
            refusal = tick_run_id_refusal(launch.run_id, actor)
            if refusal is not None:
                raise ValueError(refusal)
    store = launch.store if launch.store is not None else workflow.store
    return None if store is None else checked_store(store)


async def open_run(
    workflow: Workflow, launch: Launch, sink: EventSink | None
) -> tuple[DrivenRun, Callable[[], Awaitable[None]]]:
    """A loop ready to step, and the coroutine function that lets go of it.

    Letting go releases the run's executors and, for a stored run, takes
    its lease from its keeper and gives it up if the last commit did not.
    """
    store = _checked(workflow, launch)
    # With nowhere to rest, a run sleeps through its timers (whatever opened it).
    settings = workflow.settings(launch.options, sleep_through_timers=store is None)
    restored = launch.restored
    run_id = launch.run_id or (restored.run_id if restored else None) or new_run_id()
    ownership = launch.ownership
    if store is not None and ownership is None and restored is None:
        ownership = Ownership.new(store, run_id)
    # A run with no lease has nothing for a keeper to hold.
    keeper, lone = (None, None) if ownership is None else _keepers(launch.leases)
    pool, free_executors = workflow.claim(run_id)
    release = _Release(free_executors, ownership, lone)

    try:
        checkpointer = None
        journal = None
        if store is not None and launch.options.event_log:
            if restored is None:
                sink = journal = EventJournal(sink, settings.clock, live=store.live)
            else:
                sink = journal = EventJournal(
                    sink,
                    settings.clock,
                    restored.status,
                    restored.superstep,
                    owner=ownership.lease.owner if ownership is not None else None,
                    live=store.live,
                )
        if store is not None:
            checkpointer = Checkpointer(
                store,
                workflow.codec,
                workflow.fingerprint,
                base=restored,
                keep_last=launch.options.keep_last,
                durability=settings.durability,
                ownership=ownership,
                clock=settings.clock,
                journal=journal,
                fields=workflow.search_fields,
                meter=None
                if settings.metrics is None
                else RunMeter(settings.metrics, workflow.name),
            )
        # Deadlines are decided against answers at the store, when there is one.
        ledger = inputs = None
        if store is not None:
            watches = workflow.input_policy.watches_turns
            ledger = InboxLedger(
                store, run_id, workflow.serializer, ownership, hold_messages=watches
            )
            if watches and ownership is not None:
                inputs = SessionInbox(
                    store,
                    run_id,
                    workflow.serializer,
                    ownership,
                    functools.partial(misdirected, workflow),
                )
        limiting, limit_scope = limiting_for(workflow, store, ownership)
        # Every field given in order, made as the named tuple's own __new__ makes it
        # (see plain_launch): calling the class costs each run.
        opening: Opening = _tuple_new(
            Opening,
            (
                workflow,
                run_id,
                settings,
                pool,
                sink,
                checkpointer,
                ledger,
                "",
                None,
                limiting,
                inputs,
                limit_scope,
                0 if restored is None else restored.branch,
            ),
        )
        if restored is not None:
            arrivals: list[Arrival] = [Answer(rid, value) for rid, value in launch.answers.items()]
            arrivals.extend(SessionInput(message, target) for message, target in launch.inputs)
            if launch.expired:
                arrivals.append(Expiry(launch.expired))
            loop = open_loop(opening, Continuation(restored, restored.snapshots, arrivals))
            # No status write here: the next barrier's commit records
            # ``running`` (or wherever the run rests) in the same transaction.
            # Until then the row keeps its resting status, so a run whose
            # process dies before that commit is still found due and resumed.
        else:
            loop = open_fresh(opening, launch.message, launch.state)
            if checkpointer is not None:
                await checkpointer.create(
                    workflow.name,
                    workflow.stored_description,
                    loop.barrier_state(),
                    pool.snapshots(),
                    version=workflow.version,
                    started_by=launch.started_by,
                    input=launch.message,
                )
    except BaseException:
        await release()
        raise
    if keeper is not None:  # there is one only for a run with a lease
        keeper.hold(ownership)  # type: ignore[arg-type]
    return loop, release


def _keepers(leases: LeaseKeeper | None) -> tuple[LeaseKeeper, LeaseKeeper | None]:
    """The keeper to hold a run's lease, and the run's own if it is a lone run.

    ``leases``, else that of the driver whose task this is, else one of the
    run's own (then also returned second): nobody else drives it.
    """
    keeper = leases or LeaseKeeper.current()
    if keeper is not None:
        return keeper, None
    lone = LeaseKeeper()
    return lone, lone


class _Release:
    """What lets go of a run: its executors, its lease, and the keeper of a lone run.

    An object called as a coroutine function, rather than a closure: one
    object per run where a closure over three values made five (the function,
    its tuple of cells and the cells), each walked by the garbage collector at
    every pass while the run is in flight.
    """

    __slots__ = ("_free_executors", "_lone", "_ownership")

    def __init__(
        self,
        free_executors: Callable[[], None],
        ownership: Ownership | None,
        lone: LeaseKeeper | None,
    ) -> None:
        self._free_executors = free_executors
        self._ownership = ownership
        self._lone = lone

    async def __call__(self) -> None:
        self._free_executors()
        if self._ownership is not None:
            await self._ownership.close()
        if self._lone is not None:  # nobody else drives the run: its keeper goes with it
            await self._lone.close()
