"""Durable waits in one process: requests, sessions, timers, polling, journals."""

import asyncio
import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

import pytest

from treadle import (
    ExecutionMode,
    Executor,
    ExponentialBackoff,
    HandoffRefused,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
    handler,
)
from treadle.errors import (
    ExecutorFailedError,
    InvalidResponseError,
    JournalMismatchError,
    PollTimeout,
    RequestError,
    RunCancelledError,
    UnknownRequestError,
)
from treadle.events import OutputEvent, RequestEvent
from treadle.stores import MemoryStore, SqliteStore
from treadle.testing import FakeClock


@dataclass(frozen=True)
class Approval:
    approved: bool
    reviewer: str


def approval_workflow(store, submissions: list):
    @executor
    async def review(doc: str, ctx: WorkflowContext) -> None:
        ctx.state.set("seen", doc)  # discarded while suspended, committed at the end
        ticket = await ctx.step("open ticket", lambda: submissions.append(doc) or len(submissions))
        verdict = await ctx.request({"doc": doc, "ticket": ticket}, Approval)
        ctx.yield_output((ticket, verdict.approved, verdict.reviewer))

    return WorkflowBuilder(start=review, store=store).register_type(Approval).build()


async def test_a_request_rests_the_run_until_answered_and_steps_run_once():
    store, submissions = MemoryStore(), []
    wf = approval_workflow(store, submissions)
    asked = await wf.run("contract.pdf", run_id="r1")
    assert asked.status is RunStatus.AWAITING_INPUT
    assert asked.state == {}  # the suspended invocation's write was discarded
    (pending,) = asked.pending_requests
    assert (pending.executor_id, pending.payload) == (
        "review",
        {"doc": "contract.pdf", "ticket": 1},
    )
    assert pending.response_type.endswith("Approval")
    assert [e.request_id for e in asked.events if isinstance(e, RequestEvent)] == [
        pending.request_id
    ]
    assert (await store.get_run("r1")).status == "awaiting_input"

    done = await wf.respond("r1", {pending.request_id: {"approved": True, "reviewer": "ann"}})
    assert done.status is RunStatus.COMPLETED
    assert done.outputs == [(1, True, "ann")]
    assert done.state == {"seen": "contract.pdf"}
    assert submissions == ["contract.pdf"], "the step ran again on re-execution"


async def test_bad_answers_are_refused_and_change_nothing():
    store = MemoryStore()
    wf = approval_workflow(store, [])
    asked = await wf.run("x", run_id="r1")
    request_id = asked.pending_requests[0].request_id
    with pytest.raises(InvalidResponseError, match=request_id):
        await wf.respond("r1", {request_id: "yes please"})
    with pytest.raises(UnknownRequestError, match="no request 'req-nope' is waiting"):
        await wf.respond("r1", {"req-nope": {"approved": True, "reviewer": "x"}})
    assert (await store.get_run("r1")).status == "awaiting_input"
    await wf.respond("r1", {request_id: Approval(approved=False, reviewer="bob")})
    with pytest.raises(UnknownRequestError, match="already answered"):
        await wf.respond("r1", {request_id: {"approved": True, "reviewer": "x"}})


async def test_structured_answers_are_checked_strictly_and_every_field_at_fault_is_named():
    store = MemoryStore()
    wf = approval_workflow(store, [])
    request_id = (await wf.run("x", run_id="r1")).pending_requests[0].request_id
    refusals = {
        "approved: Input should be a valid boolean": {"approved": "yes", "reviewer": "ann"},
        "reviewer: Field required": {"approved": True},
        "aproved: no such field (it has: approved, reviewer)": {
            "approved": True,
            "reviewer": "ann",
            "aproved": False,  # a misspelt key is refused, not dropped
        },
    }
    for named, answer in refusals.items():
        with pytest.raises(InvalidResponseError) as refused:
            await wf.respond("r1", {request_id: answer})
        assert named in str(refused.value)
    assert (await store.get_run("r1")).status == "awaiting_input"  # nothing changed
    done = await wf.respond("r1", {request_id: {"approved": True, "reviewer": "ann"}})
    assert done.outputs == [(1, True, "ann")]


@dataclass(frozen=True)
class Scored:
    reviewer: str
    score: float | None


async def test_an_answer_holding_what_json_cannot_carry_is_refused_by_field_never_changed():
    # Made JSON on the way to the check, a NaN would have become null (score None, an
    # answer nobody gave), and a lone surrogate or bytes that are not UTF-8 a raw error.
    @executor
    async def score(doc: str, ctx: WorkflowContext) -> None:
        got = await ctx.request({"doc": doc}, Scored)
        ctx.yield_output((got.reviewer, got.score))

    wf = WorkflowBuilder(start=score, store=MemoryStore()).register_type(Scored).build()
    request_id = (await wf.run("x", run_id="r1")).pending_requests[0].request_id
    holds_itself: list[object] = []
    holds_itself.append(holds_itself)  # walked once, then named by the serializer
    refusals = {
        "Circular reference": {"reviewer": holds_itself, "score": 1.0},
        "score: nan is not a JSON number": {"reviewer": "ann", "score": float("nan")},
        "score: inf is not a JSON number": {"reviewer": "ann", "score": float("inf")},
        "reviewer: text with a lone surrogate": {"reviewer": "a\ud800", "score": 1.0},
        "invalid utf-8": {"reviewer": b"\xff", "score": 1.0},
    }
    for named, answer in refusals.items():
        with pytest.raises(InvalidResponseError, match=request_id) as refused:
            await wf.respond("r1", {request_id: answer})
        assert named in str(refused.value)
    done = await wf.respond("r1", {request_id: {"reviewer": "ann", "score": None}})
    assert done.outputs == [("ann", None)]


async def test_builtin_response_types_must_match_exactly():
    @executor
    async def ask(q: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request(q, int))

    store = MemoryStore()
    wf = WorkflowBuilder(start=ask, store=store).build()
    request_id = (await wf.run("how many?", run_id="r1")).pending_requests[0].request_id
    for wrong in ("3", 3.0, True):
        with pytest.raises(InvalidResponseError, match="expects int"):
            await wf.respond("r1", {request_id: wrong})
    assert (await wf.respond("r1", {request_id: 3})).outputs == [3]


async def test_an_unregistered_response_type_is_a_clear_error_at_the_request():
    @dataclass
    class Secret:
        code: str

    @executor
    async def ask(q: str, ctx: WorkflowContext) -> None:
        await ctx.request(q, Secret)

    wf = WorkflowBuilder(start=ask, store=MemoryStore()).build()
    with pytest.raises(Exception) as caught:
        await wf.run("?")
    assert "register_type(Secret)" in str(caught.value.__cause__)


@dataclass(frozen=True)
class Listen:
    pass


class Chat(Executor):
    """A session: reply to each message, then wait for the next one.

    Replies are yielded by a completed invocation (``reply``); the waiting
    happens in another (``listen``), so nothing is lost to suspension.
    """

    @handler
    async def reply(self, text: str, ctx: WorkflowContext[Listen]) -> None:
        ctx.state.update("turns", lambda n: n + 1)
        ctx.yield_output(f"you said {text!r}")
        ctx.send_message(Listen())

    @handler
    async def listen(self, _: Listen, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(await ctx.wait_for_input())


async def test_three_session_rounds_give_three_replies_in_order():
    store = MemoryStore()
    wf = (
        WorkflowBuilder(start=Chat, store=store)
        .add_edge("Chat", "Chat")
        .add_state("turns", default=0)
        .build()
    )
    first = await wf.run("hello", run_id="s1")
    assert (first.status, first.outputs) == (RunStatus.AWAITING_INPUT, ["you said 'hello'"])
    second = await wf.send_message("s1", "how are you")
    third = await wf.send_message("s1", "bye")
    assert third.outputs == ["you said 'hello'", "you said 'how are you'", "you said 'bye'"]
    assert third.state["turns"] == 3
    assert second.status is third.status is RunStatus.AWAITING_INPUT


async def test_send_message_to_a_run_not_waiting_for_input_is_refused():
    store = MemoryStore()
    wf = approval_workflow(store, [])
    await wf.run("x", run_id="r1")
    with pytest.raises(RequestError, match="not waiting for input"):
        await wf.send_message("r1", "hi")


def storeless_napper(clock: FakeClock):
    """A workflow with no store whose one executor sleeps ``hours`` on ``clock``."""

    @executor
    async def nap(hours: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(dt.timedelta(hours=hours))
        ctx.yield_output(clock.now())

    return WorkflowBuilder(start=nap, clock=clock).build()


async def test_without_a_store_a_run_sleeps_through_its_timers_on_the_clock():
    clock = FakeClock(start=0)
    result = await clock.run(storeless_napper(clock).run(2))
    assert result.outputs == [7200.0]


@pytest.mark.parametrize("mode", list(ExecutionMode))
async def test_without_a_store_a_stream_sleeps_through_its_timers_too(mode):
    clock = FakeClock(start=0)
    wf = storeless_napper(clock)

    async def watch() -> list[object]:
        async with wf.stream(2, mode=mode) as events:
            return [e.value async for e in events if isinstance(e, OutputEvent)]

    assert await clock.run(watch()) == [7200.0]


async def test_with_a_store_a_timer_rests_the_run_as_waiting_with_its_wake_time():
    clock, store = FakeClock(start=100.0), MemoryStore()

    @executor
    async def nap(seconds: int, ctx: WorkflowContext) -> None:
        await ctx.sleep(seconds)
        ctx.yield_output(clock.now())

    wf = WorkflowBuilder(start=nap, clock=clock, store=store).build()
    resting = await wf.run(50, run_id="t1")
    assert (resting.status, resting.wake_at) == (RunStatus.WAITING, 150.0)
    assert (await store.get_run("t1")).wake_at == 150.0
    early = await wf.resume("t1")  # not due: nothing runs, nothing is written
    assert early.status is RunStatus.WAITING
    assert len((await wf.history("t1")).checkpoints) == 2
    await clock.advance(50)
    assert (await wf.resume("t1")).outputs == [150.0]


async def test_sleep_until_an_aware_datetime_and_naive_ones_are_refused():
    clock = FakeClock(start=0)
    when = dt.datetime(1970, 1, 1, 1, tzinfo=dt.UTC)

    @executor
    async def wait(kind: str, ctx: WorkflowContext) -> None:
        await ctx.sleep_until(when if kind == "aware" else when.replace(tzinfo=None))
        ctx.yield_output(clock.now())

    wf = WorkflowBuilder(start=wait, clock=clock).build()
    assert (await clock.run(wf.run("aware"))).outputs == [3600.0]
    with pytest.raises(Exception, match="no time zone"):
        await clock.run(wf.run("naive"))


async def test_poll_until_complete_checkpoints_between_polls_and_reports_progress():
    clock, store = FakeClock(start=0), MemoryStore()
    submitted, polls = [], []

    @executor
    async def job(name: str, ctx: WorkflowContext) -> None:
        job_id = await ctx.step("submit", lambda: submitted.append(name) or f"job-{name}")

        def check():
            polls.append(clock.now())
            return len(polls)

        done = await ctx.poll_until_complete(
            check, lambda n: n >= 4, backoff=ExponentialBackoff(initial=10, jitter=0)
        )
        ctx.yield_output((job_id, done))

    wf = WorkflowBuilder(start=job, clock=clock, store=store).build()
    result = await wf.run("render", run_id="p1")
    while result.status is RunStatus.WAITING:
        await clock.advance_to(result.wake_at)
        result = await wf.resume("p1")
    assert result.outputs == [("job-render", 4)]
    assert submitted == ["render"]
    assert polls == [0, 10, 30, 70]  # backoff 10, 20, 40 between polls
    checkpoints = (await wf.history("p1")).checkpoints
    assert [c.status for c in checkpoints].count("waiting") == 3


async def test_poll_until_complete_gives_up_at_max_duration():
    clock = FakeClock(start=0)

    @executor
    async def job(name: str, ctx: WorkflowContext) -> None:
        await ctx.poll_until_complete(
            lambda: "pending",
            lambda s: s == "done",
            backoff=ExponentialBackoff(initial=60, maximum=60, jitter=0),
            max_duration=dt.timedelta(minutes=5),
        )

    wf = WorkflowBuilder(start=job, clock=clock).build()
    with pytest.raises(Exception) as caught:
        await clock.run(wf.run("x"))
    assert isinstance(caught.value.__cause__, PollTimeout)
    assert clock.now() == 300


async def test_scheduled_messages_arrive_when_due_without_suspending_the_sender():
    clock = FakeClock(start=0)

    @executor
    async def plan(n: int, ctx: WorkflowContext[str]) -> None:
        ctx.schedule_message("reminder", after=dt.timedelta(hours=1))
        ctx.send_message("now")

    @executor
    async def inbox(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output((text, clock.now()))

    wf = WorkflowBuilder(start=plan, clock=clock).add_edge(plan, inbox).build()
    result = await clock.run(wf.run(1))
    assert result.outputs == [("now", 0), ("reminder", 3600.0)]


async def test_a_handler_that_takes_another_path_on_re_execution_is_a_clear_error():
    store = MemoryStore()
    flip = {"first": True}

    @executor
    async def fickle(doc: str, ctx: WorkflowContext) -> None:
        name = "a" if flip["first"] else "b"
        await ctx.step(name, lambda: 1)
        await ctx.request("ok?", bool)

    wf = WorkflowBuilder(start=fickle, store=store).build()
    request_id = (await wf.run("x", run_id="r1")).pending_requests[0].request_id
    flip["first"] = False
    with pytest.raises(Exception) as caught:
        await wf.respond("r1", {request_id: True})
    assert isinstance(caught.value.__cause__, JournalMismatchError)
    assert "journal has step 'a' at position 0, but the handler now called step 'b'" in str(
        caught.value.__cause__
    )


async def test_the_idempotency_key_is_stable_across_re_executions():
    # One key per invocation: the same for its retry and its re-execution after
    # the answer, different for another message, another executor, another run.
    store, keys = MemoryStore(), defaultdict(list)
    instant = RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(0, maximum=0, jitter=0))

    @executor(id="split")
    async def split(amount: int, ctx: WorkflowContext[int]) -> None:
        keys[ctx.run_id, "split", amount].append(ctx.idempotency_key)
        ctx.send_message(amount)
        ctx.send_message(amount + 1)

    @executor(id="pay", retry=instant)
    async def pay(amount: int, ctx: WorkflowContext) -> None:
        attempts = keys[ctx.run_id, "pay", amount]
        attempts.append(ctx.idempotency_key)
        if len(attempts) == 1:
            raise ConnectionError("the first attempt fails, the retry goes on")
        await ctx.request(f"pay {amount}?", bool)

    @executor(id="audit")
    async def audit(amount: int, ctx: WorkflowContext) -> None:
        keys[ctx.run_id, "audit", amount].append(ctx.idempotency_key)

    wf = WorkflowBuilder(start=split, store=store).add_fan_out(split, [pay, audit]).build()
    for run_id in ("r1", "r2"):  # the same input: only the run tells their keys apart
        asked = await wf.run(10, run_id=run_id)
        answers = {request.request_id: True for request in asked.pending_requests}
        assert len(answers) == 2
        assert (await wf.respond(run_id, answers)).status is RunStatus.COMPLETED

    for run_id in ("r1", "r2"):
        for amount in (10, 11):  # first attempt, retry, re-execution after the answer
            attempts = keys[run_id, "pay", amount]
            assert len(attempts) == 3
            assert len(set(attempts)) == 1, attempts
    invocations = [attempts[0] for attempts in keys.values()]
    assert len(invocations) == 2 * (1 + 2 + 2)  # per run: split, pay 10 and 11, audit 10 and 11
    assert len(set(invocations)) == len(invocations), keys


async def test_cancelling_a_waiting_run_keeps_its_checkpoint_and_invokes_nothing():
    store, submissions = MemoryStore(), []
    wf = approval_workflow(store, submissions)
    asked = await wf.run("x", run_id="r1")
    before = (await wf.history("r1")).checkpoints
    await wf.cancel("r1")
    assert (await store.get_run("r1")).status == "cancelled"
    with pytest.raises(RunCancelledError):
        await wf.respond(
            "r1", {asked.pending_requests[0].request_id: {"approved": True, "reviewer": "a"}}
        )
    assert (await wf.history("r1")).checkpoints == before
    assert submissions == ["x"]


async def test_cancelling_a_running_run_stops_it_and_records_cancelled():
    store, calls = MemoryStore(), []

    @executor
    async def tick(n: int, ctx: WorkflowContext[int]) -> None:
        calls.append(n)
        await asyncio.sleep(0)
        ctx.send_message(n + 1)

    wf = WorkflowBuilder(start=tick, store=store).add_edge(tick, tick).build()
    async with wf.stream(0, run_id="r1") as events:
        async for event in events:
            if event.superstep >= 3:
                await events.cancel()
    count = len(calls)
    await asyncio.sleep(0.01)
    assert len(calls) == count
    row = await store.get_run("r1")
    assert row.status == "cancelled"
    history = await wf.history("r1")
    assert history.checkpoints[-1].superstep == row.superstep


def handoff_workflow(store):
    class Triage(Executor):
        @handler
        async def route(self, ticket: str, ctx: WorkflowContext) -> None:
            ctx.handoff("refunds", ticket, reason="asks for money back")

        @handler
        async def refused(self, refusal: HandoffRefused, ctx: WorkflowContext) -> None:
            ctx.yield_output(f"handled by triage after refusal ({refusal.target})")

    @executor
    async def refunds(ticket: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(f"refunded {ticket} (from {ctx.handoff_context.source})")

    return (
        WorkflowBuilder(start=Triage, store=store)
        .add_handoff("Triage", [refunds], require_approval=True)
        .build()
    )


async def test_a_handoff_that_needs_approval_waits_and_routes_once_approved():
    store = MemoryStore()
    wf = handoff_workflow(store)
    paused = await wf.run("ticket-7", run_id="h1")
    assert paused.status is RunStatus.AWAITING_INPUT
    (request,) = paused.pending_requests
    assert request.payload == {
        "handoff_from": "Triage",
        "handoff_to": "refunds",
        "reason": "asks for money back",
        "payload": "ticket-7",
    }
    assert request.response_type == "bool"
    with pytest.raises(InvalidResponseError):
        await wf.respond("h1", {request.request_id: "sure"})
    done = await wf.respond("h1", {request.request_id: True})
    assert done.outputs == ["refunded ticket-7 (from Triage)"]


async def test_a_refused_handoff_comes_back_to_its_source_as_a_message():
    store = MemoryStore()
    wf = handoff_workflow(store)
    request = (await wf.run("ticket-8", run_id="h2")).pending_requests[0]
    done = await wf.respond("h2", {request.request_id: False})
    assert done.outputs == ["handled by triage after refusal (refunds)"]


def test_a_source_that_cannot_take_a_refusal_is_a_build_error():
    @executor
    async def triage(ticket: str, ctx: WorkflowContext) -> None:
        ctx.handoff("refunds", ticket)

    @executor
    async def refunds(ticket: str, ctx: WorkflowContext) -> None:
        pass

    with pytest.raises(Exception, match="no handler for HandoffRefused"):
        WorkflowBuilder(start=triage).add_handoff(triage, [refunds], require_approval=True).build()


BAD_TIMES = [
    ("sleep", float("nan"), ValueError, "ctx.sleep's delay must be seconds"),
    ("sleep", float("inf"), ValueError, "inf is not a finite number"),
    ("sleep", 10**400, ValueError, "an integer of 1329 bits is past any float"),
    ("sleep", "5", TypeError, "got '5'"),
    ("sleep_until", float("nan"), ValueError, "ctx.sleep_until's when must be"),
    ("schedule_after", float("inf"), ValueError, "after must be seconds"),
    ("schedule_at", float("-inf"), ValueError, "at must be an aware datetime or epoch seconds"),
    ("timeout", float("inf"), ValueError, "timeout must be seconds"),
]


@pytest.mark.parametrize(
    ("call", "when", "error", "says"),
    BAD_TIMES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_TIMES)],
)
async def test_a_time_no_store_can_keep_fails_the_step_naming_the_call(
    tmp_path, call, when, error, says
):
    # A time is stored as JSON, which has no NaN or infinity: once, the step passed
    # and its checkpoint failed with "Out of range float values are not JSON compliant".
    @executor(id="wait")
    async def wait(n: int, ctx: WorkflowContext) -> None:
        if call == "sleep":
            await ctx.sleep(when)
        elif call == "sleep_until":
            await ctx.sleep_until(when)
        elif call == "schedule_after":
            ctx.schedule_message(n, after=when)
        elif call == "schedule_at":
            ctx.schedule_message(n, at=when)
        else:
            await ctx.request("ok?", bool, timeout=when)

    workflow = WorkflowBuilder(start=wait).add_edge(wait, wait).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        with pytest.raises(ExecutorFailedError) as caught:
            await workflow.run(1, store=store, run_id="r1")
        row = await store.get_run("r1")
    finally:
        await store.close()
    assert isinstance(caught.value.__cause__, error)
    assert says in str(caught.value.__cause__)
    assert row.status == "failed"
