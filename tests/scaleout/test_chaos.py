"""Must-show of the scale-out issue: workers killed and paused, runs finish exactly once.

Each repetition is :func:`chaos.campaign` (4 ``treadle worker`` processes,
200 runs of 20 supersteps and 20 durable timers; one worker SIGKILLed, one
SIGSTOPped past its lease) checked by :func:`chaos.check`. The default suite
runs two seeds; ``make soak`` runs ten and writes their figures to
``tests/scaleout/CHAOS.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import chaos
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.mark.parametrize("seed", [1, 2])
async def test_killed_and_paused_workers_lose_nothing_and_commit_nothing_twice(dsn, seed, tmp_path):
    outcome = await chaos.campaign(dsn, seed, tmp_path)
    assert chaos.check(outcome, await chaos.uninterrupted()) == []


@pytest.mark.soak
async def test_ten_seeded_chaos_repetitions(dsn, tmp_path):
    expected = await chaos.uninterrupted()
    lines = [
        "# Chaos campaign: 10 seeded repetitions",
        "",
        (
            f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `make soak`: 4 worker "
            f"processes, {chaos.COUNTERS} runs x {chaos.SUPERSTEPS} supersteps + {chaos.NAPS} "
            f"timers of {chaos.NAP_SECONDS} s; lease {chaos.LEASE} s, poll {chaos.POLL} s."
        ),
        "",
        (
            "| seed | wall s | runs held by the killed worker | timers it had set | "
            "max takeover delay s | commits | problems |"
        ),
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    failures = []
    for seed in range(1, 11):
        outcome = await chaos.campaign(dsn, seed, tmp_path)
        problems = chaos.check(outcome, expected)
        failures += problems
        worst = max(outcome.takeover_delays, default=float("nan"))
        lines.append(
            f"| {seed} | {outcome.wall:.1f} | {len(outcome.held_at_kill)} | "
            f"{outcome.naps_started_by_killed} | {worst:.2f} | {outcome.commits} | "
            f"{'; '.join(problems) or 'none'} |"
        )
    Path(__file__).with_name("CHAOS.md").write_text("\n".join(lines) + "\n")
    assert failures == []
