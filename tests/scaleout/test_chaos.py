"""Must-show of the scale-out issue: workers killed and paused, runs finish exactly once.

Each repetition is :func:`chaos.campaign` (4 ``treadle worker`` processes,
200 runs of 20 supersteps and 20 durable timers; one worker SIGKILLed, one
SIGSTOPped until another worker has taken over a run it was running) checked
by :func:`chaos.check`: among the rest, the paused worker, once continued,
finds each of those leases gone and commits nothing more to those runs. The default suite
runs two seeds; ``make soak`` runs ten and writes their figures to
``benchmarks/SOAK.md``, beside the other measured figures (or to the file
``TREADLE_SOAK_REPORT`` names): never into the source tree's ``tests/``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import chaos
import processes
import pytest
from processes import REPOSITORY

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.fleet, pytest.mark.timeout(600)]


def soak_report() -> Path:
    """Where ``make soak`` writes the chaos figures (``$TREADLE_SOAK_REPORT``, else SOAK.md)."""
    return processes.soak_report("SOAK.md", "TREADLE_SOAK_REPORT")


def test_the_soak_figures_go_beside_the_benchmarks_not_into_tests(monkeypatch, tmp_path):
    monkeypatch.delenv("TREADLE_SOAK_REPORT", raising=False)
    assert soak_report() == REPOSITORY / "benchmarks" / "SOAK.md"
    assert not soak_report().is_relative_to(REPOSITORY / "tests")
    monkeypatch.setenv("TREADLE_SOAK_REPORT", str(tmp_path / "soak.md"))
    assert soak_report() == tmp_path / "soak.md"


# Two seeds by default; `make soak` runs ten (test_ten_seeded_chaos_repetitions).
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
            "max takeover delay s | runs taken from the paused worker | it was stopped s | "
            "commits | problems |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    failures = []
    for seed in range(1, 11):
        outcome = await chaos.campaign(dsn, seed, tmp_path)
        problems = chaos.check(outcome, expected)
        failures += problems
        worst = max(outcome.takeover_delays, default=float("nan"))
        lines.append(
            f"| {seed} | {outcome.wall:.1f} | {len(outcome.held_at_kill)} | "
            f"{outcome.naps_started_by_killed} | {worst:.2f} | {len(outcome.taken_from_paused)} | "
            f"{outcome.paused_for:.2f} | {outcome.commits} | "
            f"{'; '.join(problems) or 'none'} |"
        )
    report = soak_report()
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(lines) + "\n")
    assert failures == []
