"""The `treadle` command as the CLI tests drive it: real subprocesses on one SQLite file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")


def seconds(iso: str) -> float:
    """A time the command's JSON gives (ISO 8601 with its offset) as seconds since the epoch."""
    return datetime.fromisoformat(iso).timestamp()


class Cli:
    """The `treadle` command on the SQLite file ``runs.sqlite`` in ``tmp_path``.

    The environment is the test's own less any ``TREADLE_`` setting, so a
    developer's shell cannot change what a test sees; ``env`` adds some back.
    """

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.cwd = tmp_path
        self.db = tmp_path / "runs.sqlite"
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
        self.env = {**inherited, "PYTHONPATH": str(HERE), "TREADLE_STORE": str(self.db), **env}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TREADLE, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )

    def json(self, *args: str):
        done = self(*args, "--json")
        assert done.returncode in (0, 3), done.stderr
        return json.loads(done.stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [TREADLE, *args],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def checkpoints(self, run_id: str) -> list[int]:
        return [c["superstep"] for c in self.json("history", run_id)["checkpoints"]]

    def snapshot(self) -> list[object]:
        """Every row the store holds, to show that a refused command changed nothing."""
        if not self.db.exists():
            return []
        with sqlite3.connect(self.db) as db:
            return [
                db.execute("SELECT * FROM treadle_runs ORDER BY run_id").fetchall(),
                db.execute("SELECT checkpoint_id FROM treadle_checkpoints").fetchall(),
                db.execute("SELECT * FROM treadle_inbox").fetchall(),
            ]
