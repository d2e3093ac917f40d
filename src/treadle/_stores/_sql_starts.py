"""The SQL stores' statements of start policies: the gate, queued starts, admitted runs.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`,
driven by the plans of :mod:`treadle._stores._start_plans`. A start under a
policy is a row of ``treadle_starts`` beside its run's row: ``queued`` while
its run waits (status ``queued``, its input the ``start`` item of its
inbox), ``holding`` once admitted (its run ``pending`` until someone starts
it, then whatever it does) until its run ends, then ``done``.
"""

from __future__ import annotations

from treadle._stores._sql_ownership import ENDED_STATUSES

_ENDED = "(" + ", ".join(f"'{status}'" for status in ENDED_STATUSES) + ")"

QUEUED = "queued"
"""The status of a run its start policy holds back (and of its start row)."""

# --- the gate: one workflow's admissions take turns --------------------------------

INSERT_GATE = (
    "INSERT INTO treadle_start_gates (workflow) VALUES (?) ON CONFLICT (workflow) DO NOTHING"
)
LOCK_GATE = "SELECT workflow FROM treadle_start_gates WHERE workflow = ?"
"""Read with a lock (``FOR UPDATE``) until the transaction ends: the turn of one admission."""

# --- what an admission reads ---------------------------------------------------------

SELECT_DEDUPLICATED = "SELECT run_id FROM treadle_starts WHERE workflow = ? AND dedup_id = ?"

# Starts whose run has ended, or is gone, hold no slot and wait in no queue:
# released here, under the gate, rather than by the commit that ended the run
# (which would put a second statement on every run's last commit).
RELEASE_ENDED = f"""
UPDATE treadle_starts SET state = 'done', admit_at = NULL
WHERE workflow = ? AND state IN ('queued', 'holding') AND NOT EXISTS (
    SELECT 1 FROM treadle_runs AS r
    WHERE r.run_id = treadle_starts.run_id AND r.status NOT IN {_ENDED})"""  # noqa: S608 - constants

SELECT_HOLDING = (
    "SELECT start_key, count(*) FROM treadle_starts"
    " WHERE workflow = ? AND state = 'holding' GROUP BY start_key"
)

SELECT_KEY_HOLDERS = (
    "SELECT run_id FROM treadle_starts WHERE workflow = ? AND start_key = ?"
    " AND state = 'holding' ORDER BY created_at"
)
SELECT_HOLDERS = (
    "SELECT run_id FROM treadle_starts WHERE workflow = ? AND state = 'holding' ORDER BY created_at"
)

SELECT_DEBOUNCING = (
    "SELECT run_id FROM treadle_starts WHERE workflow = ? AND start_key = ?"
    " AND state = 'queued' AND debounce IS NOT NULL"
)

# The workflow's queued starts whose time has come, first come first.
SELECT_QUEUED = (
    "SELECT run_id, start_key, per_key, concurrency FROM treadle_starts"
    " WHERE workflow = ? AND state = 'queued' AND admit_at <= ? ORDER BY admit_at, {order}"
)

SELECT_DUE_WORKFLOWS = (
    "SELECT DISTINCT workflow FROM treadle_starts"
    " WHERE state = 'queued' AND admit_at <= ? AND workflow IN ({ids})"
)

# --- what an admission writes --------------------------------------------------------

INSERT_START = """
INSERT INTO treadle_starts
    (run_id, workflow, start_key, dedup_id, per_key, concurrency, debounce, state, admit_at,
    created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""

# A run a policy started or queued: no checkpoint yet, its input in its inbox.
# Admitted to a caller that drives it, it is leased to that caller (epoch 1).
INSERT_RUN = """
INSERT INTO treadle_runs
    (run_id, workflow, status, superstep, created_at, updated_at, deadline_at, graph, ready_at,
    version, started_by, owner, lease_until, lease_epoch)
VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO NOTHING"""

REPLACE_INPUT = (
    "UPDATE treadle_inbox SET payload = ?, created_at = ?"
    " WHERE run_id = ? AND kind = 'start' AND consumed_at IS NULL"
)

PUSH_ADMIT = "UPDATE treadle_starts SET admit_at = ? WHERE run_id = ?"

ADMIT_QUEUED_RUN = (
    "UPDATE treadle_runs SET status = 'pending', ready_at = ?, updated_at = ?"
    " WHERE run_id = ? AND status = 'queued'"
)

MARK_HOLDING = "UPDATE treadle_starts SET state = 'holding', admit_at = NULL WHERE run_id = ?"

# --- starting an admitted run ----------------------------------------------------------

# Admitted runs nobody holds a current lease on: a service starts them (the
# caller that was admitted one may have died before starting it).
SELECT_STARTABLE = """
SELECT r.run_id FROM treadle_starts AS s JOIN treadle_runs AS r ON r.run_id = s.run_id
WHERE s.state = 'holding' AND r.status = 'pending' AND r.parked IS NULL
    AND (r.owner IS NULL OR r.lease_until IS NULL OR r.lease_until <= ?)
    AND s.workflow IN ({ids})
ORDER BY r.created_at
LIMIT ?"""

CLAIM_STARTABLE = """
UPDATE treadle_runs SET owner = ?, lease_epoch = lease_epoch + 1, lease_until = ?
WHERE run_id = ? AND status = 'pending' AND parked IS NULL
    AND (owner IS NULL OR lease_until IS NULL OR lease_until <= ?)
RETURNING lease_epoch, workflow, version"""

# The admitted row becomes the run its lease holder started (``create_run``
# on a row a policy admitted): the first checkpoint's position, under the lease.
ADOPT_ADMITTED = """
UPDATE treadle_runs
SET status = ?, superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?,
    deadline_at = ?, graph = ?, graph_digest = ?, error = NULL, version = ?, ready_at = NULL
WHERE run_id = ? AND status = 'pending' AND owner = ? AND lease_epoch = ?"""

CONSUME_START = (
    "UPDATE treadle_inbox SET consumed_at = ?"
    " WHERE run_id = ? AND kind = 'start' AND consumed_at IS NULL"
)

DELETE_START = "DELETE FROM treadle_starts WHERE run_id = ?"
