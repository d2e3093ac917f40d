"""What stops a ``treadle`` command early: Ctrl-C, SIGTERM, SIGHUP, or its output closing.

A command that drives a run must never cancel it on its way out (only
``treadle cancel`` cancels), and one that follows a run must leave it
alone; each needs to hear of every way it can be stopped, not only Ctrl-C:
a terminal closing (SIGHUP), a process manager or ``timeout`` (SIGTERM),
and a reader that went away (``treadle run ... | head -1``: the next write
to stdout fails with EPIPE). :func:`stopping` turns each of those into one
call of the command's own handler, with a :class:`Stop` saying which, so
they all detach, or stop following, the same way.

A closed output is noticed where it is written: :func:`guard_output`
(called once by the console script) wraps stdout and stderr so that a
write to a closed pipe is dropped rather than raised. Raised, it would
unwind through the run's stream, which cancels the run it owns; rich's own
handling (exit 1) did exactly that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a command was stopped early, and the exit code that says so.

    Attributes:
        cause: What stopped it, as the line printed says it (``Ctrl-C``).
        exit_code: 128 plus the signal's number, as shells report it
            (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP, 141 for a
            closed output: SIGPIPE).
    """

    cause: str
    exit_code: int


_SIGNALS = MappingProxyType(
    {
        signal.SIGINT: Stop("Ctrl-C", 128 + signal.SIGINT),
        signal.SIGTERM: Stop("SIGTERM", 128 + signal.SIGTERM),
        signal.SIGHUP: Stop("SIGHUP", 128 + signal.SIGHUP),
    }
)

CLOSED_OUTPUT = Stop("a closed output", 128 + signal.SIGPIPE)
"""The output (stdout or stderr) was closed by its reader."""

UNWRITABLE_OUTPUT = Stop("an output that cannot be written", 74)
"""Writing the output failed (a full disk, an I/O error): 74, sysexits' ``EX_IOERR``."""

# The handlers of the commands being stopped now, innermost last: it is the one told.
_listening: list[tuple[asyncio.AbstractEventLoop, Callable[[Stop], None]]] = []


@contextlib.contextmanager
def stopping(on_stop: Callable[[Stop], None]) -> Iterator[None]:
    """Within: the first Ctrl-C, SIGTERM, SIGHUP or closed output calls ``on_stop`` once.

    ``on_stop`` runs on the event loop, before the code that was running
    when the stop came goes on. After it, the signals act as they do
    without a handler (a second Ctrl-C raises ``KeyboardInterrupt``: stop
    at once). Nested, the innermost ``on_stop`` is the one called.
    """
    loop = asyncio.get_running_loop()
    fired = False

    def fire(stop: Stop) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        _remove_handlers(loop, _SIGNALS)
        on_stop(stop)

    entry = (loop, fire)
    _listening.append(entry)
    installed = []
    for signum, stop in _SIGNALS.items():
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals on this loop
            loop.add_signal_handler(signum, _tell, stop)
            installed.append(signum)
    try:
        yield
    finally:
        _listening.remove(entry)
        if not any(held is loop for held, _ in _listening):
            _remove_handlers(loop, installed)


def _tell(stop: Stop) -> None:
    """Tell the innermost command listening that ``stop`` came."""
    if _listening:
        _listening[-1][1](stop)


def _remove_handlers(loop: asyncio.AbstractEventLoop, signums: Iterable[int]) -> None:
    for signum in signums:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signum)


def output_closed(stop: Stop = CLOSED_OUTPUT) -> None:
    """The output's reader went away (or it cannot be written): stop the command listening.

    Called from whichever thread wrote (rich redraws progress bars from a
    thread of its own): on the loop's thread the command is told at once,
    so that it detaches before the code that wrote goes on.
    """
    if not _listening:
        return  # nothing is driven or followed: the rest of the output is dropped
    loop, fire = _listening[-1]
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fire(stop)
    else:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing left to stop
            loop.call_soon_threadsafe(fire, stop)


class _GuardedOutput:
    """A text stream whose writes that fail are dropped, and reported once.

    A closed pipe stops the command as its reader wanted (:data:`CLOSED_OUTPUT`);
    any other failure to write (``ENOSPC``, ``EIO``) too, but as a failure
    (:data:`UNWRITABLE_OUTPUT`, kept in :attr:`failure` for the command's exit):
    never a traceback, and never "the run failed" for a run that did not.
    Everything else (``isatty``, ``fileno``, ``encoding``...) is the wrapped
    stream's, so rich and ``print`` see the stream they would have.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._closed = False
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                self._stream.write(text)
            except (BrokenPipeError, ValueError):  # ValueError: the file object was closed
                self._lost()
            except OSError as error:
                self._lost(error)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self._lost()
            except OSError as error:
                self._lost(error)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _lost(self, failure: OSError | None = None) -> None:
        """Point the descriptor at /dev/null (the interpreter's last flush must not fail)."""
        self._closed = True
        self.failure = failure
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        output_closed(CLOSED_OUTPUT if failure is None else UNWRITABLE_OUTPUT)


def output_failure() -> OSError | None:
    """Why writing the command's output failed, if it did (a closed pipe is no failure)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, _GuardedOutput) and stream.failure is not None:
            return stream.failure
    return None


def guard_output() -> None:
    """Make a closed stdout or stderr stop the command (:func:`output_closed`), never raise."""
    if not isinstance(sys.stdout, _GuardedOutput) and sys.stdout is not None:
        sys.stdout = _GuardedOutput(sys.stdout)
    if not isinstance(sys.stderr, _GuardedOutput) and sys.stderr is not None:
        sys.stderr = _GuardedOutput(sys.stderr)
