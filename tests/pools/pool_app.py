"""Workflows for the pool tests, each built with or without a pool.

The same builder makes the in-process twin and the cluster one, so a test
compares one graph run two ways. Handlers on a pool run in Dask worker
processes: they learn nothing from the test's memory, only from their
message, the state they are sent and files under a directory they are
given. Each reports its process id in a progress event, so a test can tell
where it ran.
"""

from __future__ import annotations

import operator
import os
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import ExponentialBackoff, RetryPolicy, WorkflowBuilder, WorkflowContext, executor

QUICK_RETRY = RetryPolicy(max_attempts=3, backoff=ExponentialBackoff(initial=0.01, maximum=0.05))


@dataclass(frozen=True)
class Job:
    """How much CPU each branch burns (``rounds``), and where it may leave files."""

    rounds: int
    scratch: str = ""


@dataclass(frozen=True)
class Slice:
    """One branch's part of a job."""

    branch: int
    rounds: int
    scratch: str = ""


@dataclass(frozen=True)
class Digest:
    """What a branch computed."""

    branch: int
    value: int


def burn(branch: int, rounds: int) -> int:
    """CPU-bound pure Python: holds the GIL for the whole computation."""
    value = branch
    for i in range(rounds):
        value = (value * 31 + i) % 1_000_003
    return value


def where(ctx: WorkflowContext) -> None:
    ctx.report_progress(0, message=f"pid={os.getpid()}")


def pids_of(events) -> set[int]:
    """The process ids handlers reported (``pid=N`` in a progress message)."""
    return {
        int(e.message.rsplit("pid=", 1)[1])
        for e in events
        if type(e).__name__ == "ProgressEvent" and e.message and "pid=" in e.message
    }


def worker_pids(pool) -> set[int]:
    """The process ids of a ``DaskPool``'s workers right now."""
    return set(pool.connect().run(os.getpid).values())


# -- a fan-out of CPU-bound branches, gathered by a fan-in -------------------------------
@executor
async def split(job: Job, ctx: WorkflowContext[Slice]) -> None:
    for branch in range(ctx.state["branches"]):
        ctx.send_message(Slice(branch, job.rounds, job.scratch), target=f"branch{branch}")


def crunch(part: Slice, ctx: WorkflowContext[Digest]) -> None:
    where(ctx)
    ctx.state.set("done", 1)
    ctx.send_message(Digest(part.branch, burn(part.branch, part.rounds)))


def crunch_once_killed(part: Slice, ctx: WorkflowContext[Digest]) -> None:
    """Branch 0's first attempt says where it runs, then hangs until its worker is killed."""
    armed = Path(part.scratch) / "armed"
    if part.branch == 0 and not armed.exists():
        armed.touch()
        ctx.report_progress(0, message=f"victim pid={os.getpid()}")
        time.sleep(50)  # the test SIGKILLs this process long before
        msg = "the worker was not killed"
        raise RuntimeError(msg)
    crunch(part, ctx)


@executor
async def gather(digests: list[Digest], ctx: WorkflowContext) -> None:
    ctx.yield_output([(d.branch, d.value) for d in digests])


def fan_out(branches: int, pool=None, handler=crunch, retry=None) -> WorkflowBuilder:
    """``split`` -> ``branch0..n-1`` (``handler`` on ``pool``) -> ``gather``."""
    workers = [executor(id=f"branch{i}", pool=pool, retry=retry)(handler) for i in range(branches)]
    return (
        WorkflowBuilder(start=split, name="fan-out")
        .add_fan_out(split, workers)
        .add_fan_in(workers, gather)
        .add_state("branches", default=branches)
        .add_state("done", default=0, reducer=operator.add)
    )


# -- a graph whose order of delivery a test compares --------------------------------------
@dataclass(frozen=True)
class Note:
    source: str
    seq: int
    slept: float


def naps(message: str, ctx: WorkflowContext[Note]) -> None:
    """Sleeps longest for the lowest rank: results come back in reverse rank order."""
    slept = (6 - ctx.rank) * 0.03 + ctx.position * 0.01
    time.sleep(slept)
    where(ctx)
    key = f"seen.{ctx.executor_id}"  # its earlier invocations' writes, read back
    ctx.state.set(key, (*ctx.state.get(key, ()), message))
    ctx.state.set("log", [f"{ctx.executor_id}@{ctx.position}"])
    for seq in range(2):
        ctx.send_message(Note(ctx.executor_id, seq, slept))
    ctx.add_event({"executor": ctx.executor_id, "message": message})
    ctx.yield_output(f"{ctx.executor_id}:{message}")


@executor
async def deal(text: str, ctx: WorkflowContext[str]) -> None:
    for target in ("a", "b", "c"):
        ctx.send_message(f"{text}-{target}", target=target)
    for n in range(3):
        ctx.send_message(f"{text}-many{n}", target="many")


@executor(concurrency=3)
async def record(note: Note, ctx: WorkflowContext) -> None:
    ctx.state.set("log", [f"record<-{note.source}.{note.seq}"])
    ctx.yield_output(f"record<-{note.source}.{note.seq}")


def dealt(pool=None) -> WorkflowBuilder:
    """``deal`` -> a, b, c (one message each) and ``many`` (three) -> ``record``."""
    a, b, c = (executor(id=name)(naps) for name in "abc")
    many = executor(id="many")(naps)  # three messages, one at a time
    return (
        WorkflowBuilder(start=deal, name="dealt", pool=pool)
        .add_edge(deal, a)
        .add_edge(deal, b)
        .add_edge(deal, c)
        .add_edge(deal, many)
        .add_edge(a, record)
        .add_edge(b, record)
        .add_edge(c, record)
        .add_edge(many, record)
        .add_state("log", default=[], reducer=operator.add)
    )


# -- a handler that reports while it runs ---------------------------------------------------
@dataclass(frozen=True)
class Heard:
    source: str
    note: str


def listen(scratch: str, ctx: WorkflowContext) -> None:
    """Reports progress, then waits until the test has heard it, then reports again."""
    ctx.report_progress(1, 2, "halfway")
    ctx.add_event(Heard("listener", "custom events travel too"))
    heard = Path(scratch) / "heard"
    deadline = time.monotonic() + 20
    while not heard.exists():
        if time.monotonic() > deadline:
            msg = "nobody heard the progress event while the handler ran"
            raise RuntimeError(msg)
        time.sleep(0.01)
    ctx.report_progress(2, 2, "finished")


def listener_workflow(pool):
    listener = executor(id="listener", pool=pool)(listen)
    # Heard is named by no annotation: allowed explicitly, as for a checkpoint.
    return WorkflowBuilder(start=listener, name="listener").register_type(Heard).build()


# -- failures ---------------------------------------------------------------------------------
class Flaky(ConnectionError):
    """A transient failure, as a user's own exception class."""


def explode(part: Slice, ctx: WorkflowContext[Digest]) -> None:
    """Branch 1 raises; the others finish (and their work is never committed)."""
    ctx.state.set("done", 1)
    if part.branch == 1:
        msg = f"bad slice {part.branch}"
        raise ValueError(msg)
    ctx.send_message(Digest(part.branch, burn(part.branch, part.rounds)))


def flaky_once(part: Slice, ctx: WorkflowContext[Digest]) -> None:
    """Every branch's first attempt raises ``Flaky``; the second succeeds."""
    marker = Path(part.scratch) / f"tried{part.branch}"
    if not marker.exists():
        marker.touch()
        msg = f"branch {part.branch} tripped"
        raise Flaky(msg)
    crunch(part, ctx)


def slow_once(part: Slice, ctx: WorkflowContext[Digest]) -> None:
    """The first attempt overruns its timeout but finishes later, on the worker."""
    marker = Path(part.scratch) / f"slow{part.branch}"
    if not marker.exists():
        marker.touch()
        time.sleep(3.0)  # well past the tests' 1 s timeout, even on a loaded machine
    crunch(part, ctx)


@dataclass(frozen=True)
class Step:
    scratch: str
    n: int = 0


def first(step: Step, ctx: WorkflowContext[Step]) -> None:
    """Leaves a line per execution, so a test counts how often it ran."""
    with (Path(step.scratch) / "first.log").open("a") as log:
        log.write(f"{os.getpid()}\n")
    ctx.state.set("first", step.n + 1)
    ctx.send_message(Step(step.scratch, step.n + 1))


def second(step: Step, ctx: WorkflowContext) -> None:
    """Fails until a file says the outage is over."""
    with (Path(step.scratch) / "second.log").open("a") as log:
        log.write(f"{os.getpid()}\n")
    if not (Path(step.scratch) / "fixed").exists():
        msg = "the service is down"
        raise ConnectionError(msg)
    ctx.state.set("second", ctx.state["first"] + 1)
    ctx.yield_output(step.n)


def chain(pool) -> WorkflowBuilder:
    one = executor(id="first", pool=pool)(first)
    two = executor(id="second", pool=pool)(second)
    return WorkflowBuilder(start=one, name="chain").add_edge(one, two)


class Opaque:
    """A class no serializer was told about: picklable, but not a JSON value."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.secret == self.secret

    def __hash__(self) -> int:
        return hash(self.secret)


def hand_over(text: str, ctx: WorkflowContext) -> None:
    ctx.send_message(Opaque(text))


@executor
async def keep(value: object, ctx: WorkflowContext) -> None:
    ctx.yield_output(value)


def opaque(pool, serializer=None) -> WorkflowBuilder:
    giver = executor(id="giver", pool=pool)(hand_over)
    return WorkflowBuilder(start=giver, name="opaque", serializer=serializer).add_edge(giver, keep)


def state_reader(text: str, ctx: WorkflowContext) -> None:
    """Reads the last barrier and its own writes; deletes; then tries update."""
    state = ctx.state
    ctx.yield_output((state["given"], state.get("declared"), "absent" in state))
    state.set("given", state["given"] + 1)
    state.delete("declared")
    ctx.yield_output((state["given"], state.get("declared", "gone")))
    if text == "update":
        state.update("given", lambda n: n + 1)


def ask_for_spawn(text: str, ctx: WorkflowContext) -> None:
    ctx.spawn(keep, text)
