"""Migrations: functions a team writes to move parked runs to a new version of a workflow.

Durable runs outlive code. When version 2 of a workflow renames an
executor, drops one, adds a state key or changes a message type, the runs
of version 1 parked on a request, a timer or session input cannot go on
with version 2's graph as they are. A migration from 1 to 2 receives each
one's checkpoint contents and returns them for the new graph::

    @migration("review", from_version=1, to_version=2)
    def rename_writer(run: CheckpointContents) -> CheckpointContents:
        return run.rename_executor("write", "draft").with_state(priority="normal")

:func:`migration_path` picks the chain of registered migrations from one
version to another; ``apply_migrations`` (in ``_apply.py``) runs
it over a checkpoint and checks the result against the new graph; writing
it is the caller's (``treadle.versions.migrate``, ``treadle migrate``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from treadle._exceptions import MigrationError
from treadle._migrations._apply import MigratedCheckpoint, apply_migrations
from treadle._migrations._contents import CheckpointContents, WaitSummary, contents_of
from treadle._workflow._versions import check_version

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CheckpointContents",
    "MigratedCheckpoint",
    "Migration",
    "MigrationFunction",
    "WaitSummary",
    "apply_migrations",
    "contents_of",
    "migration",
    "migration_path",
]

MigrationFunction: TypeAlias = Callable[[CheckpointContents], CheckpointContents]
"""What a migration function is: the contents of one run in, the moved contents out."""


@dataclass(frozen=True, slots=True)
class Migration:
    """A function that moves a run's checkpoint from one version of a workflow to the next.

    Made by :func:`migration`; calling it calls the function. It receives
    the :class:`CheckpointContents` of one parked run of ``from_version``
    and returns them as ``to_version`` takes them. It runs once per run, so
    it should depend only on what it receives; an exception it raises
    leaves that run where it was, named with the exception.

    Attributes:
        workflow: The workflow's name.
        from_version: The version whose runs it moves.
        to_version: The version it moves them to (greater).
        function: The function.
        name: The function's qualified name, for reports.

    Raises:
        TypeError, ValueError: A version is not an int from 1, ``to_version``
            is not greater than ``from_version``, ``workflow`` is not a
            non-empty str, or ``function`` is not callable.
    """

    workflow: str
    from_version: int
    to_version: int
    function: MigrationFunction = field(repr=False)
    name: str = ""

    def __post_init__(self) -> None:
        _check_step(self.workflow, self.from_version, self.to_version)
        if not callable(self.function):
            msg = f"a migration's function must be callable, got {self.function!r}"
            raise TypeError(msg)
        if not self.name:
            name = getattr(self.function, "__qualname__", None) or repr(self.function)
            object.__setattr__(self, "name", name)

    def __call__(self, contents: CheckpointContents) -> CheckpointContents:
        """Move ``contents`` (of ``from_version``) to ``to_version``."""
        return self.function(contents)


def _check_step(workflow: object, from_version: object, to_version: object) -> None:
    if not isinstance(workflow, str):
        msg = f"a migration's workflow is a workflow's name (str), got {workflow!r}"
        raise TypeError(msg)
    if not workflow:
        msg = "a migration's workflow is a workflow's name, got an empty str"
        raise ValueError(msg)
    start = check_version(from_version)
    end = check_version(to_version)
    if end <= start:
        msg = (
            f"a migration of {workflow!r} goes from a version to a later one, got "
            f"from_version={start}, to_version={end}"
        )
        raise ValueError(msg)


def migration(
    workflow: str, from_version: int, to_version: int
) -> Callable[[MigrationFunction], Migration]:
    """Declare a function the migration of ``workflow``'s runs from one version to the next.

    ::

        @migration("review", from_version=1, to_version=2)
        def rename_writer(run: CheckpointContents) -> CheckpointContents:
            return run.rename_executor("write", "draft").with_state(priority="normal")

    The decorated name is a :class:`Migration` (still callable). Give the
    migrations of a workflow to ``treadle.versions.migrate`` or keep them
    in the module ``treadle migrate --app`` loads.

    Raises:
        TypeError, ValueError: As :class:`Migration`, when decorating.
    """
    _check_step(workflow, from_version, to_version)

    def decorate(function: MigrationFunction) -> Migration:
        return Migration(workflow, from_version, to_version, function)

    return decorate


def migration_path(
    migrations: Iterable[Migration], workflow: str, from_version: int, to_version: int
) -> tuple[Migration, ...]:
    """The chain of ``workflow``'s migrations that leads from ``from_version`` to ``to_version``.

    A migration registered for the whole step wins (1→3 over 1→2→3); in
    general, from each version the chain takes the migration that goes
    furthest without passing ``to_version`` and from which ``to_version``
    can still be reached. Empty when the versions are equal. Migrations of
    other workflows are ignored.

    Raises:
        MigrationError: No chain leads there (the error says which step is
            missing), ``to_version`` is before ``from_version``, or two
            migrations claim the same step.
        TypeError, ValueError: A version is not an int from 1.
    """
    start, end = check_version(from_version), check_version(to_version)
    mine = [m for m in migrations if m.workflow == workflow]
    by_step: dict[tuple[int, int], Migration] = {}
    clashes: list[str] = []
    for m in mine:
        other = by_step.setdefault((m.from_version, m.to_version), m)
        if other is not m and other.function is not m.function:
            clashes.append(
                f"two migrations of {workflow!r} move version {m.from_version} to "
                f"{m.to_version}: {other.name} and {m.name}; keep one"
            )
    if clashes:
        raise MigrationError(clashes)
    if end < start:
        msg = (
            f"no migration of {workflow!r} goes back from version {start} to {end}: "
            f"migrations move runs to later versions only"
        )
        raise MigrationError([msg])
    reaching = _reaching(by_step, end)
    chain: list[Migration] = []
    at = start
    while at != end:
        steps = [m for (a, b), m in by_step.items() if a == at and b <= end and b in reaching]
        if not steps:
            raise MigrationError([_no_path(by_step, workflow, start, end, reaching)])
        step = max(steps, key=lambda m: m.to_version)
        chain.append(step)
        at = step.to_version
    return tuple(chain)


def _reaching(by_step: dict[tuple[int, int], Migration], end: int) -> set[int]:
    """The versions from which some chain of migrations reaches ``end`` (itself included)."""
    reaching = {end}
    grew = True
    while grew:
        found = {a for (a, b) in by_step if b in reaching and b <= end and a not in reaching}
        reaching |= found
        grew = bool(found)
    return reaching


def _no_path(
    by_step: dict[tuple[int, int], Migration],
    workflow: str,
    start: int,
    end: int,
    reaching: set[int],
) -> str:
    reached = {start}
    grew = True
    while grew:
        found = {b for (a, b) in by_step if a in reached and b <= end and b not in reached}
        reached |= found
        grew = bool(found)
    registered = ", ".join(f"{a}->{b} ({m.name})" for (a, b), m in sorted(by_step.items()))
    return (
        f"no chain of migrations of {workflow!r} leads from version {start} to {end}: from "
        f"{start} they reach {_versions(reached)}, and {end} is reached from "
        f"{_versions(reaching)}; add a migration from one of the first to one of the second "
        f"(@migration({workflow!r}, from_version=..., to_version=...)). Registered: "
        f"{registered or 'none'}"
    )


def _versions(versions: set[int]) -> str:
    return ", ".join(str(v) for v in sorted(versions))
