"""``treadle.workers.connect``: the client of runs served by workers.

A client needs no workflow code to start, feed, cancel or watch runs: it
writes rows (a pending run with its input, inbox items) and reads run rows.
Only decoding a run's outputs and state (:meth:`Client.result`) needs the
workflow, given to :func:`connect` or imported from where the run's graph
says it lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from treadle._checkpoints._graph_description import decode_description
from treadle._engine._result import ENDED, RunResult, RunStatus
from treadle._exceptions import AppLoadError
from treadle._scaleout._apps import load_app
from treadle._scaleout._tick_queue import QueueStarter
from treadle._values._ids import new_run_id
from treadle._values._schedules import chosen_run_id
from treadle._values._serialization import JsonSerializer
from treadle._workflow import _actions as door
from treadle._workflow._following import follow
from treadle._workflow._inputs import coerce_input
from treadle._workflow._logged import logged_outputs_and_requests
from treadle._workflow._rights import actor_or_default
from treadle._workflow._runs import checked_responses
from treadle._workflow._schedule_actions import Schedules
from treadle._workflow._start_policy import NO_START_POLICY
from treadle._workflow._versions import Hosted, check_version

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping
    from types import TracebackType

    from treadle._graph._input_policy import InputPolicy
    from treadle._stores._pausing import PauseOutcome
    from treadle._stores._postgres import PostgresStore
    from treadle._stores._store import LoggedEvent, RunRecord
    from treadle._values._actors import Actor
    from treadle._values._serialization import Serializer
    from treadle._workflow._start_policy import StartPolicy
    from treadle._workflow._workflow import Workflow

# Where a run stops for now: it rests, is paused, or has ended.
_RESTING = ENDED | {RunStatus.AWAITING_INPUT, RunStatus.WAITING, RunStatus.PAUSED}


def connect(
    dsn: str,
    *,
    schema: str | None = None,
    workflows: Iterable[Workflow] = (),
    max_size: int = 4,
    actor: Actor | None = None,
) -> Client:
    """A client of the runs in the PostgreSQL database ``dsn``.

    Args:
        dsn: A libpq connection string (``postgresql://user@host/db``).
        schema: The schema holding treadle's tables, as the workers use it.
        workflows: Workflows whose values the client encodes and decodes
            with their own serializers (typed inputs, :meth:`Client.result`);
            without them, inputs and answers go as plain JSON and the worker
            turns them into the types its handlers take.
        max_size: Connections the client's pool may open.
        actor: Who acts through this client (default :meth:`Actor.python`:
            this program's user and host); every action it takes is checked
            against its rights and recorded with it, through the door
            ``client``.
    """
    from treadle._stores._postgres import PostgresStore  # noqa: PLC0415 - psycopg on demand

    store = PostgresStore(dsn, schema=schema, max_size=max_size)
    return Client(store, workflows, actor=actor)


class Client:
    """Starts, feeds, cancels, pauses, watches and lists runs served by ``treadle worker``s.

    Use as ``async with treadle.workers.connect(dsn) as client:``, or call
    :meth:`close`.
    """

    def __init__(
        self,
        store: PostgresStore,
        workflows: Iterable[Workflow] = (),
        *,
        actor: Actor | None = None,
    ) -> None:
        self.store = store
        self._workflows = Hosted(workflows)
        self._plain = JsonSerializer()
        chosen = actor_or_default(actor)
        # The record says it came through the client, unless a caller (the CLI) said its door.
        self.actor = chosen if actor is not None else chosen.through("client")

    async def start(
        self,
        workflow: str | Workflow,
        message: Any,
        *,
        run_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the run's stored deadline
        version: int | None = None,
        start_policy: StartPolicy | None = None,
        deduplication_id: str | None = None,
        key: str | None = None,
    ) -> str:
        """Start a run of the workflow named ``workflow``; return its id.

        With ``run_id``, starting is idempotent: if that run exists already
        (started by this or another client, even at the same moment), nothing
        new is created and the same id is returned.

        Under a start policy (``start_policy``, else the workflow's when this
        client was given it) or with ``deduplication_id``, the store decides
        the start first (``docs/flow-control.md``): the id returned is the
        new run's, queued or ready for a worker, or the run the start joined
        (the first with that deduplication id; the run a debounced start
        gave its input to).

        Args:
            workflow: The workflow's name (or the workflow itself).
            message: The input, for the start executor.
            run_id: The run's id; a fresh one when omitted (1 to 200 letters,
                digits or ``. _ ~ : @ + -``, as ``Workflow.run`` takes).
            timeout: Seconds from now to the run's deadline, enforced by workers.
            version: The version of the workflow to run. By default a
                workflow object's own; for a name, the newest this client was
                given, else the newest of the worker that starts it.
            start_policy: How this start takes its turn, instead of the
                workflow's (``StartPolicy()``: none).
            deduplication_id: A second start of the workflow with the same id
                starts nothing and returns the first run's id.
            key: The policy's key for this input, given as is: for a client
                without the code of the policy's ``key`` function.

        Raises:
            TypeError: The client has the workflow (given to :func:`connect`,
                or as ``workflow``) and ``message`` does not fit its start
                executor; nothing is stored. Without it, the worker that
                takes the run up checks the input, and fails the run naming
                what does not fit.
            RunExistsError: ``run_id`` belongs to a run of another workflow.
            StartRefusedError: Its start policy refused it (``when_busy="refuse"``).
        """
        if isinstance(workflow, str):
            name, known = workflow, self._workflows.get(workflow, version)
        else:
            name, known = workflow.name, workflow
        if version is None:
            version = known.version if known is not None else 0  # 0: the worker's newest
        else:
            check_version(version)
        serializer = known.serializer if known is not None else self._plain
        chosen = new_run_id() if run_id is None else chosen_run_id(run_id, self.actor)
        if known is not None:  # with the code, an input that does not fit is refused here
            try:
                message = coerce_input(known, message)
            except AppLoadError as error:
                raise TypeError(str(error)) from None
        payload = serializer.dumps(message)
        deadline = None if timeout is None else time.time() + timeout
        fields = known.search_fields.of_input(message, chosen) if known is not None else ()
        if start_policy is None and known is not None:
            start_policy = known.start_policy
        if deduplication_id is not None or not (start_policy is None or start_policy.is_empty):
            policy = start_policy or NO_START_POLICY
            request = policy.request(
                message,
                run_id=chosen,
                workflow=name,
                version=version,
                payload=payload,
                dedup_id=deduplication_id,
                deadline_at=deadline,
                started_by=self.actor.encode(),
                at=None,
                key=key,
            )
            return (await door.admit(self.store, request, actor=self.actor)).run_id
        await door.start_queued(
            self.store,
            chosen,
            name,
            payload,
            actor=self.actor,
            deadline_at=deadline,
            version=version,
            fields=fields,
        )
        return chosen

    @property
    def schedules(self) -> Schedules:
        """The store's schedules, changed as this client's actor; triggers queue their runs."""
        return Schedules(self.store, actor=self.actor, starter=QueueStarter(self.store))

    async def get(self, run_id: str) -> RunRecord:
        """The run's row: status, superstep, error, timers.

        Raises:
            RunNotFoundError: No such run.
        """
        return await self.store.get_run(run_id)

    async def wait(
        self,
        run_id: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a bound on waiting, as asyncio's
        until_rest: bool = False,
        poll_interval: float = 0.1,
    ) -> RunRecord:
        """Wait until the run has ended (or, ``until_rest``, rests awaiting something or is paused).

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        wanted = _RESTING if until_rest else ENDED
        async with asyncio.timeout(timeout):
            async for row in self.watch(run_id, poll_interval=poll_interval):
                if RunStatus(row.status) in wanted:
                    return row
        raise AssertionError  # pragma: no cover - watch ends only at an ended run

    async def watch(self, run_id: str, *, poll_interval: float = 0.1) -> AsyncIterator[RunRecord]:
        """The run's row each time it changes (a superstep committed, a new status).

        Ends after yielding an ended run. Events inside a superstep are not
        kept across processes; this is the stream a client can have of a run
        that runs elsewhere: one item per committed barrier it sees.
        """
        seen: tuple[Any, ...] | None = None
        while True:
            row = await self.get(run_id)
            marker = (row.status, row.superstep, row.checkpoint_id, row.error)
            if marker != seen:
                seen = marker
                yield row
                if RunStatus(row.status) in ENDED:
                    return
            await asyncio.sleep(poll_interval)

    async def events(
        self, run_id: str, *, after: int = 0, poll_interval: float = 0.1
    ) -> AsyncIterator[LoggedEvent]:
        """The run's events as they commit, with its live ones between them; ends with the run.

        Read from the run's log in the store (every event after ``after``,
        each once, in order), so a run a worker drives is followed from any
        process. Its live events (an agent's token deltas, progress; ``seq``
        0) come as they are raised, before their superstep commits: those
        raised after this began, never those before (see
        ``docs/live-events.md``).
        """
        following = follow(self.store, run_id, after=after, poll=poll_interval, live=True)
        async with contextlib.aclosing(following) as events:  # closed when this is
            async for event in events:
                yield event

    async def result(self, run_id: str) -> RunResult:
        """What the run has committed: outputs, state, pending requests.

        Decoded with the workflow given to :func:`connect`, or imported from
        where the run's graph says it lives. Where neither is possible (a
        client with no workflow code), the outputs and pending requests are
        read from the run's event log instead, as plain data, and ``state``
        is empty: only the run's code can decode it.
        """
        row = await self.get(run_id)
        status = RunStatus(row.status)
        if row.checkpoint_id is None:
            return RunResult(run_id=run_id, status=status, outputs=[], state={}, superstep=0)
        try:
            workflow = await self._workflow_of(row)
        except AppLoadError:
            outputs, pending = await logged_outputs_and_requests(self.store, row)
            return RunResult(
                run_id=run_id,
                status=status,
                outputs=outputs,
                state={},
                superstep=row.superstep,
                pending_requests=pending,
                wake_at=row.wake_at,
                last_checkpoint_id=row.checkpoint_id,
            )
        record = await self.store.load_checkpoint(run_id)
        restored = workflow.codec.decode(record, run_id=run_id)
        return RunResult(
            run_id=run_id,
            status=status,
            outputs=list(restored.outputs),
            state=restored.state,
            superstep=restored.superstep,
            pending_requests=restored.waits.pending_requests(),
            wake_at=restored.waits.next_wake_at(),
            last_checkpoint_id=record.info.checkpoint_id,
        )

    async def respond(self, run_id: str, responses: Mapping[str, Any]) -> None:
        """Answer pending requests (request id → answer); a worker applies them once.

        Delivered even while no worker runs: the answers wait in the run's
        inbox and are applied, exactly once, by the worker that next claims it.
        The store keeps the first answer to each request, so of clients
        answering one request at once exactly one is told it succeeded.

        When the run's workflow is given or importable here, each answer is
        first checked against the run's latest checkpoint (the request is
        waiting, the answer has the asked type); otherwise the worker checks
        it, and drops an answer it cannot apply.

        Raises:
            RunNotFoundError: No such run.
            RequestError: The run has ended.
            RequestAlreadyAnsweredError: Another answer to a request was kept
                first (the error names it); nothing was delivered.
            RequestExpiredError: A request's ``timeout=`` was kept first: it
                timed out (the error names when); nothing was delivered.
            UnknownRequestError, InvalidResponseError: An answer was refused
                by the check above; nothing was delivered.
        """
        responses = checked_responses(responses)
        row = await self.get(run_id)
        try:
            workflow: Workflow | None = await self._workflow_of(row)
        except AppLoadError:
            workflow = None
        # A worker may own the run right now; the inbox takes the answer meanwhile.
        await door.answer(
            self.store,
            run_id,
            responses,
            actor=self.actor,
            workflow=workflow,
            serializer=self._serializer(row.workflow, row.version),
            wait=True,
        )

    async def send_message(
        self,
        run_id: str,
        message: Any,
        *,
        target: str | None = None,
        policy: InputPolicy | None = None,
    ) -> None:
        """Deliver the next message of a session to the run (see :meth:`respond`).

        ``policy``: how it meets a turn running when a worker takes it (the
        workflow's own must not be ``reject``; see ``InputPolicy``). Without
        it, the message waits for the session to rest, never dropped, on a
        workflow with another policy.
        """
        row = await self.get(run_id)
        serializer = self._serializer(row.workflow, row.version)
        await door.send(
            self.store,
            run_id,
            message,
            actor=self.actor,
            serializer=serializer,
            target=target,
            policy=policy,
        )

    async def cancel(self, run_id: str) -> None:
        """Cancel the run wherever it is; a worker running it commits nothing more.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended already.
        """
        await door.cancel(self.store, run_id, actor=self.actor)

    async def pause(self, run_id: str) -> PauseOutcome:
        """Pause the run at a superstep boundary, with a checkpoint, until :meth:`unpause`.

        Decided by the store, once: a run no worker holds is ``paused`` at
        once; a run a worker is advancing pauses with that worker's next
        commit, which checkpoints its superstep and releases it (a run that
        ends there ends). No worker claims a paused run; answers and
        messages delivered meanwhile wait in its inbox. Pausing a paused
        run changes nothing.

        Returns:
            ``"paused"`` (it is paused now) or ``"requested"`` (its worker
            pauses it at its next superstep boundary).

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended (the error names its status).
        """
        return await door.pause(self.store, run_id, actor=self.actor)

    async def unpause(self, run_id: str) -> None:
        """Let a paused run go on: workers take it up at once (idle ones are told).

        Its status becomes its latest checkpoint's again (a run paused
        mid-run is taken up from there); what was delivered meanwhile is
        applied. A pause asked of a run that has not paused yet is withdrawn.

        Raises:
            RunNotFoundError: No such run.
            RequestError: It has ended, or is neither paused nor asked to pause.
        """
        await door.unpause(self.store, run_id, actor=self.actor)

    async def list_runs(
        self,
        *,
        status: str | RunStatus | None = None,
        workflow: str | None = None,
        limit: int | None = None,
        outcome: str | None = None,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first (``outcome``: the runs that ended so)."""
        wanted = None if status is None else RunStatus(status).value
        return await self.store.list_runs(
            status=wanted, workflow=workflow, limit=limit, outcome=outcome
        )

    async def close(self) -> None:
        """Close the client's connections."""
        await self.store.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def _serializer(self, name: str, version: int | None = None) -> Serializer:
        known = self._workflows.get(name, version or None)
        return known.serializer if known is not None else self._plain

    async def _workflow_of(self, row: RunRecord) -> Workflow:
        known = self._workflows.get(row.workflow, row.version)
        if known is not None:
            return known
        stored = await self.store.get_graph(row.run_id)
        origin = decode_description(row.run_id, stored).get("origin")
        if not origin:
            msg = (
                f"run {row.run_id!r} of workflow {row.workflow!r} does not record where "
                f"its workflow lives; pass it to treadle.workers.connect(..., workflows=[...])"
            )
            raise AppLoadError(msg)
        # The module it was loaded from; its version may sit beside a newer one there.
        module = origin.partition(":")[0]
        for workflow in [*load_app(origin), *load_app(module)]:
            if (workflow.name, workflow.version) == (row.workflow, row.version):
                self._workflows.add(workflow)
                return workflow
        msg = (
            f"run {row.run_id!r} is on version {row.version} of {row.workflow!r}, which "
            f"{module!r} no longer defines; pass that version to "
            f"treadle.workers.connect(..., workflows=[...])"
        )
        raise AppLoadError(msg)
