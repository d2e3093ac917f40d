"""The read side of the SQL stores, written once for every dialect.

SQLite and PostgreSQL answer these queries the same way; only how a query is
rendered (placeholders, types) and run (a worker thread, a connection pool)
differs, and that is each backend's :meth:`SqlReads._select`.

Each read says whether it is a *scan*: whether what it reads grows with the
store rather than being fixed by its keys or its limit (a listing without a
limit, or one whose order no index gives, so every run it keeps is read and
sorted first). SQLite runs scans on a lane of their own, so that reads of a
few rows never wait behind one (see :mod:`treadle._stores._sqlite_readers`);
PostgreSQL's pool serves reads side by side anyway.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CheckpointNotFoundError, RunNotFoundError
from treadle._stores import (
    _sql_audit,
    _sql_events,
    _sql_ownership,
    _sql_pieces,
    _sql_rows,
    _sql_rules,
    _sql_statements,
)
from treadle._stores._audit import AuditEntry, entry_of
from treadle._stores._pieces import complete, ids_text
from treadle._stores._store import Lease, Piece

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from treadle._stores._events import LoggedEvent
    from treadle._stores._store import CheckpointInfo, CheckpointRecord, RunRecord

_ATTEMPTS = (1, 2)
"""Reads of a checkpoint and its pieces, when a prune takes pieces between the two reads."""


class SqlReads(ABC):
    """``get_run``, ``get_graph``, ``load_checkpoint``, ``list_*``, ``run_counts``, ``due_runs``."""

    @abstractmethod
    async def _select(
        self, template: str, parameters: tuple[Any, ...], *, scan: bool = False
    ) -> list[Sequence[Any]]:
        """Run one SELECT written in the neutral SQL dialect; return its rows.

        ``scan``: it may read rows in proportion to the store (see the module docstring).
        """

    async def get_run(self, run_id: str) -> RunRecord:
        """The run row.

        Raises:
            RunNotFoundError: No such run.
        """
        rows = await self._select(_sql_statements.SELECT_RUN, (run_id,))
        if not rows:
            raise RunNotFoundError(run_id)
        return _sql_rows.run_from_row(rows[0])

    async def get_graph(self, run_id: str) -> bytes:
        """The graph description stored when the run was created.

        Raises:
            RunNotFoundError: No such run.
        """
        rows = await self._select(_sql_statements.SELECT_GRAPH, (run_id,))
        if not rows:
            raise RunNotFoundError(run_id)
        graph: bytes = rows[0][0]
        return graph

    async def load_checkpoint(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> CheckpointRecord:
        """One checkpoint of a run; its latest when ``checkpoint_id`` is None.

        Raises:
            RunNotFoundError: No such run.
            CheckpointNotFoundError: The run has no such checkpoint.
        """
        for attempt in _ATTEMPTS:
            rows = await self._select(_sql_statements.SELECT_CHECKPOINT, (checkpoint_id, run_id))
            if not rows:
                raise RunNotFoundError(run_id)
            if rows[0][0] is None:
                raise CheckpointNotFoundError(run_id, checkpoint_id)
            record = await self._with_pieces(
                _sql_rows.checkpoint_from_row(run_id, rows[0]), last=attempt == _ATTEMPTS[-1]
            )
            if record is not None:
                return record
        raise AssertionError(attempt)  # pragma: no cover - the last attempt returns

    async def _with_pieces(
        self, record: CheckpointRecord, *, last: bool = False
    ) -> CheckpointRecord | None:
        """``record`` with the pieces it needs, read after it.

        ``None`` when some are missing and this is not the ``last`` attempt:
        a prune may have deleted the checkpoint and its pieces between the
        two reads, so the caller reads the checkpoint again. On the last
        attempt the record comes back with what was found, and the codec
        names what is missing.
        """
        if not record.refs:
            return record
        rows = await self._select(_sql_pieces.SELECT_NEEDED, (ids_text(record.refs),))
        pieces = tuple(Piece(*row) for row in rows)
        if not last and not complete(record.refs, pieces):
            return None
        return dataclasses.replace(record, pieces=pieces)

    async def load_resumable(
        self, run_id: str, checkpoint_id: str | None = None
    ) -> tuple[RunRecord, bytes, CheckpointRecord | None]:
        """The run row, its graph and one checkpoint (``None``: no such checkpoint), read at once.

        Raises:
            RunNotFoundError: No such run.
        """
        for attempt in _ATTEMPTS:
            rows = await self._select(_sql_statements.SELECT_RESUMABLE, (checkpoint_id, run_id))
            if not rows:
                raise RunNotFoundError(run_id)
            row = rows[0]
            width = len(_sql_statements.RUN_FIELDS)
            run, graph, found = _sql_rows.run_from_row(row[:width]), row[width], row[width + 1 :]
            if found[0] is None:
                return run, graph, None
            record = _sql_rows.checkpoint_from_row(run_id, found)
            whole = await self._with_pieces(record, last=attempt == _ATTEMPTS[-1])
            if whole is not None:
                return run, graph, whole
        raise AssertionError(attempt)  # pragma: no cover - the last attempt returns

    async def load_claimed(
        self, run_ids: Sequence[str]
    ) -> list[tuple[RunRecord, bytes, CheckpointRecord | None]]:
        """``load_resumable`` of many runs' latest checkpoints, in one statement.

        A checkpoint naming pieces reads them after (as ``load_resumable``
        does); a run found without its checkpoint comes with ``None``.
        """
        rows = await self._select(_sql_statements.SELECT_RESUMABLE_MANY, (ids_text(run_ids),))
        width = len(_sql_statements.RUN_FIELDS)
        found: dict[str, tuple[RunRecord, bytes, CheckpointRecord | None]] = {}
        for row in rows:
            run = _sql_rows.run_from_row(row[:width])
            if row[width + 1] is None:
                found[run.run_id] = (run, row[width], None)
                continue
            record = _sql_rows.checkpoint_from_row(run.run_id, row[width + 1 :])
            if record.refs:  # rare on a timer's path: the single read, retries and all
                found[run.run_id] = await self.load_resumable(run.run_id)
            else:
                found[run.run_id] = (run, row[width], record)
        return [found[run_id] for run_id in run_ids if run_id in found]

    async def list_checkpoints(self, run_id: str) -> list[CheckpointInfo]:
        """Every kept checkpoint of a run, oldest first: by superstep, time, then commit.

        Raises:
            RunNotFoundError: No such run.
        """
        rows = await self._select(_sql_statements.SELECT_CHECKPOINTS, (run_id,))
        if not rows:
            raise RunNotFoundError(run_id)
        # A run always has a checkpoint; the left join's NULL row is only defensive.
        return [_sql_rows.info_from_row(run_id, row) for row in rows if row[0] is not None]

    async def list_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        parent_run_id: str | None = None,
        limit: int | None = None,
        id_prefix: str | None = None,
        before: tuple[float, str] | None = None,
        outcome: str | None = None,
    ) -> list[RunRecord]:
        """Runs matching every filter given, newest first (by ``created_at``, then creation).

        Raises:
            ValueError: ``limit`` is negative.
        """
        _sql_rules.check_limit(limit)
        query, parameters = _sql_statements.select_runs(
            status=status,
            workflow=workflow,
            parent_run_id=parent_run_id,
            limit=limit,
            id_prefix=id_prefix,
            before=before,
            outcome=outcome,
        )
        scan = _sql_statements.scans_runs(
            status=status,
            workflow=workflow,
            parent_run_id=parent_run_id,
            limit=limit,
            id_prefix=id_prefix,
            outcome=outcome,
        )
        rows = await self._select(query, parameters, scan=scan)
        return [_sql_rows.run_from_row(row) for row in rows]

    async def run_counts(self) -> dict[tuple[str, str], int]:
        """How many runs there are of each ``(workflow, status)``, counted by the database."""
        rows = await self._select(_sql_statements.COUNT_RUNS, (), scan=True)
        return {(str(workflow), str(status)): int(count) for workflow, status, count in rows}

    async def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[LoggedEvent]:
        """The run's events after ``after``, oldest first (see ``EventLog``).

        Raises:
            RunNotFoundError: no such run (and so no events).
            ValueError: ``limit`` is negative.
        """
        _sql_rules.check_limit(limit)
        if limit == 0:  # no row to read (a row holds one event at least, and unpack trims after)
            await self.get_run(run_id)
            return []
        start = _sql_events.rows_after_parameters(run_id, after)
        if limit is None:
            rows = await self._select(_sql_events.SELECT_EVENTS, start)
        else:  # a row holds one event at least: one more row than asked holds enough
            rows = await self._select(_sql_events.SELECT_SOME_EVENTS, (*start, limit + 1))
        if not rows:
            await self.get_run(run_id)  # none yet, or no such run
        return _sql_events.unpack(run_id, rows, after, limit)

    async def read_audit(
        self, run_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries after ``after``, oldest first, at most ``limit`` (only ``run_id``'s)."""
        _sql_rules.check_limit(limit)
        parameters: tuple[Any, ...]
        if run_id is None:
            query, parameters = _sql_audit.SELECT_ENTRIES, (after,)
        else:
            query, parameters = _sql_audit.SELECT_RUN_ENTRIES, (run_id, after)
        if limit is not None:
            query, parameters = query + " LIMIT ?", (*parameters, limit)
        whole = run_id is None and limit is None  # the store's whole log: a scan
        return [entry_of(row) for row in await self._select(query, parameters, scan=whole)]

    async def last_event_seq(self, run_id: str) -> int:
        """The ``seq`` of the run's newest event, 0 if none yet.

        Raises:
            RunNotFoundError: no such run.
        """
        ((last,),) = await self._select(_sql_events.LAST_SEQ, (run_id, run_id))
        if not last:
            await self.get_run(run_id)
        return int(last)

    async def held_claimable(self, now: float, *, limit: int) -> list[Lease]:
        """The current leases on runs a claim would take, were they free (see the port)."""
        _sql_rules.check_limit(limit)
        wall = time.time()
        rows = await self._select(_sql_ownership.HELD_CLAIMABLE, (wall, now, wall, limit))
        return [Lease(str(r), str(o), int(epoch), float(until)) for r, o, epoch, until in rows]

    async def count_due_runs(self, now: float) -> int:
        """How many runs :meth:`due_runs` would list now, counted by the database."""
        rows = await self._select(_sql_statements.COUNT_DUE, (now,), scan=True)
        return int(rows[0][0])

    async def answers_waiting(self, run_ids: Collection[str]) -> dict[str, set[str]]:
        """The requests of these runs whose answer waits in their inbox (see the port)."""
        if not run_ids:
            return {}
        rows = await self._select(_sql_ownership.ANSWERS_WAITING, (ids_text(run_ids),))
        waiting: dict[str, set[str]] = {}
        for run_id, request_id in rows:
            waiting.setdefault(str(run_id), set()).add(str(request_id))
        return waiting

    async def due_runs(self, now: float, *, limit: int | None = None) -> list[RunRecord]:
        """``waiting`` and ``awaiting_input`` runs whose ``wake_at`` or ``deadline_at`` is due.

        Ordered by the earlier of the two, oldest first (then by creation), and
        read from an index holding only such runs, in that order.

        Raises:
            ValueError: ``limit`` is negative.
        """
        _sql_rules.check_limit(limit)
        query, parameters = _sql_statements.select_due_runs(now, limit)
        rows = await self._select(query, parameters, scan=limit is None)
        return [_sql_rows.run_from_row(row) for row in rows]
