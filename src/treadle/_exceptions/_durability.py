"""The errors of stores and checkpoints: what durability refuses or finds broken."""

from __future__ import annotations

from typing import TYPE_CHECKING

from treadle._exceptions._core import TreadleError

if TYPE_CHECKING:
    from collections.abc import Sequence


class DurabilityError(TreadleError):
    """Base of the errors raised while storing or restoring runs."""


class SerializationError(DurabilityError):
    """A value cannot be encoded, or stored data names a type not allowed."""


class CheckpointCorruptError(DurabilityError):
    """A stored checkpoint fails its checksum or cannot be decoded."""

    def __init__(self, run_id: str, checkpoint_id: str, reason: str) -> None:
        self.run_id = run_id
        self.checkpoint_id = checkpoint_id
        self.reason = reason
        super().__init__(f"checkpoint {checkpoint_id!r} of run {run_id!r} is corrupt: {reason}")


class EventLogCorruptError(DurabilityError):
    """A stored row of a run's event log cannot be read as the events it should hold.

    Named rather than raised as a decoding error, so whoever reads the log
    (``treadle events``, ``show``, the HTTP API) learns which run and which
    events are at fault.
    """

    def __init__(self, run_id: str, first_seq: int, reason: str) -> None:
        self.run_id = run_id
        self.first_seq = first_seq
        self.reason = reason
        super().__init__(
            f"the event log of run {run_id!r} is corrupt from event {first_seq}: {reason}"
        )


class RunHasForksError(DurabilityError):
    """A run cannot be deleted while runs forked from it exist; nothing was deleted.

    Forks share what their parent stored, so the parent goes last: delete
    the forks first (``treadle delete`` names them).

    Attributes:
        run_id: The run.
        forks: The ids of the runs forked from it.
    """

    def __init__(self, run_id: str, forks: list[str]) -> None:
        self.run_id = run_id
        self.forks = forks
        super().__init__(
            f"run {run_id!r} has forks ({', '.join(forks)}); delete them first; nothing was deleted"
        )


class RunNotFoundError(DurabilityError, LookupError):
    """The store has no run with this id."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r} in the store")


class CheckpointNotFoundError(DurabilityError, LookupError):
    """The run exists but has no checkpoint with this id (pruned, or never made)."""

    def __init__(self, run_id: str, checkpoint_id: str | None, detail: str | None = None) -> None:
        self.run_id = run_id
        self.checkpoint_id = checkpoint_id
        what = f"no checkpoint {checkpoint_id!r}" if checkpoint_id is not None else "no checkpoint"
        super().__init__(f"run {run_id!r} has {what}" + (f": {detail}" if detail else ""))


class RunExistsError(DurabilityError):
    """A run with this id exists already."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"a run {run_id!r} exists already")


class ScheduleNotFoundError(DurabilityError, LookupError):
    """The store has no schedule with this id."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"no schedule {schedule_id!r} in the store (`treadle schedules list` lists them)"
        )


class ScheduleExistsError(DurabilityError):
    """A schedule with this id exists already."""

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f"a schedule {schedule_id!r} exists already: change it, or choose another id"
        )


class LeaseLostError(DurabilityError):
    """This process's lease on a run is gone: another owner took it over, or it was cancelled.

    Raised instead of committing: the run row's lease epoch no longer matches
    the one this owner acquired (fencing), so nothing it computed since is
    written. The run continues from its last checkpoint wherever it is now
    leased.
    """

    def __init__(self, run_id: str, epoch: int) -> None:
        self.run_id = run_id
        self.epoch = epoch
        super().__init__(
            f"lease epoch {epoch} on run {run_id!r} is no longer current "
            f"(taken over or cancelled); nothing was committed"
        )


class WorkerStoppingError(DurabilityError):
    """The worker is shutting down: the run was released after its last commit."""


class GraphChangedError(DurabilityError):
    """The stored run was made by a different graph; nothing was executed.

    ``changes`` lists every executor and edge that differs, so the fix (run
    the old definition, or start a new run) is an informed one.
    """

    def __init__(self, run_id: str, changes: Sequence[str]) -> None:
        self.run_id = run_id
        self.changes = tuple(changes)
        lines = "\n".join(f"  - {c}" for c in self.changes)
        super().__init__(
            f"run {run_id!r} was checkpointed by a different graph; refusing to resume:\n{lines}"
        )


class VersionMismatchError(GraphChangedError):
    """The stored run goes on with another version of its workflow than this one.

    A run finishes on the version it started with (or the one a migration
    moved it to): host that version too, or move the run with
    ``treadle migrate``. Nothing was executed.
    """

    def __init__(self, run_id: str, workflow: str, run_version: int, version: int) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.run_version = run_version
        self.version = version
        self.changes = (f"version {run_version}, not {version}",)
        move = (
            f", or move it with `treadle migrate --from {run_version} --to {version}`"
            if run_version < version
            else ""
        )
        DurabilityError.__init__(
            self,
            f"run {run_id!r} is on version {run_version} of {workflow!r}, not version "
            f"{version}: host version {run_version} to go on with it{move}",
        )
