"""One way for a test to wait on a file another process makes: the file gate.

A run held at a gate writes ``<gate>.reached`` and waits until ``<gate>``
exists (``tests/cli/slow_app.py``, ``tests/server/server_app.py``...); a
crash test's script writes a marker file once it is where the kill should
land. The test waits for that file here, then opens the gate
(``gate.touch()``) or kills the process. Files, because the run is in
another process and there is no event to await across processes; the wait
fails at once, with the process's output, when that process ends first.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

DEADLINE = 30.0  # seconds a test waits for a file before it fails


def reached(gate: Path) -> Path:
    """The file a run held at ``gate`` writes when it gets there."""
    return gate.with_name(f"{gate.name}.reached")


def wait_for_file(
    path: Path,
    process: subprocess.Popen[str] | None = None,
    *,
    seconds: float = DEADLINE,
    what: str = "",
) -> None:
    """Until ``path`` exists; fails if ``process`` ends first or ``seconds`` pass.

    ``what`` says in the failure what the file stands for ("the refund
    started"); the path is said without it.
    """
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(
                f"{what or path}: the process ended first ({process.returncode}): {out}\n{err}"
            )
        assert time.monotonic() < deadline, f"{what or path} never happened ({seconds} s)"
        time.sleep(0.01)


async def file_appears(path: Path, *, seconds: float = DEADLINE) -> None:
    """Until ``path`` exists, on an event loop (a server or worker of this process makes it)."""
    async with asyncio.timeout(seconds):
        while not path.exists():  # noqa: ASYNC110, ASYNC240 - another task's file
            await asyncio.sleep(0.01)
