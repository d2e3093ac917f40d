"""A flaky external call, retried with exponential backoff.

1. ``retry=RetryPolicy(max_attempts=5, backoff=ExponentialBackoff(...),
   retry_on=(ConnectionError, TimeoutError))``: the payment API is down for
   three calls; the fourth succeeds. Every attempt passes the same
   ``ctx.idempotency_key``, so the API charges once.
2. An error outside ``retry_on`` (a declined card) fails the run at once.
3. Retries that should wait hours: a policy's backoff is an in-process pause
   inside the superstep, so for long ones make each attempt a poll of
   ``ctx.poll_until_complete`` — the run then rests as WAITING in between.

Run it with ``python examples/long_running_retry_backoff.py`` (a FakeClock:
the waits pass at once; see docs/long-running.md to use real time).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from treadle import (
    Clock,
    ExponentialBackoff,
    RetryPolicy,
    RunStatus,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import WorkflowRunError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1_772_438_400.0  # 2026-03-02 08:00 UTC
BACKOFF = ExponentialBackoff(initial=2, maximum=30, multiplier=3, jitter=0.1)
RETRY = RetryPolicy(max_attempts=5, backoff=BACKOFF, retry_on=(ConnectionError, TimeoutError))
SLOW_BACKOFF = ExponentialBackoff(initial=600, maximum=4 * 3600, multiplier=3, jitter=0)


@dataclass(frozen=True)
class Charge:
    order: str
    cents: int


@dataclass
class PaymentApi:
    """A stand-in for a payment API that is down for its first ``outages`` calls."""

    clock: Clock
    outages: int
    calls: list[tuple[float, str]] = field(default_factory=list)  # (time, idempotency key)
    charges: dict[str, str] = field(default_factory=dict)  # idempotency key -> charge id

    def charge(self, charge: Charge, key: str) -> str:
        self.calls.append((self.clock.now(), key))
        if len(self.calls) <= self.outages:
            raise ConnectionError("payment API unavailable")
        if charge.cents <= 0:
            raise ValueError(f"card declined for {charge.order}")
        return self.charges.setdefault(key, f"ch_{len(self.charges) + 1}")


def build(api: PaymentApi, store: SqliteStore, clock: Clock):
    @executor(retry=RETRY)
    async def pay(charge: Charge, ctx: WorkflowContext) -> None:
        ctx.yield_output(api.charge(charge, ctx.idempotency_key))

    @executor
    async def pay_patiently(charge: Charge, ctx: WorkflowContext) -> None:
        def attempt() -> str | None:
            try:
                return api.charge(charge, ctx.idempotency_key)
            except ConnectionError:
                return None  # "not yet": poll again after the next backoff

        charge_id = await ctx.poll_until_complete(
            attempt,
            lambda c: c is not None,
            backoff=SLOW_BACKOFF,
            max_duration=dt.timedelta(days=1),
        )
        ctx.yield_output(charge_id)

    quick = WorkflowBuilder(start=pay, name="pay", store=store, clock=clock).build()
    patient = WorkflowBuilder(start=pay_patiently, name="patient", store=store, clock=clock).build()
    return quick, patient


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.1f} s"


async def pay_and_report(workflow, charge: Charge, api: PaymentApi, clock: Clock) -> dict:
    run = workflow.run(charge)
    try:
        result = await (clock.run(run) if isinstance(clock, FakeClock) else run)
        while result.status is RunStatus.WAITING:  # only the patient workflow rests
            if isinstance(clock, FakeClock):
                await clock.advance_to(result.wake_at)
            else:
                await clock.sleep_until(result.wake_at)
            result = await workflow.resume(result.run_id)
    except WorkflowRunError as error:
        result = error.result
        print(f"  {error}")
    times = [t for t, _ in api.calls]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for n, t in enumerate(times, start=1):
        wait = f", then {duration(gaps[n - 1])} until the next" if n <= len(gaps) else ""
        print(f"  attempt {n} at +{duration(t - times[0])}{wait}")
    print(f"  {result.status.value}: {result.outputs}")
    return {
        "status": result.status,
        "outputs": result.outputs,
        "gaps": gaps,
        "keys": {key for _, key in api.calls},
    }


async def main(path: str | None = None, clock: Clock | None = None) -> dict:
    clock = clock or FakeClock(start=START)
    flaky = PaymentApi(clock, outages=3)
    declines = PaymentApi(clock, outages=0)
    down_for_hours = PaymentApi(clock, outages=4)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(path or Path(tmp) / "runs.sqlite")
        try:
            print("retry=RetryPolicy(max_attempts=5, ...); the API fails 3 times:")
            retried = await pay_and_report(
                build(flaky, store, clock)[0], Charge("o-1", 1999), flaky, clock
            )
            print("a declined card is not in retry_on:")
            declined = await pay_and_report(
                build(declines, store, clock)[0], Charge("o-2", 0), declines, clock
            )
            print("durable retries, 10 min growing to 4 h apart; the API fails 4 times:")
            patient = build(down_for_hours, store, clock)[1]
            durable = await pay_and_report(patient, Charge("o-3", 4999), down_for_hours, clock)
        finally:
            await store.close()
    return {"retried": retried, "declined": declined, "durable": durable}


if __name__ == "__main__":
    asyncio.run(main())
