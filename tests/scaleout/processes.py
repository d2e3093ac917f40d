"""Worker processes and polling, shared by the multi-process scale-out tests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import forked

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

HERE = Path(__file__).parent
REPOSITORY = HERE.resolve().parents[1]
TREADLE = str(Path(sys.executable).with_name("treadle"))
# What a started process imports: the apps here, the shared test pieces, and this
# checkout's treadle (not whichever one the environment installed).
PYTHONPATH = os.pathsep.join(map(str, (HERE, HERE.parent, REPOSITORY / "src")))


def start_worker(
    dsn: str,
    schema: str,
    log: Path,
    *,
    name: str,
    lease: float,
    poll: float,
    app: str = "scale_app",
) -> forked.Forked:
    """``treadle worker --app APP`` on ``dsn``/``schema``, logging to ``log`` (appended).

    Forked with the command line imported (``tests/forked.py``), not started
    through the console script: a process of its own all the same, killed
    and stopped by signals as any other, without a Python start each.
    """
    env = {**os.environ, "TREADLE_SCHEMA": schema, "PYTHONPATH": PYTHONPATH}
    command = ["treadle", "worker", "--app", app, "--store", dsn, "--worker-id", name]
    command += ["--lease", str(lease), "--poll-interval", str(poll), "--concurrency", "8"]
    return forked.start(
        "treadle._cli._app:main", env=env, argv=command, stdout=os.devnull, stderr=log
    )


def stop_all(processes: list[forked.Forked]) -> None:
    """SIGTERM each process still running, then reap it (killed if it lingers), pipes closed."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        process.finish(30)


async def wait_until(done: Callable[[], Awaitable[bool]], *, interval: float = 0.02) -> None:
    """Poll ``done`` until it is true (what another process does has no event to await)."""
    while not await done():  # noqa: ASYNC110 - no event crosses processes
        await asyncio.sleep(interval)


def soak_report(name: str, variable: str) -> Path:
    """Where a ``make soak`` campaign writes its figures.

    The file ``$variable`` names when set, else ``benchmarks/<name>``: measured
    figures live beside ``make bench``'s, not among the tests.
    """
    override = os.environ.get(variable)
    return Path(override) if override else REPOSITORY / "benchmarks" / name
