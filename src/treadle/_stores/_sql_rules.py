"""The port's rules that every store applies: argument checks, and when a run is due.

Shared by the SQL stores and ``MemoryStore`` alike, so that all refuse the
same calls with the same errors and wake the same runs; the rules about
ownership (leases, the inbox, cancelling) are
:mod:`treadle._stores._sql_ownership`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord


def due_at(run: RunRecord) -> float | None:
    """When ``due_runs`` counts ``run`` as due; ``None``: never, as it stands.

    The earlier of its ``wake_at`` and ``deadline_at`` that is set, for a run
    that is ``waiting`` or ``awaiting_input``:
    :data:`~treadle._stores._sql_schema.DUE_AT` in Python.
    """
    if run.status not in {"waiting", "awaiting_input"}:
        return None
    times = [time for time in (run.wake_at, run.deadline_at) if time is not None]
    return min(times, default=None)


def check_keep_last(keep_last: int | None) -> None:
    """Refuse a retention setting that would have to delete a run's latest checkpoint.

    Raises:
        ValueError: ``keep_last`` is below 1.
    """
    if keep_last is not None and keep_last < 1:
        raise ValueError(
            f"keep_last must be at least 1 (the latest is always kept), got {keep_last}"
        )


def check_limit(limit: int | None) -> None:
    """Refuse a negative ``list_runs`` or ``due_runs`` limit.

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")


def last_of_one_run(checkpoints: Sequence[CheckpointRecord]) -> CheckpointInfo:
    """The last of checkpoints that ``commit_many`` takes, once they are found fit to take.

    Raises:
        ValueError: there are none, they belong to more than one run, or an
            id appears twice.
    """
    if not checkpoints:
        raise ValueError("commit_many needs at least one checkpoint")
    last = checkpoints[-1].info
    runs = {c.info.run_id for c in checkpoints}
    if len(runs) > 1:
        raise ValueError(f"checkpoints committed together belong to one run, not {sorted(runs)}")
    if len({c.info.checkpoint_id for c in checkpoints}) < len(checkpoints):
        raise ValueError(f"checkpoints committed together to run {last.run_id!r} repeat an id")
    return last


def taken_ids_message(checkpoints: Sequence[CheckpointRecord]) -> str:
    """What a store says when an insert of ``checkpoints`` found an id already taken."""
    if len(checkpoints) == 1:
        return f"checkpoint id {checkpoints[0].info.checkpoint_id!r} is taken"
    ids = ", ".join(repr(c.info.checkpoint_id) for c in checkpoints)
    return f"one of the checkpoint ids {ids} is taken"


def first_checkpoint_id(run: RunRecord, first: CheckpointInfo) -> str:
    """The id ``create_run`` stores as the new run's latest: the first checkpoint's.

    Raises:
        ValueError: ``first`` belongs to another run, or ``run`` names another
            checkpoint as its latest.
    """
    if first.run_id != run.run_id:
        raise ValueError(
            f"first checkpoint {first.checkpoint_id!r} belongs to run {first.run_id!r}, "
            f"not to {run.run_id!r}"
        )
    if run.checkpoint_id not in {None, first.checkpoint_id}:
        raise ValueError(
            f"run {run.run_id!r} names checkpoint {run.checkpoint_id!r} as its latest, "
            f"but its first checkpoint is {first.checkpoint_id!r}"
        )
    return first.checkpoint_id


class Unapplied(Exception):  # noqa: N818 - a signal, not an error anyone sees
    """Raised inside a migration's transaction to roll it back: the run holds deliveries.

    ``migrate_run`` turns it into ``False``; never raised out of a store.
    """
