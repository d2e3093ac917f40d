"""Between records and rows: parameters of the SQL stores' writes, records from their selects.

The columns are :mod:`treadle._stores._sql_statements`': parameters follow
its statements' placeholders, and a row's columns the order its selects name
them in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._stores._pieces import refs_of, refs_text
from treadle._stores._sql_graphs import ELSEWHERE
from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord

if TYPE_CHECKING:
    from collections.abc import Sequence


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A :class:`RunRecord` from a row of ``SELECT_RUN`` or ``select_runs``."""
    return RunRecord(*row)  # the selected columns are the fields, in order


def info_from_row(run_id: str, row: Sequence[Any]) -> CheckpointInfo:
    """A :class:`CheckpointInfo` from the first six columns of a checkpoint query."""
    checkpoint_id, superstep, status, parent, created_at, wake_at = row[:6]
    return CheckpointInfo(checkpoint_id, run_id, superstep, status, parent, created_at, wake_at)


def checkpoint_from_row(run_id: str, row: Sequence[Any]) -> CheckpointRecord:
    """A :class:`CheckpointRecord` from the info columns, the blob and the refs, in that order.

    Its pieces are not in the row: the store reads them next.
    """
    return CheckpointRecord(info_from_row(run_id, row), row[6], refs_of(row[7], run_id, row[0]))


def run_parameters(run: RunRecord, first: CheckpointInfo, digest: bytes) -> tuple[Any, ...]:
    """The parameters of ``INSERT_RUN``: ``run``, but latest and ``wake_at`` from ``first``.

    Its graph is named by ``digest`` (see :mod:`treadle._stores._sql_graphs`).
    """
    return (
        run.run_id,
        run.workflow,
        run.status,
        run.superstep,
        first.checkpoint_id,
        run.parent_run_id,
        run.parent_checkpoint_id,
        run.created_at,
        run.updated_at,
        run.error,
        first.wake_at,
        run.deadline_at,
        run.owner,
        run.lease_until,
        None,  # not parked
        None,  # no pause asked
        run.version,
        run.outcome,
        run.outcome_summary,
        run.started_by,
        1 if run.owner is not None else 0,
        ELSEWHERE,
        digest,
    )


def advance_parameters(checkpoint: CheckpointRecord) -> tuple[Any, ...]:
    """The parameters of ``ADVANCE_RUN``: the run row follows ``checkpoint``."""
    info = checkpoint.info
    return (info.status, *position_parameters(checkpoint))


def position_parameters(checkpoint: CheckpointRecord) -> tuple[Any, ...]:
    """The parameters of ``ADVANCE_RUN_POSITION``: ``ADVANCE_RUN``'s but the status."""
    info = checkpoint.info
    outcome = checkpoint.outcome
    return (
        info.superstep,
        info.checkpoint_id,
        info.created_at,
        info.wake_at,
        None if outcome is None else outcome[0],
        None if outcome is None else outcome[1],
        info.run_id,
    )


def checkpoint_parameters(checkpoint: CheckpointRecord) -> tuple[Any, ...]:
    """The parameters of ``INSERT_CHECKPOINT``."""
    info = checkpoint.info
    return (
        info.checkpoint_id,
        info.run_id,
        info.superstep,
        info.status,
        info.parent_checkpoint_id,
        info.created_at,
        info.wake_at,
        checkpoint.blob,
        refs_text(checkpoint.refs),
    )
