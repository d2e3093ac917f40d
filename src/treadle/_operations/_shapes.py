"""Runs, checkpoints, requests and events as JSON: one shape for the command line and the API.

``treadle runs --json`` answers what ``GET /api/runs`` answers (a page of
runs and the cursor of the next), ``treadle history --json`` what ``GET
/api/runs/{id}/history`` answers, ``treadle requests --json`` what ``GET
/api/requests`` answers, and ``treadle logs --json`` gives the events
``GET /api/runs/{id}/events`` streams; each shape is built here once, so
a script can move from one front end to the other without rereading.

Times are ISO 8601 in UTC with their offset everywhere (the store keeps
seconds since the epoch): a reader of the JSON never has to guess a
number's unit or a string's zone.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from treadle._exceptions import CommandError
from treadle._operations._search import run_filter, searching

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from treadle._stores._store import CheckpointInfo, LoggedEvent, RunReads, RunRecord

RUN_TIMES = ("created_at", "updated_at", "wake_at", "deadline_at", "lease_until", "pause_requested")
"""The fields of a run row that are times."""

_CHECKPOINT_TIMES = ("created_at", "wake_at")


def iso_time(
    seconds: float | None, *, timespec: Literal["auto", "seconds", "milliseconds"] = "auto"
) -> str | None:
    """A time the store keeps (seconds since the epoch) as ISO 8601 in UTC, with its offset.

    ``2026-11-27T03:29:32.245521+00:00``, so no reader takes it for local
    time; ``timespec`` cuts the fraction (``"seconds"`` for a line a person
    reads). ``None`` stays ``None``.
    """
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec=timespec)
    except (OverflowError, OSError, ValueError):  # kept before durations were bounded
        return datetime.max.replace(tzinfo=UTC).isoformat(timespec=timespec)


def with_iso_times(row: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``row`` with its fields ``names`` (those it has) made :func:`iso_time`."""
    return row | {name: iso_time(row[name]) for name in names if name in row}


def run_json(run: RunRecord) -> dict[str, Any]:
    """A run row as the API's ``<run>``: every field the store keeps of it, times in ISO 8601.

    ``started_by`` is the actor as an object (the row keeps its JSON text),
    so that a script reads it once, as every other field.
    """
    row = {field.name: getattr(run, field.name) for field in dataclasses.fields(run)}
    row["started_by"] = _actor_object(run.started_by)
    return with_iso_times(row, RUN_TIMES)


def _actor_object(text: str | None) -> Any:
    """An actor's JSON text as an object (``None`` stays; text that is not JSON stays text)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def event_json(event: LoggedEvent) -> dict[str, Any]:
    """A logged event (seq, run_id, superstep, type, executor_id, at, data), its time ISO 8601."""
    return with_iso_times(event.to_json(), ("at",))


def request_json(request: dict[str, Any]) -> dict[str, Any]:
    """A described pending request (``describe_request``), its deadline in ISO 8601."""
    return with_iso_times(request, ("deadline_at",))


def encode_cursor(created_at: float, run_id: str) -> str:
    """The cursor of the next page after a run: where the listing left off."""
    raw = json.dumps([created_at, run_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """What :func:`encode_cursor` made: the ``(created_at, run_id)`` a page starts after.

    Raises:
        CommandError: it is not a cursor a listing gave.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, run_id = json.loads(raw)
        if (
            isinstance(created_at, int | float)
            and math.isfinite(created_at)
            and isinstance(run_id, str)
        ):
            return float(created_at), run_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        pass
    msg = f"cursor {cursor!r} is not one a listing gave (use next_cursor as returned)"
    raise CommandError(msg)


async def runs_page(
    store: RunReads,
    *,
    status: str | None = None,
    workflow: str | None = None,
    limit: int,
    before: tuple[float, str] | None = None,
    outcome: str | None = None,
    where: str | None = None,
) -> tuple[list[RunRecord], str | None]:
    """Runs newest first, at most ``limit``, after ``before``; and the next page's cursor.

    The cursor is ``None`` on the last page (:func:`decode_cursor` reads it back).
    ``outcome`` keeps the runs that ended with that named outcome. ``where`` is a
    filter (``docs/search.md``), read with the other options as one.

    Raises:
        FilterError: ``where`` cannot be read.
    """
    found = run_filter(where, status=status, workflow=workflow, outcome=outcome)
    if found is not None:
        rows = await searching(store).search_runs(found, limit=limit + 1, before=before)
    else:
        rows = await store.list_runs(
            status=status, workflow=workflow, limit=limit + 1, before=before, outcome=outcome
        )
    page, more = rows[:limit], len(rows) > limit
    return page, encode_cursor(page[-1].created_at, page[-1].run_id) if more else None


def page_json(
    rows: Sequence[RunRecord],
    next_cursor: str | None,
    *,
    shown: Callable[[RunRecord], dict[str, Any]] = run_json,
) -> dict[str, Any]:
    """A page of :func:`runs_page` as ``{"runs", "next_cursor"}``.

    ``shown`` makes each row JSON (the command line adds whether a run is orphaned).
    """
    return {"runs": [shown(r) for r in rows], "next_cursor": next_cursor}


def checkpoint_json(info: CheckpointInfo, kind: str) -> dict[str, Any]:
    """A checkpoint as ``history`` lists it (times in ISO 8601), with its ``kind``."""
    row = {field.name: getattr(info, field.name) for field in dataclasses.fields(info)}
    return with_iso_times(row, _CHECKPOINT_TIMES) | {"kind": kind}


def checkpoint_kinds(run: RunRecord, checkpoints: Sequence[CheckpointInfo]) -> list[str]:
    """What each of a run's checkpoints is, told from the links between them.

    A run may keep several checkpoints of one superstep, and they are not
    copies: ``"start"`` is a new run's first; ``"fork"`` a fork's first
    (its parent is in the run it branched from); ``"barrier"`` the commit
    of a superstep (one more than its parent's); ``"progress"`` the last
    barrier saved again while the next superstep runs, with the saved steps
    (an agent's model requests and tool calls) or sub-workflow barriers it
    made so far, so its superstep is its parent's; ``"migration"`` a
    resting run's checkpoint rewritten for another version (``treadle
    migrate``), its superstep also its parent's. A checkpoint whose parent
    retention has dropped is taken for a barrier.
    """
    by_id = {c.checkpoint_id: c for c in checkpoints}
    kinds = []
    for checkpoint in checkpoints:
        parent = by_id.get(checkpoint.parent_checkpoint_id or "")
        if checkpoint.parent_checkpoint_id is None:
            kinds.append("start")
        elif parent is None and checkpoint.parent_checkpoint_id == run.parent_checkpoint_id:
            kinds.append("fork")
        elif parent is not None and parent.superstep == checkpoint.superstep:
            kinds.append("progress" if checkpoint.status == "running" else "migration")
        else:
            kinds.append("barrier")
    return kinds


def history_json(
    run: RunRecord,
    checkpoints: Sequence[CheckpointInfo],
    forks: Sequence[RunRecord],
    *,
    shown: Callable[[RunRecord], dict[str, Any]] = run_json,
) -> dict[str, Any]:
    """``{"run", "checkpoints", "forks"}``: a run's checkpoints oldest first, each with its kind."""
    kinds = checkpoint_kinds(run, checkpoints)
    return {
        "run": shown(run),
        "checkpoints": [checkpoint_json(c, k) for c, k in zip(checkpoints, kinds, strict=True)],
        "forks": [shown(f) for f in forks],
    }
