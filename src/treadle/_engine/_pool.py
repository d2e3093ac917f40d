"""The executor instances of one run.

Executors given as factories are built lazily, on their first message, so a
run pays only for the executors it reaches; instances given directly are
shared by every run (the workflow refuses a second concurrent run for those
not declared shareable). The pool also gathers and restores the snapshots
that checkpoints keep of executors with per-run fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._exceptions import ExecutorInUseError
from treadle._graph._executor import Executor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping


@dataclass(frozen=True, slots=True)
class ExecutorNode:
    """One executor of the graph: its rank, and how a run gets an instance.

    ``prototype`` answers questions about handlers; with a ``factory`` each
    run calls it for a fresh instance, without one the prototype is shared.
    """

    id: str
    rank: int
    prototype: Executor
    factory: Callable[[], Executor] | None


class InstanceClaims:
    """Which run holds each non-shareable instance given directly to the builder.

    Instances keep fields between messages, so two concurrent runs sharing
    one would corrupt each other: a second run that needs one is refused.
    """

    __slots__ = ("_busy", "_exclusive")

    def __init__(self, exclusive: Iterable[str]) -> None:
        self._exclusive = tuple(exclusive)
        self._busy: dict[str, str] = {}

    def claim(self, run_id: str) -> Callable[[], None]:
        """Claim every exclusive instance for ``run_id``; return the release.

        Raises:
            ExecutorInUseError: one is busy in another run (nothing is claimed).
        """
        if not self._exclusive:  # every instance shareable, or made per run
            return _nothing_to_release
        for executor_id in self._exclusive:
            holder = self._busy.get(executor_id)
            if holder is not None:
                raise ExecutorInUseError(executor_id, holder)
        for executor_id in self._exclusive:
            self._busy[executor_id] = run_id
        claimed = list(self._exclusive)

        def release() -> None:
            for executor_id in claimed:
                self._busy.pop(executor_id, None)
            claimed.clear()

        return release


def _nothing_to_release() -> None:
    """The release of a run that claimed no instance."""


class ExecutorPool:
    """Instances for one run, created on demand from factories."""

    __slots__ = ("_factories", "_snapshotting", "instances")

    def __init__(
        self,
        shared: dict[str, Executor],
        factories: Mapping[str, Callable[[], Executor]],
    ) -> None:
        # With no factory, no instance is ever added: the pool reads ``shared`` itself,
        # which its maker never changes (a copy per run in flight was one more object
        # for the garbage collector to walk at every pass).
        self.instances: dict[str, Executor] = dict(shared) if factories else shared
        """The instances so far, by id (read it, never change it: :meth:`get` builds them)."""
        self._factories = factories
        # The instances whose class overrides ``snapshot`` (a tuple: nearly always none).
        self._snapshotting: tuple[Executor, ...] | None = None

    @staticmethod
    def parts(
        nodes: Iterable[ExecutorNode],
    ) -> tuple[dict[str, Executor], Mapping[str, Callable[[], Executor]]]:
        """What the pools of a graph's runs are made from: shared prototypes, per-run factories.

        Made once per graph, and never changed: every pool reads them.
        """
        shared: dict[str, Executor] = {}
        factories: dict[str, Callable[[], Executor]] = {}
        for node in nodes:
            if node.factory is None:
                shared[node.id] = node.prototype
            else:
                factories[node.id] = node.factory
        return shared, MappingProxyType(factories)

    def get(self, executor_id: str) -> Executor:
        """The run's instance of an executor, built on first use."""
        instance = self.instances.get(executor_id)
        if instance is None:
            instance = _checked(self._factories[executor_id](), executor_id)
            self.instances[executor_id] = instance
            self._snapshotting = None
        return instance

    def snapshots(self) -> dict[str, Any]:
        """Snapshots of the instances whose class overrides ``snapshot``."""
        if self._snapshotting is None:
            self._snapshotting = tuple(
                i for i in self.instances.values() if type(i).snapshot is not Executor.snapshot
            )
        found = {}
        for instance in self._snapshotting:
            snapshot = instance.snapshot()
            if snapshot is not None:
                found[instance.id] = snapshot
        return found

    def restore(self, snapshots: Mapping[str, Any]) -> None:
        """Give each executor back what its snapshot kept."""
        for executor_id, snapshot in snapshots.items():
            self.get(executor_id).restore(snapshot)


def _checked(instance: object, executor_id: str) -> Executor:
    if not isinstance(instance, Executor):
        msg = f"the factory of executor {executor_id!r} returned {instance!r}, not an Executor"
        raise TypeError(msg)
    if instance.id != executor_id:
        msg = f"the factory of executor {executor_id!r} returned one with id {instance.id!r}"
        raise ValueError(msg)
    return instance
