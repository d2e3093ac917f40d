"""Resume later: sleep 24 hours, sleep until a date, schedule a message.

A free trial. ``signup`` e-mails a welcome, schedules a nudge for two hours
later (``ctx.schedule_message``: a durable timer that does not suspend it)
and hands over to ``follow_up``, which sleeps 24 hours (``ctx.sleep``),
e-mails a tip, then sleeps until the day before the trial ends
(``ctx.sleep_until`` an aware datetime) and e-mails a reminder. In between,
the run rests as WAITING in SQLite and no process needs to be up: each
wake-up below is done by a *new* ``Runtime`` on the same file, as a
restarted process would. A second trial is cancelled while it rests
(``workflow.cancel``) and never wakes.

Run it with ``python examples/long_running_resume_later.py`` (a FakeClock:
the two weeks pass at once; see docs/long-running.md to use real time).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from treadle import Clock, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # Mon 2026-03-02 08:00 UTC


@dataclass(frozen=True)
class Trial:
    email: str
    ends: dt.datetime  # aware: sleep_until refuses naive datetimes


@dataclass(frozen=True)
class Nudge:
    email: str


@dataclass
class Mailer:
    """A stand-in for an e-mail service; it survives our "restarts" in memory."""

    clock: Clock
    sent: list[tuple[str, str, str]] = field(default_factory=list)  # (when, to, subject)

    def send(self, to: str, subject: str) -> str:
        self.sent.append((when(self.clock.now()), to, subject))
        return subject


def when(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.UTC):%a %d %b %H:%M}"


def build(store: SqliteStore, mailer: Mailer):
    @executor
    async def signup(trial: Trial, ctx: WorkflowContext[Trial | Nudge]) -> None:
        mailer.send(trial.email, "welcome")
        ctx.schedule_message(Nudge(trial.email), after=dt.timedelta(hours=2))
        ctx.send_message(trial)

    @executor
    async def nudge(reminder: Nudge, ctx: WorkflowContext) -> None:
        mailer.send(reminder.email, "finish setting up your account")

    @executor
    async def follow_up(trial: Trial, ctx: WorkflowContext) -> None:
        await ctx.sleep(dt.timedelta(hours=24))
        # A step: when the handler re-executes after the next wait, it is not sent again.
        await ctx.step("tip", mailer.send, trial.email, "a tip for your second day")
        await ctx.sleep_until(trial.ends - dt.timedelta(days=1))
        await ctx.step("reminder", mailer.send, trial.email, "your trial ends tomorrow")
        ctx.yield_output(f"{trial.email}: trial followed up")

    return (
        WorkflowBuilder(start=signup, name="trial", store=store)
        .add_edge(signup, nudge)
        .add_edge(signup, follow_up)
        .build()
    )


def open_runtime(path: Path, clock: Clock, mailer: Mailer) -> Runtime:
    """What each process does at start-up: the same file, the same workflows."""
    store = SqliteStore(path)
    return Runtime(store, [build(store, mailer)], clock=clock)


async def pass_time(clock: Clock, when: float) -> None:
    """Let time reach ``when``: at once on a FakeClock, for real otherwise."""
    if isinstance(clock, FakeClock):
        await clock.advance_to(max(when, clock.now()))
    else:
        await clock.sleep_until(when)


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    mailer = Mailer(clock)
    ends = dt.datetime.fromtimestamp(clock.now(), dt.UTC) + dt.timedelta(days=14)
    wakes: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(path or Path(tmp) / "runs.sqlite")
        runtime = open_runtime(file, clock, mailer)
        for run_id in ("ann", "bob"):
            rested = await runtime.start(
                "trial", Trial(f"{run_id}@example.com", ends), run_id=run_id
            )
            print(f"{run_id}: {rested.status.value}, wakes at {when(rested.wake_at)}")
        await runtime.workflow("trial").cancel("bob")  # bob deleted his account
        await runtime.store.close()
        while True:  # each turn is a fresh process: open, wake what is due, exit
            runtime = open_runtime(file, clock, mailer)
            try:
                row = await runtime.store.get_run("ann")
                if row.status != "waiting":
                    bob = await runtime.store.get_run("bob")
                    break
                await pass_time(clock, row.wake_at)
                for result in await runtime.wake_due():
                    wakes.append((when(clock.now()), result.run_id, result.status.value))
                    print(f"{wakes[-1][0]}: woke {result.run_id}, now {wakes[-1][2]}")
            finally:
                await runtime.store.close()
    for sent in mailer.sent:
        print("mail: {} to {}: {}".format(*sent))
    statuses = {"ann": row.status, "bob": bob.status}
    print(f"statuses: {statuses}")
    return {"wakes": wakes, "sent": mailer.sent, "statuses": statuses}


if __name__ == "__main__":
    asyncio.run(main())
