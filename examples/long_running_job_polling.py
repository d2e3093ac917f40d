"""Submit a long external job once, then poll it durably until it is done.

The handler submits the job in a ``ctx.step`` (its result is journaled, so
the job is submitted once however often the handler re-executes) and then
calls ``ctx.poll_until_complete``: each poll is a journaled step and each
pause a durable timer, so between polls the run rests as ``WAITING`` in
SQLite and holds no thread. A job still running after ``max_duration``
raises ``PollTimeout``; this handler catches it and cancels the job.

Run it with ``python examples/long_running_job_polling.py``: a FakeClock
makes the hours pass at once (see docs/long-running.md to use real time).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from treadle import Clock, ExponentialBackoff, RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import PollTimeout
from treadle.events import ProgressEvent
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # 2026-03-02 08:00 UTC
BACKOFF = ExponentialBackoff(initial=60, maximum=900, jitter=0)  # 1, 2, 4, 8, 15, 15... min


@dataclass(frozen=True)
class Render:
    scene: str
    minutes: float  # how long the render farm will take


@dataclass
class RenderFarm:
    """A stand-in for an external job service that deduplicates submissions."""

    clock: Clock
    submitted: list[str] = field(default_factory=list)
    polls: list[float] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    jobs: dict[str, tuple[str, float]] = field(default_factory=dict)  # key -> (id, done at)

    def submit(self, job: Render, key: str) -> str:
        if key not in self.jobs:  # the same idempotency key gets the same job
            self.submitted.append(job.scene)
            done_at = self.clock.now() + job.minutes * 60
            self.jobs[key] = (f"job-{len(self.jobs) + 1}", done_at)
        return self.jobs[key][0]

    def status(self, job_id: str) -> str:
        self.polls.append(self.clock.now())
        done_at = next(done for id_, done in self.jobs.values() if id_ == job_id)
        return "done" if self.clock.now() >= done_at else "running"

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def build(farm: RenderFarm, store: SqliteStore, clock: Clock):
    @executor
    async def render(job: Render, ctx: WorkflowContext) -> None:
        job_id = await ctx.step("submit", farm.submit, job, ctx.idempotency_key)
        try:
            await ctx.poll_until_complete(
                lambda: farm.status(job_id),
                lambda state: state == "done",
                backoff=BACKOFF,
                max_duration=dt.timedelta(hours=2),
            )
        except PollTimeout:
            await ctx.step("cancel", farm.cancel, job_id)
            ctx.yield_output(f"{job.scene}: cancelled {job_id} after 2 hours")
            return
        ctx.yield_output(f"{job.scene}: {job_id} done")

    return WorkflowBuilder(start=render, name="render", store=store, clock=clock).build()


async def pass_time(clock: Clock, when: float) -> None:
    """Let time reach ``when``: at once on a FakeClock, for real otherwise."""
    if isinstance(clock, FakeClock):
        await clock.advance_to(max(when, clock.now()))
    else:
        await clock.sleep_until(when)


async def render_until_done(workflow, job: Render, clock: Clock):
    started = clock.now()

    def minutes(t: float) -> str:
        return f"+{(t - started) / 60:.0f} min"

    result = await workflow.run(job, run_id=f"render-{job.scene}")
    while True:
        polls = [e.message for e in result.events if isinstance(e, ProgressEvent)]
        waiting = result.status is RunStatus.WAITING
        rest = f", resting as WAITING until {minutes(result.wake_at)}" if waiting else ""
        print(f"  {minutes(clock.now()):>8}  {', '.join(polls)}{rest}")
        if not waiting:
            return result
        await pass_time(clock, result.wake_at)
        result = await workflow.resume(result.run_id)  # what a Runtime does when it is due


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    farm = RenderFarm(clock)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(path or Path(tmp) / "runs.sqlite")
        workflow = build(farm, store, clock)
        try:
            results = []
            for job in (Render("intro", minutes=25), Render("finale", minutes=300)):
                print(f"render {job.scene!r} ({job.minutes:g} min of work):")
                results.append(await render_until_done(workflow, job, clock))
                print(f"  => {results[-1].status.value}: {results[-1].output}")
        finally:
            await store.close()
    print(f"submitted {farm.submitted}, {len(farm.polls)} polls, cancelled {farm.cancelled}")
    return {
        "statuses": [r.status for r in results],
        "outputs": [r.output for r in results],
        "submitted": farm.submitted,
        "polls": [round((t - START) / 60) for t in farm.polls],
        "cancelled": farm.cancelled,
    }


if __name__ == "__main__":
    asyncio.run(main())
