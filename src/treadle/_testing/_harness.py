"""A harness that drives a workflow to its end, deterministically, in no real time.

A test of a workflow with people and timers in it wants three things the
runtime leaves to others: someone to answer its requests, someone to send
its sessions their next messages, and time to pass. The harness plays all
three from a script: answers by executor id or response type, session
inputs in order, and a :class:`FakeClock` jumped to each next timer or
deadline the run rests on. The run is LOCKSTEP and ``deterministic`` on a
:class:`MemoryStore`, so the same script gives the same :class:`Trace`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._engine._result import RunStatus
from treadle._exceptions import RequestError
from treadle._stores._memory import MemoryStore
from treadle._testing._clock import FakeClock

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._engine._result import RunResult
    from treadle._engine._waits import PendingRequest
    from treadle._stores._store import LoggedEvent
    from treadle._workflow._workflow import Workflow

Answer = Any
"""An answer, or a callable that makes one from the request's payload."""


@dataclass(frozen=True, slots=True)
class HarnessSettings:
    """The script a :class:`Harness` plays.

    Attributes:
        answers: By executor id, or by response type (the type itself or
            its registered name): the answer, or a callable of the payload.
        inputs: Session messages, sent one by one whenever the run waits for input.
        max_rounds: Most times the run may rest before the harness gives up.
    """

    answers: Mapping[str | type, Answer] = field(default_factory=dict)
    inputs: Sequence[Any] = ()
    max_rounds: int = 1000


@dataclass(frozen=True, slots=True)
class Trace:
    """What a harnessed run did: its result and its whole event log."""

    result: RunResult
    events: tuple[LoggedEvent, ...]
    clock: FakeClock

    @property
    def status(self) -> RunStatus:
        """Where the run ended."""
        return self.result.status

    @property
    def outputs(self) -> list[Any]:
        """Its outputs, in commit order."""
        return list(self.result.outputs)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request it asked: executor id, request id, payload, response type."""
        return [
            {"executor_id": e.executor_id, **e.data} for e in self.events if e.kind == "request"
        ]

    def executors(self) -> list[str]:
        """The executors whose handlers completed, in commit order."""
        return [str(e.executor_id) for e in self.events if e.kind == "executor_completed"]

    def kinds(self) -> list[str]:
        """Every event's kind, in order."""
        return [e.kind for e in self.events]

    def assert_order(self, expected: Sequence[str]) -> None:
        """Assert that ``expected`` executors completed in this order (others may come between).

        Raises:
            AssertionError: they did not, with the order they did complete in.
        """
        ran = iter(self.executors())
        for executor_id in expected:
            if not any(done == executor_id for done in ran):
                msg = f"expected {list(expected)} in order; completed: {self.executors()}"
                raise AssertionError(msg)


class Harness:
    """Runs a workflow deterministically with scripted answers, inputs and a fake clock.

    Args:
        workflow: The workflow under test.
        answers, inputs: See :class:`HarnessSettings` (or pass ``settings``).
        clock: The fake clock (default: one at 1_700_000_000).
        settings: The whole script as one value.
    """

    def __init__(
        self,
        workflow: Workflow,
        *,
        answers: Mapping[str | type, Answer] | None = None,
        inputs: Sequence[Any] = (),
        clock: FakeClock | None = None,
        settings: HarnessSettings | None = None,
    ) -> None:
        """Keep the workflow and the script."""
        self.workflow = workflow
        self.settings = settings or HarnessSettings(answers=answers or {}, inputs=inputs)
        self.clock = clock or FakeClock()

    async def run(self, message: Any, *, state: Mapping[str, Any] | None = None) -> Trace:
        """Run ``message`` until the run ends, playing the script; return its trace.

        Raises:
            RequestError: the run waits for something the script does not give.
        """
        store = MemoryStore()
        inputs = deque(self.settings.inputs)
        options: dict[str, Any] = {"deterministic": True, "clock": self.clock}
        try:
            result = await self.workflow.run(message, state=state, store=store, **options)
            for _ in range(self.settings.max_rounds):
                if result.status not in (RunStatus.AWAITING_INPUT, RunStatus.WAITING):
                    break
                result = await self._next(store, result, inputs, options)
            events = tuple(await store.read_events(result.run_id))
        finally:
            await store.close()
        return Trace(result, events, self.clock)

    async def _next(
        self, store: MemoryStore, result: RunResult, inputs: deque[Any], options: dict[str, Any]
    ) -> RunResult:
        run_id = result.run_id
        answers = {
            r.request_id: self._answer(r)
            for r in result.pending_requests
            if self._scripted(r) is not None
        }
        if answers:
            return await self.workflow.respond(run_id, answers, store=store, **options)
        if result.status is RunStatus.AWAITING_INPUT and inputs and not result.pending_requests:
            return await self.workflow.send_message(
                run_id, inputs.popleft(), store=store, **options
            )
        due = [r.deadline_at for r in result.pending_requests if r.deadline_at is not None]
        wake = min([*due, *([result.wake_at] if result.wake_at is not None else [])], default=None)
        if wake is None:
            waiting = [(r.executor_id, r.response_type) for r in result.pending_requests]
            msg = f"run {run_id} waits for what the script does not give: {waiting or 'input'}"
            raise RequestError(msg)
        await self.clock.advance_to(max(wake, self.clock.now()))
        return await self.workflow.resume(run_id, store=store, **options)

    def _scripted(self, request: PendingRequest) -> tuple[Answer] | None:
        answers = self.settings.answers
        for key, answer in answers.items():
            name = key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}"
            if name in (request.executor_id, request.response_type):
                return (answer,)
        return None

    def _answer(self, request: PendingRequest) -> Any:
        scripted = self._scripted(request)
        assert scripted is not None  # noqa: S101 - only asked for scripted requests
        (answer,) = scripted
        return answer(request.payload) if callable(answer) else answer
