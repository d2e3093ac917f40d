"""The ``Workflow`` users run: entry points for runs, streams and stored runs.

A ``Workflow`` is a validated graph (``WorkflowGraph``) plus the ways to run
it: every run gets its own :class:`RunLoop`, so one workflow object serves
any number of concurrent runs. Executors given as factories are instantiated
per run; instances given directly are shared by every run, so unless
declared ``shareable`` a second concurrent run that would use one is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

from treadle._engine._options import (
    RunOptionArgs,
    RunOptions,
    continuing_options,
    run_options,
)
from treadle._engine._result import RunResult
from treadle._exceptions import RunPausedError
from treadle._workflow import _actions as door
from treadle._workflow._driving import continue_taken, drive
from treadle._workflow._history import RunHistory, run_history
from treadle._workflow._launch import Launch, open_run, plain_launch
from treadle._workflow._pausing import paused_result, stored_result
from treadle._workflow._rights import actor_or_default, started_by
from treadle._workflow._runs import checked_responses, take_over
from treadle._workflow._sessions import taken_after_sending
from treadle._workflow._start_policy import NO_START_POLICY
from treadle._workflow._starting import admit_start
from treadle._workflow._stream import ExecutionMode, WorkflowStream
from treadle._workflow._sync import SyncEventStream, run_in_thread
from treadle._workflow._workflow_graph import WorkflowGraph

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._graph._input_policy import InputPolicy
    from treadle._stores._pausing import PauseOutcome
    from treadle._stores._store import Store
    from treadle._values._actors import Actor
    from treadle._workflow._start_policy import StartPolicy


class Workflow(WorkflowGraph):
    """A validated, immutable graph of executors; build one with ``WorkflowBuilder``.

    Call :meth:`run` for a result, :meth:`stream` for live events, and their
    ``_sync`` twins from code that is not async; :meth:`resume`,
    :meth:`respond`, :meth:`send_message`, :meth:`fork`, :meth:`history`,
    :meth:`cancel`, :meth:`pause`, :meth:`unpause` and :meth:`prune` work on
    stored runs, each with its ``_sync`` twin too (a thin adapter over it).

    Each of them, and :meth:`run` and :meth:`stream` with a store, takes the
    ``actor`` acting (default :meth:`Actor.python`: this program's user and
    host, an admin): its right is checked (``ActionRefusedError`` otherwise),
    and the store records it with the action, in the run's log and the audit
    log (``treadle._workflow._actions``, the one door).
    """

    async def run(
        self,
        message: Any,
        *,
        run_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        store: Store | None = None,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        start_policy: StartPolicy | None = None,
        deduplication_id: str | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> RunResult:
        """Run until the run ends or rests, and return the result.

        Args:
            message: The input, delivered to the start executor in superstep 1.
            run_id: The run's id (default: a fresh UUID): 1 to 200 letters,
                digits or ``. _ ~ : @ + -``, so that every door can name it.
            state: Initial shared state, over the declared defaults.
            store: Checkpoint every barrier here (default: the workflow's
                store; none means the run lives in memory only).
            options: How the run runs (:class:`RunOptions`: limits, clock,
                deadline, durability, retention, events).
            actor: Who starts it (default this program): its store records it.
            start_policy: How this start takes its turn (:class:`StartPolicy`),
                instead of the workflow's; ``StartPolicy()``: none.
            deduplication_id: A second start of the workflow with the same id
                (from any process, even at the same moment) starts nothing: it
                returns the first run as its store has it (``deduplicated``).
            **overrides: Any field of ``RunOptions`` as a keyword
                (``timeout=60``); keywords win over ``options``.

        Under a start policy (or with a deduplication id) the store decides
        the start first: a run admitted at once runs here as any other; one
        that must wait its turn (its key or the workflow's queue is full, or
        a debounce window is open) returns at once as ``QUEUED``, with its
        id, and whoever serves the store starts it (``docs/flow-control.md``).

        A run that reaches a durable wait rests and returns: ``AWAITING_INPUT``
        for requests and session input, ``WAITING`` for timers when it has a
        store (a ``Runtime`` or ``resume`` continues it). Without a store
        there is nothing to resume from, so it sleeps through its timers, and
        where it would rest on a request it fails with
        ``UnanswerableWaitError`` (``rest_without_store=True``: it returns
        the ``AWAITING_INPUT`` result instead).

        Raises:
            WorkflowRunError: The run failed; ``error.result`` has what was
                committed before the failing superstep.
            StartRefusedError: Its start policy refused it (``when_busy="refuse"``).
            TypeError, ValueError: an option is not valid (nothing ran).
        """
        chosen = run_options(options, overrides)
        policy = self.start_policy if start_policy is None else start_policy
        if deduplication_id is None and (policy is NO_START_POLICY or policy.is_empty):
            launch = plain_launch(message, run_id, state, chosen, store, started_by(actor))
            return await drive(self, launch)
        launch = Launch(message, None, run_id, state, chosen, store)
        who = actor_or_default(actor)
        admitted = await admit_start(self, launch, policy, deduplication_id, who)
        if isinstance(admitted, RunResult):
            return admitted
        return await drive(self, admitted)

    def stream(
        self,
        message: Any,
        *,
        mode: ExecutionMode = ExecutionMode.OFF_THREAD,
        max_buffered_events: int | None = None,
        run_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        store: Store | None = None,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> WorkflowStream:
        """Start a run and stream its events (see :class:`ExecutionMode`).

        Use as ``async with workflow.stream(x) as events: async for e in
        events: ...``. Arguments are those of :meth:`run`, plus ``mode`` and
        ``max_buffered_events`` (OFF_THREAD backpressure).

        Raises:
            TypeError, ValueError: an option is not valid (nothing ran).
        """
        chosen = run_options(options, overrides)
        if not self.start_policy.is_empty:
            msg = f"workflow {self.name!r} has a start policy (starts may wait): use run()"
            raise ValueError(msg)
        launch = Launch(message, None, run_id, state, chosen, store, started_by=started_by(actor))
        return WorkflowStream(lambda sink: open_run(self, launch, sink), mode, max_buffered_events)

    def run_sync(self, message: Any, **options: Any) -> RunResult:
        """:meth:`run` for synchronous callers, on a dedicated loop thread."""
        return run_in_thread(lambda: self.run(message, **options))

    def stream_sync(self, message: Any, **options: Any) -> SyncEventStream:
        """:meth:`stream` for synchronous callers, on a dedicated loop thread.

        Use it in a ``with`` block (or close it): leaving early cancels the run.
        """
        return SyncEventStream(lambda: self.stream(message, **options))

    # -- durable runs ---------------------------------------------------------------
    async def resume(
        self,
        run_id: str,
        checkpoint_id: str | None = None,
        *,
        store: Store | None = None,
        wait: bool = False,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> RunResult:
        """Continue a stored run from its latest checkpoint, or from ``checkpoint_id``.

        Only supersteps after the checkpoint run again. Resuming a run whose
        latest checkpoint is final returns its result and runs nothing;
        resuming from an older checkpoint branches the run's history there.
        The run is taken over first (its lease): while another process owns
        it, this raises ``RunBusyError``, or with ``wait=True`` waits until
        the owner lets go (its run rests, or its lease runs out). Answers
        and messages delivered to the run and not yet applied are applied.
        A paused run is unpaused first, as :meth:`unpause` does.
        ``options`` (or their keywords) are those of :meth:`run` but
        ``timeout``: a stored run keeps the deadline it started with.

        Raises:
            RunBusyError: another process owns the run (without ``wait``).
            GraphChangedError: the run was written by a different graph
                (nothing runs; the error lists what changed).
            CheckpointCorruptError: the checkpoint fails its checksum.
            RunNotFoundError, CheckpointNotFoundError: nothing to resume.
            RequestError: the run is queued by its start policy (it starts
                when its turn comes; nothing is taken or recorded).
            WorkflowRunError: the resumed run failed.
            TypeError, ValueError: an option is not valid (nothing ran).
        """
        chosen_options = continuing_options(options, overrides)
        chosen = self.store_for(store)
        who = actor_or_default(actor)
        taken = await door.resume(self, chosen, run_id, checkpoint_id, actor=who, wait=wait)
        return await continue_taken(self, taken, chosen, chosen_options)

    def resume_sync(
        self, run_id: str, checkpoint_id: str | None = None, **options: Any
    ) -> RunResult:
        """:meth:`resume` for synchronous callers."""
        return run_in_thread(lambda: self.resume(run_id, checkpoint_id, **options))

    async def fork(
        self,
        run_id: str,
        checkpoint_id: str,
        state_patch: Mapping[str, Any] | None = None,
        *,
        new_run_id: str | None = None,
        store: Store | None = None,
        actor: Actor | None = None,
    ) -> str:
        """Branch a new run from a checkpoint, optionally patching its state.

        The new run's first checkpoint is the patched copy; it records its
        parent run and checkpoint, and the parent lists it among its forks.
        The parent is untouched. Continue the new run with :meth:`resume`.
        """
        chosen = self.store_for(store)
        who = actor_or_default(actor)
        return await door.fork(
            self, chosen, run_id, checkpoint_id, state_patch, new_run_id, actor=who
        )

    def fork_sync(
        self,
        run_id: str,
        checkpoint_id: str,
        state_patch: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """:meth:`fork` for synchronous callers."""
        return run_in_thread(lambda: self.fork(run_id, checkpoint_id, state_patch, **options))

    def respond_sync(self, run_id: str, responses: Mapping[str, Any], **options: Any) -> RunResult:
        """:meth:`respond` for synchronous callers."""
        return run_in_thread(lambda: self.respond(run_id, responses, **options))

    def send_message_sync(self, run_id: str, message: Any, **options: Any) -> RunResult:
        """:meth:`send_message` for synchronous callers."""
        return run_in_thread(lambda: self.send_message(run_id, message, **options))

    def cancel_sync(self, run_id: str, **options: Any) -> None:
        """:meth:`cancel` for synchronous callers."""
        run_in_thread(lambda: self.cancel(run_id, **options))

    def pause_sync(self, run_id: str, **options: Any) -> PauseOutcome:
        """:meth:`pause` for synchronous callers."""
        return run_in_thread(lambda: self.pause(run_id, **options))

    def unpause_sync(self, run_id: str, **options: Any) -> RunResult:
        """:meth:`unpause` for synchronous callers."""
        return run_in_thread(lambda: self.unpause(run_id, **options))

    def history_sync(self, run_id: str, *, store: Store | None = None) -> RunHistory:
        """:meth:`history` for synchronous callers."""
        return run_in_thread(lambda: self.history(run_id, store=store))

    def prune_sync(self, run_id: str, keep_last: int, **options: Any) -> int:
        """:meth:`prune` for synchronous callers."""
        return run_in_thread(lambda: self.prune(run_id, keep_last, **options))

    async def respond(
        self,
        run_id: str,
        responses: Mapping[str, Any],
        *,
        store: Store | None = None,
        wait: bool = False,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> RunResult:
        """Answer pending requests of a stored run and continue it.

        Every answer is checked first (the request must be waiting, the value
        must have the asked type); if any is refused nothing changes. The
        answers are then delivered to the run's inbox, where the store keeps
        the first answer to each request and refuses any later one; this
        call then takes the run over (waiting for a current owner to let
        go) and continues it. A caller is told it succeeded only if its
        answers were the ones applied. A paused run keeps the answers in
        its inbox, applied once it is unpaused: the result then says
        ``PAUSED`` (its requests still pending), and nothing ran.

        Args:
            run_id: The run.
            responses: Request id → answer.
            store: Where the run lives (default: the workflow's store).
            wait: While another process owns the run, wait for it instead
                of raising ``RunBusyError``.
            options: How the continued run runs (those of :meth:`run` but
                ``timeout``: a stored run keeps the deadline it started with).
            actor: Who answers (default this program): the requests' approvers
                and four eyes are checked, and the store records who did.
            **overrides: Any field of ``RunOptions`` as a keyword.

        Raises:
            RequestAlreadyAnsweredError: another answer to a request won
                (the error names it).
            RequestExpiredError: a request's ``timeout=`` won: it timed out
                before this answer reached the store (the error names when).
            UnknownRequestError: a request id is not waiting.
            InvalidResponseError: an answer has the wrong type.
            RunBusyError: another process owns the run (without ``wait``).
            TypeError, ValueError: an option is not valid (nothing changed).
        """
        chosen_options = continuing_options(options, overrides)
        if not responses:
            msg = "respond() needs at least one {request_id: answer}"
            raise ValueError(msg)
        chosen = self.store_for(store)
        who = actor_or_default(actor)
        answers = checked_responses(responses)
        await door.answer(chosen, run_id, answers, actor=who, workflow=self, wait=wait)
        # Delivered: whoever owns the run now applies it, or this caller once it may.
        try:
            taken = await take_over(self, chosen, run_id, wait=True)
        except RunPausedError:  # kept in its inbox, applied once the run goes on
            return await paused_result(self, chosen, run_id)
        return await continue_taken(self, taken, chosen, chosen_options)

    async def send_message(
        self,
        run_id: str,
        message: Any,
        *,
        target: str | None = None,
        store: Store | None = None,
        wait: bool = False,
        policy: InputPolicy | None = None,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> RunResult:
        """Deliver the next message of a session to a stored run, and continue it if it may.

        It goes to the invocation waiting in ``ctx.wait_for_input()`` (the
        first in delivery order, or the one of executor ``target``). A
        message that arrives while a turn is running meets the workflow's
        input policy (``WorkflowBuilder(input_policy=...)``), or ``policy``
        on a workflow whose own is not ``reject`` (see :class:`InputPolicy`).

        Under ``reject`` (the default) the run is taken over first, then the
        message is checked against its latest checkpoint, delivered and
        applied: of two senders at once, the second is refused with
        ``SessionBusyError``. Under the other policies the message is put in
        the run's inbox, where the store orders it among the session's
        messages; if nobody drives the run this call continues it here,
        otherwise the process driving it takes the message as its policy
        says, and this returns the run as it stands (``RUNNING``), or with
        ``wait`` once the session has come to rest.
        ``options`` (or their keywords) are those of :meth:`run` but
        ``timeout``: a stored run keeps the deadline it started with.

        Raises:
            SessionBusyError: ``reject``, and a turn is running (a
                ``RunBusyError``; without ``wait``, or with it once the run
                was let go and still does not wait for input).
            RequestError: the run has ended, or ``target`` waits for nothing.
            RunPausedError: the run is paused (``reject``; nothing was
                delivered: the message is checked against a run this call
                holds, and nobody holds a paused run).
            TypeError, ValueError: an option or ``policy`` is not valid
                (nothing changed).
        """
        chosen_options = continuing_options(options, overrides)
        chosen = self.store_for(store)
        who = actor_or_default(actor)
        ownership = await door.send(
            chosen, run_id, message, actor=who, workflow=self, target=target, wait=wait,
            policy=policy,
        )  # fmt: skip
        taken = await taken_after_sending(self, chosen, run_id, ownership, wait=wait)
        if taken is None:
            return await stored_result(self, chosen, run_id)
        return await continue_taken(self, taken, chosen, chosen_options)

    async def cancel(
        self, run_id: str, *, store: Store | None = None, actor: Actor | None = None
    ) -> None:
        """Cancel a stored run, wherever it is.

        Its last checkpoint stays intact; it is never invoked again (timer
        services skip it, and ``resume`` refuses it). A process advancing it
        right now commits nothing more: its caller gets ``RunCancelledError``.
        """
        await door.cancel(self.store_for(store), run_id, actor=actor_or_default(actor))

    async def pause(
        self, run_id: str, *, store: Store | None = None, actor: Actor | None = None
    ) -> PauseOutcome:
        """Pause a stored run at a superstep boundary, with a checkpoint, until it is unpaused.

        Decided by the store, once: a run nobody is advancing (resting,
        orphaned, queued) is ``PAUSED`` at once, at its latest checkpoint; a
        run a process is advancing right now pauses with that process's next
        commit, which checkpoints its superstep and gives the run up (that
        process's ``run`` or ``resume`` returns a ``PAUSED`` result). A run
        that ends at that barrier ends. While paused nothing advances it:
        timer services and workers pass it over, its timers wait,
        ``send_message`` is refused and ``respond`` keeps the answer for
        later. Pausing a paused run changes nothing.

        Returns:
            ``"paused"``: it is paused now; ``"requested"``: its owner
            pauses it at its next superstep boundary.

        Raises:
            RequestError: the run has ended (the error names its status).
            RunNotFoundError: no such run.
        """
        return await door.pause(self.store_for(store), run_id, actor=actor_or_default(actor))

    async def unpause(
        self,
        run_id: str,
        *,
        store: Store | None = None,
        wait: bool = False,
        options: RunOptions | None = None,
        actor: Actor | None = None,
        **overrides: Unpack[RunOptionArgs],
    ) -> RunResult:
        """Let a paused run go on, here: continue it as :meth:`resume` does, and return its result.

        The run is unpaused and leased to this process in one step, so no
        timer service or worker takes it up first; what was delivered while
        it was paused is applied. A pause asked of a run that has not paused
        yet is withdrawn if its owner's lease ran out; while its owner still
        holds the lease this raises ``RunBusyError``, or with ``wait=True``
        waits for it to pause, then goes on. (To let a timer service or
        worker go on with it instead, unpause it through the store, the
        client or ``treadle unpause``.)

        Raises:
            RequestError: the run has ended, or is neither paused nor asked to pause.
            RunBusyError: its owner has not paused it yet (without ``wait``).
            RunNotFoundError: no such run.
            WorkflowRunError: the run failed as it went on.
            TypeError, ValueError: an option is not valid (nothing changed).
        """
        chosen_options = continuing_options(options, overrides)
        chosen = self.store_for(store)
        who = actor_or_default(actor)
        taken = await door.unpause_here(self, chosen, run_id, actor=who, wait=wait)
        return await continue_taken(self, taken, chosen, chosen_options)

    async def history(self, run_id: str, *, store: Store | None = None) -> RunHistory:
        """A stored run's checkpoints, oldest first, with its lineage (time travel)."""
        return await run_history(self.store_for(store), run_id)

    async def prune(
        self, run_id: str, keep_last: int, *, store: Store | None = None, actor: Actor | None = None
    ) -> int:
        """Delete all but the newest ``keep_last`` checkpoints; return how many went."""
        if keep_last < 1:
            msg = f"keep_last must be at least 1, got {keep_last}"
            raise ValueError(msg)
        who = actor_or_default(actor)
        return await door.prune(self.store_for(store), run_id, keep_last, actor=who)
