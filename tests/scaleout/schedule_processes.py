"""Real processes that serve schedules, for the tests that kill, stop and race them.

``treadle worker`` and ``treadle serve`` as a user starts them, on the
tests' digest app (``tests/apps/digest.py``), each logging to a file of its
own; each is forked with the command line imported (``tests/forked.py``): a
process of its own, SIGKILLed and stopped as any other, without a Python
start each (a campaign restarts them a dozen times).
:func:`check_one_run_per_tick` is what every such test asserts at the
end: the ticks started form one unbroken line of nominal times, each with
one run of its own that output its own time, and there is no other run.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from processes import stop_all

import forked

if TYPE_CHECKING:
    from treadle._stores._store import Store

HERE = Path(__file__).parent
APPS = HERE.parent / "apps"
TREADLE = str(Path(sys.executable).with_name("treadle"))
_ADDRESS = re.compile(r"open (http://127\.0\.0\.1:(\d+))/\?token=(\S+)")


def environment(schema: str | None = None) -> dict[str, str]:
    """A `treadle` process's environment: the apps importable, no stray settings."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    env = {**inherited, "PYTHONPATH": str(APPS)}
    if schema is not None:
        env["TREADLE_SCHEMA"] = schema
    return env


def start_worker(dsn: str, schema: str, log: Path, name: str) -> forked.Forked:
    """``treadle worker --app digest`` on PostgreSQL, polling every 0.2 s, leases of 2 s."""
    command = [TREADLE, "worker", "--app", "digest", "--store", dsn, "--worker-id", name]
    command += ["--lease", "2", "--poll-interval", "0.2", "--concurrency", "8"]
    return forked.start("treadle._cli._app:main", env=environment(schema), argv=command, stderr=log)


class Serve:
    """``treadle serve --app digest`` on ``store``; its address read from what it prints."""

    def __init__(self, store: str, log: Path, schema: str | None = None) -> None:
        self.store, self.log, self.schema = store, log, schema
        self.process: forked.Forked | None = None
        self.base = self.token = ""

    def start(self, *, deadline: float = 120) -> Serve:
        command = [TREADLE, "serve", "--app", "digest", "--store", self.store, "--port", "0"]
        command += ["--poll-interval", "0.2"]
        self.process = forked.start(
            "treadle._cli._app:main", env=environment(self.schema), argv=command, stderr=self.log
        )
        give_up = time.monotonic() + deadline
        for line in self.process.stdout:  # it prints the address before it serves
            found = _ADDRESS.search(line)
            if found:
                self.base, self.token = found.group(1), found.group(3)
                break
            assert time.monotonic() < give_up, "treadle serve printed no address"
        return self

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def kill(self) -> None:
        """SIGKILL it (if it still runs), reaped, its pipes closed."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.finish(30)

    def stop(self) -> None:
        if self.process is not None:
            stop_all([self.process])


async def check_one_run_per_tick(store: Store, schedule_id: str, every: float) -> list[float]:
    """Assert one run per started tick, no gap between them, no other run; the nominal times.

    Every tick from the first to the last started is there (none missing),
    each run's id is its tick's (none twice: ids are unique, and there is no
    run of the schedule but theirs), and each run completed.
    """
    ticks = await store.list_ticks(schedule_id, limit=100_000)
    assert [t for t in ticks if t.action != "started"] == [], "a tick was skipped or missed"
    nominals = sorted(t.nominal_at for t in ticks)
    assert nominals, "no tick started"
    gaps = [b - a for a, b in itertools.pairwise(nominals) if b - a != every]
    assert gaps == [], f"ticks missing between {nominals[0]} and {nominals[-1]}: {gaps}"
    runs = [r for r in await store.list_runs(limit=100_000) if r.run_id.startswith(schedule_id)]
    assert sorted(r.run_id for r in runs) == sorted(t.run_id for t in ticks if t.run_id)
    assert {r.status for r in runs} == {"completed"}
    for tick in ticks:
        assert tick.run_id is not None
        when = datetime.fromtimestamp(tick.nominal_at, UTC).strftime("%Y%m%dT%H%M%SZ")
        assert tick.run_id == f"{schedule_id}@{when}"
    return nominals
