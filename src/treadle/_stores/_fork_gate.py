"""A fork waits until no thread of a store is inside SQLite.

SQLite keeps mutexes for the whole process: the list of files open and the
locks taken on each, the shared-memory index of a write-ahead log. A process
that forks while one of its threads holds one of them hands the child a
mutex that nobody will ever release, and the child's first use of the same
file waits for ever (a ``SqliteStore`` carried into a ``multiprocessing``
child, or a pre-forking server's worker, whose parent was still writing or
following live events).

So each thread that calls into SQLite for a store does it holding a lock
registered here (:func:`guard`), and a fork, through ``os.register_at_fork``,
first takes every such lock, waiting for the calls in flight to finish, and
lets them all go again on both sides once it is done. A fork therefore waits
for at most one call of each of the store's threads (a group commit, a read,
a batch of live events); the child starts with no call of ours in flight.
"""

from __future__ import annotations

import os
import threading
import weakref


class _ForkGate:
    """The locks held by threads inside SQLite, each kept as long as its owner lives."""

    __slots__ = ("_guards", "_held", "_registry")

    def __init__(self) -> None:
        self._registry = threading.Lock()  # guards _guards; held across the fork
        self._guards: weakref.WeakKeyDictionary[object, tuple[threading.Lock, ...]] = (
            weakref.WeakKeyDictionary()
        )
        self._held: list[threading.Lock] = []

    def guard(self, owner: object, locks: tuple[threading.Lock, ...]) -> None:
        with self._registry:
            self._guards[owner] = locks

    def before(self) -> None:
        self._registry.acquire()
        held = [lock for locks in self._guards.values() for lock in locks]
        for lock in held:
            lock.acquire()
        self._held = held

    def after(self) -> None:
        held, self._held = self._held, []
        for lock in held:
            lock.release()
        self._registry.release()


# Per process by nature, as the fork handlers are: one gate, registered once.
_GATE = _ForkGate()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_GATE.before, after_in_parent=_GATE.after, after_in_child=_GATE.after
    )


def guard(owner: object, *locks: threading.Lock) -> None:
    """Make a fork wait while any of ``locks`` is held, for as long as ``owner`` lives.

    They are the locks ``owner``'s threads hold while inside SQLite; a thread
    holding one must not wait for another of them (a fork takes them in turn).
    """
    _GATE.guard(owner, locks)
