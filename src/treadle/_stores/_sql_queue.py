"""The PostgreSQL statements of the run queue: claims, heartbeats, a worker letting go.

Written for PostgreSQL only (``%s`` parameters, its clock and ``unnest``),
unlike the neutral templates of :mod:`treadle._stores._sql_statements`:
claims, heartbeats and releases on the database's clock
(:mod:`treadle._stores._postgres_queue`).
"""

from __future__ import annotations

import re

from treadle._stores import _sql_ownership
from treadle._stores._sql_dialect import POSTGRES
from treadle._stores._sql_schema import DUE_AT

FENCE = POSTGRES.render(_sql_ownership.FENCE)
"""The condition every leased write carries: this worker, this lease epoch."""

DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION"
DUE = POSTGRES.render(DUE_AT)

# Expired leases first (their runs were already under way), then by how long
# the run has been ready. ``ready_at`` is set while a worker owns a run, so a
# run whose worker died mid-superstep stays claimable whatever its status; a
# run ``running`` (or ``pending``) with no current owner is claimable even
# without it: an in-process owner on this store that died mid-run never set it.
# A paused run is claimed by nobody, whatever was delivered to it meanwhile.
# A worker claims the runs of the (workflow, version) pairs it hosts, and runs
# started without a version (0: a client without the workflow's code) of the
# workflows it hosts, which it starts on the newest version it has.
CLAIM = f"""
WITH chosen AS (
    SELECT run_id FROM treadle_runs
    WHERE (workflow, version) IN (
            SELECT * FROM unnest(%(workflows)s::TEXT[], %(versions)s::INTEGER[]))
        AND parked IS NULL
        AND status <> 'paused'
        AND (ready_at <= %(now)s OR {DUE} <= %(now)s OR status IN ('running', 'pending'))
        AND (owner IS NULL OR lease_until IS NULL OR lease_until < {DB_NOW})
    ORDER BY (owner IS NULL), COALESCE(ready_at, {DUE})
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE treadle_runs AS r
SET owner = %(owner)s,
    lease_epoch = r.lease_epoch + 1,
    lease_until = {DB_NOW} + %(lease)s,
    ready_at = COALESCE(r.ready_at, %(now)s),
    recoveries = (CASE WHEN r.owner IS NULL THEN 0 ELSE r.recoveries + 1 END)
FROM chosen
WHERE r.run_id = chosen.run_id
RETURNING r.run_id, r.workflow, r.status, r.checkpoint_id, r.lease_epoch, r.recoveries,
    r.version, r.deadline_at"""  # noqa: S608 - constants only

CLAIM_NAMES = tuple(re.findall(r"%\((\w+)\)s", CLAIM))
"""The parameters of :data:`CLAIM_BATCHED`, in order, by their names in :data:`CLAIM`."""
CLAIM_BATCHED = re.sub(r"%\(\w+\)s", "%s", CLAIM)
""":data:`CLAIM` with a positional parameter in each place, as a batch prepares it."""

HEARTBEAT = f"""
UPDATE treadle_runs AS r
SET lease_until = {DB_NOW} + %s
FROM unnest(%s::TEXT[], %s::BIGINT[]) AS held(run_id, epoch)
WHERE r.run_id = held.run_id AND r.lease_epoch = held.epoch AND r.owner = %s
RETURNING r.run_id"""  # noqa: S608 - constants only

LOCK_LEASED = (
    "SELECT status, pause_requested FROM treadle_runs WHERE run_id = %s"  # noqa: S608 - constants
    + FENCE
    + " FOR UPDATE"
)


# A release as two statements of a write plan (neutral ``?`` placeholders, for the
# group commit's driver): the first locks the row under the claim; the second,
# on a snapshot taken after that lock (READ COMMITTED: a snapshot a statement),
# sees every item a delivery (which locks the row first) put in the inbox, and
# decides as ``RunQueue.release`` says, answering whether the run is ready.
LOCK_HELD = "SELECT 1 FROM treadle_runs WHERE run_id = ?" + _sql_ownership.FENCE  # noqa: S608
_ENDED = ", ".join(f"'{status}'" for status in _sql_ownership.ENDED_STATUSES)
RELEASE_HELD = f"""
UPDATE treadle_runs AS r
SET owner = NULL, lease_until = NULL, recoveries = 0, pause_requested = NULL,
    status = d.status,
    ready_at = CASE WHEN d.ready OR (d.status = 'paused' AND d.waiting)
        THEN CAST(? AS DOUBLE PRECISION) END
FROM (
    SELECT run_id, status, waiting,
        status NOT IN ({_ENDED}, 'paused')
            AND (status IN ('running', 'pending') OR waiting) AS ready
    FROM (
        SELECT h.run_id,
            CASE WHEN h.pause_requested IS NOT NULL AND h.status NOT IN ({_ENDED})
                THEN 'paused' ELSE h.status END AS status,
            EXISTS (SELECT 1 FROM treadle_inbox AS i
                WHERE i.run_id = h.run_id AND i.consumed_at IS NULL
                    AND i.seq > CAST(? AS BIGINT)) AS waiting
        FROM treadle_runs AS h
        WHERE h.run_id = ? AND h.owner = ? AND h.lease_epoch = ?
    ) AS held
) AS d
WHERE r.run_id = d.run_id
RETURNING d.ready"""  # noqa: S608 - constants only

SELECT_INBOX = POSTGRES.render(_sql_ownership.SELECT_INBOX)
# The inboxes of the runs just claimed, read in the claim's transaction after its
# locks (a snapshot of its own): a run's items in order, one query for them all.
SELECT_INBOXES = (
    "SELECT run_id, seq, kind, target, payload, created_at FROM treadle_inbox"
    " WHERE run_id = ANY(%s) AND consumed_at IS NULL ORDER BY run_id, seq"
)
INSERT_INBOX = POSTGRES.render(_sql_ownership.INSERT_INBOX)
# Refused items (an input or answer the run would not take) are deleted, not
# marked applied: they never were, and a corrected answer must be acceptable.
ENQUEUE = """
INSERT INTO treadle_runs
    (run_id, workflow, status, superstep, created_at, updated_at, deadline_at, graph, ready_at,
    version, started_by)
VALUES (?, ?, 'pending', 0, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO NOTHING"""
WORKFLOW_OF = "SELECT workflow FROM treadle_runs WHERE run_id = ?"
