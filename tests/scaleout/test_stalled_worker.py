"""A stalled worker's runs go on elsewhere within the lease plus one poll interval.

Each try is :func:`stall.campaign`: three ``treadle worker`` processes
(lease 3 s, poll 0.5 s) serving 300 runs;
one of them SIGSTOPped for 7 s at whatever moment it is at, in the middle of
a commit too, then SIGCONTed.
The longest gap between two commits of any run must stay within lease +
poll + 4 s, while the live workers have new runs queued. The default suite
runs one try; ``make soak`` runs ten and writes the longest gap of each to
``benchmarks/STALL.md`` (or the file ``TREADLE_STALL_REPORT`` names).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest
import stall
from processes import soak_report

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.fleet, pytest.mark.timeout(600)]


def stall_report() -> Path:
    """Where ``make soak`` writes this campaign's figures."""
    return soak_report("STALL.md", "TREADLE_STALL_REPORT")


async def test_a_worker_stopped_mid_commit_has_its_runs_taken_over_within_lease_and_poll(
    dsn, tmp_path
):
    outcome = await stall.campaign(dsn, 1, tmp_path, runs=stall.QUICK_RUNS)
    assert stall.check(outcome) == []


@pytest.mark.soak
async def test_ten_tries_of_a_stopped_worker_keep_every_gap_within_lease_and_poll(dsn, tmp_path):
    lines = [
        "# Stall campaign: 10 tries",
        "",
        (
            f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `make soak`: "
            f"{stall.WORKERS} worker processes, {stall.RUNS} runs x {stall.SUPERSTEPS} "
            f"supersteps; lease {stall.LEASE} s, poll {stall.POLL} s; one worker SIGSTOPped "
            f"{stall.STOPPED} s at a random moment. Bound on the longest gap between two "
            f"commits of a run: {stall.BOUND} s."
        ),
        "",
        (
            "| try | wall s | stopped s | runs it held | of them locked by its open transaction "
            "| first taken over after s | new runs queued then | longest gap s | problems |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    failures = []
    for seed in range(1, 11):
        outcome = await stall.campaign(dsn, seed, tmp_path)
        problems = stall.check(outcome)
        failures += problems
        lines.append(
            f"| {seed} | {outcome.wall:.1f} | {outcome.stopped_for:.1f} | "
            f"{len(outcome.held_at_stop)} | {len(outcome.locked_at_stop)} | "
            f"{outcome.first_takeover_after:.2f} | {outcome.pending_at_takeover} | "
            f"{outcome.max_gap:.2f} | {'; '.join(problems) or 'none'} |"
        )
    report = stall_report()
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(lines) + "\n")
    assert failures == []
