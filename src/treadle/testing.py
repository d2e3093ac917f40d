"""Tools for testing workflows: a clock you move by hand, a harness, the replay check.

``FakeClock`` stands in for the wall clock everywhere treadle waits (durable
timers, retry backoff, handler timeouts, run deadlines), so tests of
long-running behaviour take milliseconds and are exact::

    clock = FakeClock(start=1_000_000.0)
    task = asyncio.create_task(workflow.run(x, clock=clock))
    await clock.advance(3600)          # an hour passes, instantly

``Harness`` runs a workflow to its end with scripted answers and the fake
clock jumped to each timer, and returns a ``Trace`` to assert on::

    trace = await Harness(workflow, answers={"approve": Verdict(ok=True)}).run(brief)
    trace.assert_order(["write", "approve"])

``replay`` checks new code against runs a store recorded (``treadle
check-upgrade`` from a shell) and names the first divergence.
"""

from __future__ import annotations

from treadle._public import publish
from treadle._testing._clock import FakeClock
from treadle._testing._harness import Harness, HarnessSettings, Trace
from treadle._testing._replay import Divergence, ReplayReport, RunReplay, replay

__all__ = [
    "Divergence",
    "FakeClock",
    "Harness",
    "HarnessSettings",
    "ReplayReport",
    "RunReplay",
    "Trace",
    "replay",
]

publish(__name__, globals(), __all__)
