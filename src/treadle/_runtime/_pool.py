"""The executor instances of one run.

Executors given as factories are built lazily, on their first message, so a
run pays only for the executors it reaches; instances given directly are
shared by every run (the workflow refuses a second concurrent run for those
not declared shareable). The pool also gathers and restores the snapshots
that checkpoints keep of executors with per-run fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._graph._executor import Executor

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class ExecutorPool:
    """Instances for one run, created on demand from factories."""

    __slots__ = ("_factories", "_instances", "_snapshotting")

    def __init__(
        self,
        shared: Mapping[str, Executor],
        factories: Mapping[str, Callable[[], Executor]],
    ) -> None:
        self._instances: dict[str, Executor] = dict(shared)
        self._factories = factories
        self._snapshotting: list[Executor] | None = None

    def get(self, executor_id: str) -> Executor:
        """The run's instance of an executor, built on first use."""
        instance = self._instances.get(executor_id)
        if instance is None:
            instance = _checked(self._factories[executor_id](), executor_id)
            self._instances[executor_id] = instance
            self._snapshotting = None
        return instance

    def snapshots(self) -> dict[str, Any]:
        """Snapshots of the instances whose class overrides ``snapshot``."""
        if self._snapshotting is None:
            self._snapshotting = [
                i for i in self._instances.values() if type(i).snapshot is not Executor.snapshot
            ]
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
