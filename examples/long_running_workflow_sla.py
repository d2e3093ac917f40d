"""A run deadline (an SLA): ``timeout=`` on the run, enforced across restarts.

Refunds must be settled within 48 hours. Each run waits durably: for the
bank's settlement window (``ctx.sleep``), and large refunds first for a
manager (``ctx.request``). The deadline is stored with the run, so whoever
wakes runs later — here a ``Runtime`` opened after a "restart" — enforces
it: a run still resting at its deadline FAILS with ``RunTimeoutError``,
without running its handler again, whether it waits on a later timer or on
an answer that never came.

Run it with ``python examples/long_running_workflow_sla.py`` (a FakeClock:
the two days pass at once; see docs/long-running.md to use real time).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path

from treadle import Clock, Runtime, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import RunTimeoutError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # 2026-03-02 08:00 UTC
SLA = 48 * 3600.0  # the run's timeout=, in seconds


@dataclass(frozen=True)
class Refund:
    order: str
    euros: int
    settles_in: dt.timedelta  # when the bank's settlement window opens


@executor
async def settle(refund: Refund, ctx: WorkflowContext) -> None:
    if refund.euros > 500:
        approved = await ctx.request(f"approve a {refund.euros} EUR refund?", bool)
        if not approved:
            ctx.yield_output(f"{refund.order}: refused")
            return
    await ctx.sleep(refund.settles_in)
    ctx.yield_output(f"{refund.order}: {refund.euros} EUR refunded")


def open_runtime(path: Path, clock: Clock) -> Runtime:
    """What each process does at start-up: the same file, the same workflows."""
    store = SqliteStore(path)
    workflow = WorkflowBuilder(start=settle, name="refunds", store=store).build()
    return Runtime(store, [workflow], clock=clock)


async def pass_time(clock: Clock, when: float) -> None:
    """Let time reach ``when``: at once on a FakeClock, for real otherwise."""
    if isinstance(clock, FakeClock):
        await clock.advance_to(max(when, clock.now()))
    else:
        await clock.sleep_until(when)


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    start = clock.now()
    refunds = [
        Refund("A-1", 80, settles_in=dt.timedelta(hours=24)),
        Refund("B-2", 120, settles_in=dt.timedelta(hours=72)),  # past the SLA
        Refund("C-3", 900, settles_in=dt.timedelta(hours=24)),  # nobody approves it
    ]
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(path or Path(tmp) / "runs.sqlite")
        runtime = open_runtime(file, clock)
        for refund in refunds:
            rested = await runtime.start("refunds", refund, run_id=refund.order, timeout=SLA)
            print(f"{refund.order}: {rested.status.value}")
        await runtime.store.close()  # the process goes away; the runs rest in the file

        runtime = open_runtime(file, clock)  # a new process, a new Runtime
        woken: dict[float, list[tuple[str, str]]] = {}
        timed_out: list[str] = []
        try:
            for hours in (24, 47.9, 48):
                await pass_time(clock, start + hours * 3600)
                results = await runtime.wake_due()
                woken[hours] = [(r.run_id, r.status.value) for r in results]
                print(f"+{hours:g} h: woke {woken[hours] or 'nothing'}")
                timed_out += [r.run_id for r in results if isinstance(r.error, RunTimeoutError)]
            rows = {r.order: await runtime.store.get_run(r.order) for r in refunds}
        finally:
            await runtime.store.close()
    for order, row in rows.items():
        print(f"{order}: {row.status:<9} {row.error or ''}".rstrip())
    return {
        "woken": woken,
        "timed_out": timed_out,
        "statuses": {order: row.status for order, row in rows.items()},
        "errors": {order: row.error for order, row in rows.items()},
    }


if __name__ == "__main__":
    asyncio.run(main())
