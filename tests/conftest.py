"""Fixtures every test folder shares (PostgreSQL, store backends, Chromium), and the order of tests.

``make test`` runs the suite on every core with ``--dist loadgroup``: each
test is a unit of work of its own, except the tests of a module sharing a
fixture made once per module (a ``treadle serve``, 100,000 runs), which go to
one worker together, so the fixture is made once, not once per worker (the
browser is made once per worker: tests/browsers.py). Tests that start a fleet
of PostgreSQL worker processes (marked ``fleet``) go to one worker too, so
that two fleets never run at once: each worker process holds a pool of
connections, and the server allows 100 in all. For the same reason every
``treadle`` command a test starts on PostgreSQL (workers, ``serve``, the CLI)
opens at most three connections (``TREADLE_CONNECTIONS``, set below; its own
test sets the flag instead), not the ten a user's gets: three pytest workers
with a fleet beside other process tests went past 100. Modules whose tests
start processes or servers (marked ``integration``) come first and the quick
in-process tests last, so the workers end together instead of one waiting on a
long test started last.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

pytest_plugins = ["postgres", "store_backends", "browsers"]

os.environ.setdefault("TREADLE_CONNECTIONS", "3")  # inherited by every process a test starts

_SHARED_SCOPES = {"module", "class"}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group each module's tests that share a module fixture; the slow modules first."""
    slow_modules = set()
    for item in items:
        module = getattr(item, "module", None)
        if item.get_closest_marker("integration") is not None:
            slow_modules.add(module)
        fixtures = getattr(item, "_fixtureinfo", None)
        defined = fixtures.name2fixturedefs.values() if fixtures is not None else ()
        if item.get_closest_marker("fleet") is not None:
            item.add_marker(pytest.mark.xdist_group("postgres-fleets"))
        elif module is not None and any(d.scope in _SHARED_SCOPES for ds in defined for d in ds):
            item.add_marker(pytest.mark.xdist_group(module.__name__))
    items.sort(key=lambda item: getattr(item, "module", None) not in slow_modules)


@pytest.hookimpl(hookwrapper=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: object):
    """A test timing out prints its event loop's tasks, each where it waits, before the threads.

    pytest-timeout prints every thread's stack; an async test's own stack
    is then the event loop's ``select``, which says nothing of the task that
    hangs. The alarm's handler runs on the loop's thread, so it can list
    the loop's tasks and print where each one waits.
    """
    yield
    timed_out = signal.getsignal(signal.SIGALRM)
    if not callable(timed_out):
        return

    def tasks_first(signum: int, frame: object) -> None:
        __tracebackhide__ = True
        loop = asyncio._get_running_loop()  # the loop this thread runs, if any
        if loop is not None:
            print(f"\n{'+' * 30} asyncio tasks at the timeout {'+' * 30}", file=sys.stderr)
            for task in asyncio.all_tasks(loop):
                print(f"{task.get_name()}:", file=sys.stderr)
                for line in _awaiting(task.get_coro()):
                    print(f"  {line}", file=sys.stderr)
        timed_out(signum, frame)

    signal.signal(signal.SIGALRM, tasks_first)


def _awaiting(awaitable: object) -> list[str]:
    """Where a suspended coroutine waits: each frame down its chain of awaits."""
    lines = []
    while awaitable is not None and len(lines) < 60:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is not None:
            code = frame.f_code
            lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}")
        following = getattr(awaitable, "cr_await", None)
        if following is None:
            following = getattr(awaitable, "ag_await", None)
        if following is None and frame is None:
            lines.append(repr(awaitable)[:200])  # a future, or an awaitable of C
        awaitable = following
    return lines
