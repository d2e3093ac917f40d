"""The `treadle` command as the CLI tests drive it, on one SQLite file.

A command is run in the test's own process by default, through typer's
``CliRunner`` on the same ``app`` the console script runs: parsing, output,
JSON and exit codes are what a process would show, without a Python start
per command. A test about what only a process has (signals, a closed pipe,
a kill, packages hidden from imports, the console script itself) asks for a
real one: ``Cli(tmp_path, process=True)``, or ``cli.start(...)`` for one it
steers while it runs; processes racing each other are forked
(``cli.fork(...)``, see ``tests/forked.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from typer.testing import CliRunner

import forked
from treadle._cli._app import app

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from click.testing import Result

    from forked import Forked

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")


def seconds(iso: str) -> float:
    """A time the command's JSON gives (ISO 8601 with its offset) as seconds since the epoch."""
    return datetime.fromisoformat(iso).timestamp()


@dataclass(frozen=True)
class Typed:
    """What a person types at a prompt (``Cli.on_a_terminal``), after ``meanwhile`` ran."""

    prompt: bytes
    meanwhile: Callable[[], object]
    keys: bytes


class Cli:
    """The `treadle` command on the SQLite file ``runs.sqlite`` in ``tmp_path``.

    The environment is the test's own less any ``TREADLE_`` setting, so a
    developer's shell cannot change what a test sees; ``env`` adds some back.
    ``process`` runs each command as a process of its own (see the module).
    """

    def __init__(self, tmp_path: Path, *, process: bool = False, **env: str) -> None:
        self.cwd = tmp_path
        self.db = tmp_path / "runs.sqlite"
        self.process = process
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
        self.env = {**inherited, "PYTHONPATH": str(HERE), "TREADLE_STORE": str(self.db), **env}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        if not self.process:
            return self.invoke(*args)
        return subprocess.run(
            [TREADLE, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )

    def invoke(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The command run in this process, answered as a finished process would be.

        An exception the command lets out is printed to stderr with exit code
        1, as Python does for a process, so "no traceback" still fails when
        one escapes.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            result = self._run(args)
        else:  # an async test: the command runs its own loop, so on a thread of its own
            with concurrent.futures.ThreadPoolExecutor(1) as thread:
                result = thread.submit(self._run, args).result()
        stderr = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            stderr += "".join(traceback.format_exception(result.exception))
        done = [TREADLE, *args]
        return subprocess.CompletedProcess(done, result.exit_code, result.stdout, stderr)

    def _run(self, args: tuple[str, ...]) -> Result:
        with self._as_a_process():
            return CliRunner().invoke(app, list(args), prog_name="treadle")

    @contextlib.contextmanager
    def _as_a_process(self) -> Iterator[None]:
        """Within: this command's directory, environment and import path, undone after.

        Modules imported from the test's files (the apps) are forgotten
        afterwards, so the next command imports them afresh as a new process
        would; the library's own modules stay loaded.
        """
        paths = [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p]
        roots = [str(Path(p).resolve()) for p in [*paths, self.cwd, HERE.parent]]
        saved_path, saved_modules = list(sys.path), set(sys.modules)
        saved_env, saved_cwd = dict(os.environ), Path.cwd()
        os.environ.clear()
        os.environ.update(self.env)
        sys.path[:0] = paths
        os.chdir(self.cwd)
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            sys.path[:] = saved_path
            for name in set(sys.modules) - saved_modules:
                file = getattr(sys.modules[name], "__file__", None) or ""
                if any(file.startswith(root) for root in roots):
                    del sys.modules[name]

    def json(self, *args: str):
        done = self(*args, "--json")
        assert done.returncode in (0, 3), done.stderr
        return json.loads(done.stdout)

    def on_a_terminal(
        self, *args: str, columns: int, within: float = 60.0, typed: Typed | None = None
    ) -> str:
        """What the command shows on a pseudo-terminal ``columns`` wide, until it exits.

        With ``typed``: once the screen shows its prompt, its ``meanwhile``
        is called, then its keys are typed.
        """
        pid, fd = pty.fork()
        if pid == 0:  # the child: the CLI on a pseudo-terminal
            os.chdir(self.cwd)
            os.execve(  # noqa: S606 - the CLI itself, on a pseudo-terminal
                TREADLE,
                [TREADLE, *args],
                {**self.env, "COLUMNS": str(columns), "TERM": "xterm"},
            )
        screen = b""
        deadline = time.monotonic() + within
        try:
            while time.monotonic() < deadline:
                if typed is not None and typed.prompt in screen:
                    typed.meanwhile()
                    os.write(fd, typed.keys)
                    typed = None
                ready, _, _ = select.select([fd], [], [], 1)
                if not ready:
                    continue
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
            else:  # still running at the deadline: the caller's check shows the screen
                os.kill(pid, signal.SIGKILL)
        finally:
            os.close(fd)
            os.waitpid(pid, 0)
        return screen.decode(errors="replace")

    def fork(self, *args: str) -> Forked:
        """The command in a process of its own forked with the command line imported.

        For races of many processes, where a new interpreter each would only
        add its start; steered as :meth:`start`'s process is.
        """
        argv = [TREADLE, *args]
        return forked.start("treadle._cli._app:main", env=self.env, cwd=self.cwd, argv=argv)

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
