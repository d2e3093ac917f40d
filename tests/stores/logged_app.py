"""The workflow behind ``tests/stores/data/logged-v17.sqlite``, and how that file was made.

The file was written by treadle as released before SQLite wrote event-log
rows in layout 2 (schema version 17: rows of the log's JSON, as text, or
deflated when 1 KiB or longer), by running this module::

    python tests/stores/logged_app.py make tests/stores/data/logged-v17.sqlite

which also writes ``logged-v17.json`` beside it: every run's events as that
release read them back (``LoggedEvent.to_json``). The runs log most kinds
of event: a start with its actor, a timer, a resumption, an output long
enough to be packed, a custom event of text with quotes, backslashes and
non-ASCII letters, progress, failed attempts with their tracebacks, a
request, a cancel (a status the store writes in SQL). ``test_logged_upgrade.py``
opens a copy with today's treadle, which must read every event as that
release did, and go on. Keep the workflow as it is: the stored runs were
made by this exact graph, on a fake clock starting at 1000.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from treadle import (
    ExponentialBackoff,
    RetryPolicy,
    Workflow,
    WorkflowBuilder,
    WorkflowContext,
    executor,
)
from treadle.errors import ExecutorFailedError
from treadle.stores import SqliteStore
from treadle.testing import FakeClock

START = 1000.0
"""The fake clock's time when the runs began."""
SLEEP_S = 60.0
"""How long the sleepers sleep."""
SLEEPER, WOKEN, CANCELLED = "sleeper", "woken", "cancelled"
"""Asleep on a timer; slept and was woken and completed; asleep, then cancelled."""
REPORTER = "reporter"
"""Logged a custom event, progress and an output too long for a text row, and completed."""
FAILER = "failer"
"""Failed twice (a retry), and failed the run."""
ASKER = "asker"
"""Asked a question, and waits for its answer."""
RUNS = (SLEEPER, WOKEN, CANCELLED, REPORTER, FAILER, ASKER)

REPORT = "a line of the report, long enough for a packed row. " * 30
NOTE = {"text": 'naïve "quoted" \\ back\\slash, tab\t, ✓ and 𝄞', "n": -2.5, "none": None}


def build() -> Workflow:
    @executor(
        id="act",
        retry=RetryPolicy(max_attempts=2, backoff=ExponentialBackoff(0.0, 0.0, jitter=0.0)),
    )
    async def act(n: int, ctx: WorkflowContext[str]) -> None:
        if n == 1:  # the sleepers
            await ctx.sleep(SLEEP_S)
            ctx.yield_output("awake")
        elif n == 2:
            ctx.add_event(NOTE)
            ctx.report_progress(1, 2, "half")
            ctx.yield_output(REPORT)
        elif n == 3:
            raise ValueError("broken on purpose")
        else:  # the asker
            answer = await ctx.request({"question": n}, str)
            ctx.yield_output(f"answered {answer}")

    return WorkflowBuilder(act, name="logged").build()


async def make(path: str) -> None:
    """Write the runs described above into a new SQLite store at ``path``, and their logs."""
    store = SqliteStore(path)
    workflow = build()
    clock = FakeClock(start=START)
    try:
        for run_id, n in ((SLEEPER, 1), (WOKEN, 1), (CANCELLED, 1), (REPORTER, 2)):
            await workflow.run(n, run_id=run_id, store=store, clock=clock)
        with contextlib.suppress(ExecutorFailedError):  # the run fails: it is stored so
            await workflow.run(3, run_id=FAILER, store=store, clock=clock)
        await workflow.run(4, run_id=ASKER, store=store, clock=clock)
        await workflow.cancel(CANCELLED, store=store)
        await clock.advance(SLEEP_S)
        await workflow.resume(WOKEN, store=store, clock=clock)
        logs = {
            run_id: [event.to_json() for event in await store.read_events(run_id)]
            for run_id in RUNS
        }
    finally:
        await store.close()
    Path(path).with_suffix(".json").write_text(json.dumps(logs, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 3:
        sys.exit(__doc__)
    Path(sys.argv[2]).unlink(missing_ok=True)
    asyncio.run(make(sys.argv[2]))
