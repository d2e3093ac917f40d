"""Which workflows a process hosts, by name and version.

A run records the name and version of the workflow that started it, and goes
on with exactly that version: a process that hosts several versions of one
workflow (a runtime, a worker, a server, a client) finds each run's by both.
A new run takes the newest version hosted unless it names one. One class
answers those questions for every kind of host, so they agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._exceptions import AppLoadError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from treadle._workflow._workflow import Workflow


def check_version(version: object) -> int:
    """``version``, if it is a workflow version (an int from 1).

    Raises:
        TypeError, ValueError: It is not.
    """
    if isinstance(version, bool) or not isinstance(version, int):
        msg = f"a workflow version is an int from 1, got {version!r}"
        raise TypeError(msg)
    if version < 1:
        msg = f"a workflow version is an int from 1, got {version}"
        raise ValueError(msg)
    return version


class Hosted:
    """The workflows a process hosts, by name and version.

    Iterating yields the newest version of each name, which is what lists of
    workflows show; :meth:`get` finds any version.

    Raises:
        ValueError: Two different workflows share a name and a version.
    """

    __slots__ = ("_by_key", "_newest")

    def __init__(self, workflows: Iterable[Workflow] = ()) -> None:
        self._by_key: dict[tuple[str, int], Workflow] = {}
        self._newest: dict[str, Workflow] = {}
        for workflow in workflows:
            self.add(workflow)

    def add(self, workflow: Workflow) -> None:
        """Host one more workflow (the same object twice is once).

        Raises:
            ValueError: Another workflow has its name and version.
        """
        key = (workflow.name, workflow.version)
        other = self._by_key.setdefault(key, workflow)
        if other is not workflow:
            msg = (
                f"two workflows are version {workflow.version} of {workflow.name!r}; runs find "
                f"their workflow by name and version, so give a changed graph a new version "
                f"(WorkflowBuilder(..., version={self.newest_version(workflow.name) + 1}))"
            )
            raise ValueError(msg)
        newest = self._newest.get(workflow.name)
        if newest is None or workflow.version > newest.version:
            self._newest[workflow.name] = workflow

    def get(self, name: str, version: int | None = None) -> Workflow | None:
        """Version ``version`` of ``name`` (``None``: the newest), or ``None`` when not hosted."""
        if version is None:
            return self._newest.get(name)
        return self._by_key.get((name, version))

    def find(self, name: str, version: int | None = None) -> Workflow:
        """:meth:`get`, or an error naming what is hosted.

        Raises:
            AppLoadError: That workflow, or that version of it, is not hosted here.
        """
        found = self.get(name, version)
        if found is not None:
            return found
        if name in self._newest:
            versions = ", ".join(str(v) for v in self.versions(name))
            msg = f"version {version} of workflow {name!r} is not hosted here (hosted: {versions})"
        else:
            known = ", ".join(sorted(self._newest)) or "none"
            msg = f"no workflow {name!r} here (this process hosts: {known})"
        raise AppLoadError(msg)

    def versions(self, name: str) -> tuple[int, ...]:
        """The versions of ``name`` hosted, oldest first."""
        return tuple(sorted(v for n, v in self._by_key if n == name))

    def others(self, workflow: Workflow) -> list[Workflow]:
        """The other versions of ``workflow``'s name hosted, newest first."""
        name, own = workflow.name, workflow.version
        return [self._by_key[name, v] for v in reversed(self.versions(name)) if v != own]

    def newest_version(self, name: str) -> int:
        """The newest version of ``name`` hosted (0: none)."""
        newest = self._newest.get(name)
        return 0 if newest is None else newest.version

    def keys(self) -> tuple[tuple[str, int], ...]:
        """Every (name, version) hosted, sorted: what a worker claims runs of."""
        return tuple(sorted(self._by_key))

    def all(self) -> tuple[Workflow, ...]:
        """Every workflow hosted, every version, by name then version."""
        return tuple(self._by_key[key] for key in self.keys())

    def names(self) -> tuple[str, ...]:
        """The names hosted, sorted."""
        return tuple(sorted(self._newest))

    def __iter__(self) -> Iterator[Workflow]:
        return iter(self._newest[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, name: object) -> bool:
        return name in self._newest

    def describe(self) -> str:
        """``review v1, v2; intake v1``: for logs and error messages."""
        parts = [f"{n} " + ", ".join(f"v{v}" for v in self.versions(n)) for n in self.names()]
        return "; ".join(parts) or "nothing"
