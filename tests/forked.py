"""Real processes without a Python start each: forked from a server that imported treadle once.

A crash campaign starts a process per trial to SIGKILL it, and a race
starts one per racer; each ``python`` start with ``import treadle`` costs
about half a second of CPU, which a campaign of seventy trials pays
seventy times. :func:`start` forks the process instead from multiprocessing's
fork server, which imported treadle (and its stores and command line) once
for this test process: the child is a process of its own (its own pid and
memory, killed by a signal as any other, its store connections its own),
that starts with nothing of the test's in memory. It runs
``module:function`` with the arguments given, in the environment, directory
and import path given, its stdout and stderr piped back as text, and is
steered as a ``subprocess.Popen`` is (``pid``, ``stdout``, ``stderr``,
``poll``, ``wait``, ``send_signal``, ``kill``, ``communicate``,
``returncode``; a ``SystemExit`` code is its exit code, a signal its
negative). Tests about how a process starts (the console script, imports,
packages missing) start a real one with ``subprocess``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from treadle._cli._app import COMMANDS

if TYPE_CHECKING:
    from collections.abc import Sequence

PRELOAD = [
    "treadle",
    "treadle.stores",
    "treadle._cli._app",
    *(f"treadle._cli.{module}" for module, _ in COMMANDS),  # which the app imports as asked
    "treadle._stores._postgres",  # psycopg: for children on PostgreSQL
    "treadle._server._app",  # the HTTP API, which race tests' senders run in process
]
"""What the fork server imports once: everything a child runs is then in memory.

None of it is checked as not imported: tests of what an import loads start
a real interpreter (``subprocess``).
"""

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def start(
    target: str,
    *args: Any,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    argv: list[str] | None = None,
    stdin: bool = False,
    stderr: str | os.PathLike[str] | None = None,
    stdout: str | os.PathLike[str] | None = None,
) -> Forked:
    """A process forked from the server, running ``target`` (``module:function``) on ``args``.

    ``env`` is its whole environment (the test's own when ``None``); its
    ``PYTHONPATH`` entries go first on its import path, as for a new
    interpreter. ``argv`` is its ``sys.argv`` (a command line's function
    reads it). ``stdin``: a pipe to write its input into, else it reads
    nothing. ``stderr``: a file its stderr goes to (appended), for a test
    that reads it while the process runs on; else a pipe (``Forked.stderr``).
    ``stdout`` likewise (``os.devnull`` for a long-lived process whose output
    nobody reads: an unread pipe that fills up would block it).
    """
    env = dict(os.environ if env is None else env)
    out = os.pipe() if stdout is None else _to_file(stdout)
    err = os.pipe() if stderr is None else _to_file(stderr)
    into = os.pipe() if stdin else None
    # The child's ends (its stdout and stderr to write, its stdin to read), as
    # connections: multiprocessing hands those to the forked process.
    ends = [Connection(out[1], readable=False), Connection(err[1], readable=False)]
    if into is not None:
        ends.append(Connection(into[0], writable=False))
    process = _CONTEXT.Process(
        target=_child,
        args=(target, args, env, os.fspath(cwd or Path.cwd()), argv or [target], ends),
    )
    try:
        process.start()
    finally:
        for end in ends:
            end.close()
    return Forked(
        process,
        _reader(out[0], stdout),
        _reader(err[0], stderr),
        os.fdopen(into[1], "w") if into is not None else None,
    )


def _reader(fd: int, path: str | os.PathLike[str] | None) -> IO[str]:
    """What the parent reads of a stream: the pipe's end, or nothing when it went to a file."""
    if path is None:
        return os.fdopen(fd)
    os.close(fd)
    return io.StringIO()


def _to_file(path: str | os.PathLike[str]) -> tuple[int, int]:
    """A (read, write) pair like a pipe's whose write end appends to ``path`` (nothing to read)."""
    return (
        os.open(os.devnull, os.O_RDONLY),
        os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
    )


def _child(
    target: str,
    args: tuple[Any, ...],
    env: dict[str, str],
    cwd: str,
    argv: list[str],
    ends: list[Connection],
) -> None:
    """In the forked process: its streams, environment and path made, then ``target`` run."""
    for end, number in zip(ends, (1, 2, 0), strict=False):  # stdout, stderr, stdin
        os.dup2(end.fileno(), number)
        end.close()
    if len(ends) == 3:  # multiprocessing gave it /dev/null
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's stdin, kept
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.argv = argv
    module, _, function = target.partition(":")
    getattr(importlib.import_module(module), function)(*args)


def communicate_all(
    children: Sequence[Forked], timeout: float | None = None
) -> list[tuple[int, str, str]]:
    """Each child's exit code and the rest of its stdout and stderr, all read at once.

    Racers are read together, not one after another: one blocked on a full
    stderr pipe while the test waits on another (which waits on its lock)
    would hang the race. Should one outlive ``timeout``, every one still
    running is killed.
    """
    with concurrent.futures.ThreadPoolExecutor(max(len(children), 1)) as readers:
        ended = [readers.submit(child.communicate) for child in children]
        if concurrent.futures.wait(ended, timeout).not_done:  # none left running, nor read
            for child in children:
                if child.poll() is None:
                    child.kill()
            raise subprocess.TimeoutExpired(f"{len(children)} forked processes", timeout or 0)
        outputs = [future.result() for future in ended]
    return [(child.wait(), out, err) for child, (out, err) in zip(children, outputs, strict=True)]


def let_go_together(children: Sequence[Forked], go: Path, timeout: float) -> list[Any]:
    """Race ``children``: wait until each says it is ready, touch ``go``, read what each said.

    Each racer prints a ``ready`` line, waits for the file ``go``, acts and
    prints one JSON line last; that line is returned, in the children's order.
    A racer that exits with an error fails the test with its stderr.
    """
    for child in children:
        line = child.stdout.readline()
        assert "ready" in line, (line, child.finish(90)[2])
    go.touch()
    told = []
    for code, out, err in communicate_all(children, timeout=timeout):
        assert code == 0, err
        told.append(json.loads(out.strip().splitlines()[-1]))
    return told


class Forked:
    """A forked process, steered as a ``subprocess.Popen`` of text pipes is."""

    def __init__(
        self,
        process: multiprocessing.process.BaseProcess,
        stdout: IO[str],
        stderr: IO[str],
        stdin: IO[str] | None,
    ) -> None:
        self._process = process
        self.pid = process.pid
        self.stdout, self.stderr, self.stdin = stdout, stderr, stdin

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            assert timeout is not None
            raise subprocess.TimeoutExpired(str(self._process.name), timeout)
        return self._process.exitcode

    def send_signal(self, number: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self._process.kill()

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its stdin closed, what it writes until it ends (read as it comes), its end awaited.

        Once its pipes were read to their end, nothing more: ``("", "")``.
        """
        if self.stdout.closed:  # read by an earlier call
            self.wait(timeout)
            return "", ""
        if self.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.stdin.close()
        with concurrent.futures.ThreadPoolExecutor(2) as readers:
            out, err = readers.submit(self.stdout.read), readers.submit(self.stderr.read)
            try:
                self.wait(timeout)
                return out.result(timeout), err.result(timeout)
            finally:
                if self.poll() is not None:
                    self.stdout.close()
                    self.stderr.close()

    def finish(self, timeout: float) -> tuple[int, str, str]:
        """Its exit code and the rest of its stdout and stderr; killed if it outlives ``timeout``.

        (``communicate`` waits for the pipes to close even after its timeout.)
        """
        [ended] = communicate_all([self], timeout)
        return ended

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        """Killed if it still runs, and reaped, its pipes closed."""
        if self.poll() is None:
            self.kill()
        if not self.stdout.closed:
            self.communicate()
