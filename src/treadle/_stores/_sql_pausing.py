"""The SQL stores' statements for pausing runs, written once for both backends.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`;
which of them a ``pause`` or ``unpause`` runs is decided by the rules of
:mod:`treadle._stores._pausing`, from the run row read (and, on
PostgreSQL, locked) first in the same transaction.
"""

from __future__ import annotations

from treadle._stores._sql_ownership import UNAPPLIED

SELECT_PAUSABLE = (
    "SELECT status, owner, lease_until, pause_requested FROM treadle_runs WHERE run_id = ?"
)
"""What the pause rules decide from: (status, owner, lease_until, pause_requested)."""

# Nobody advances the run: paused at once, and its lease epoch moves on, so
# that an owner presumed dead (its lease ran out) commits nothing more.
PAUSE_NOW = """
UPDATE treadle_runs
SET status = 'paused', pause_requested = NULL, owner = NULL, lease_until = NULL,
    lease_epoch = lease_epoch + 1, updated_at = ?
WHERE run_id = ?"""

# Its owner is advancing it: the owner's next commit (or release) pauses it.
REQUEST_PAUSE = (
    "UPDATE treadle_runs SET pause_requested = COALESCE(pause_requested, ?) WHERE run_id = ?"
)

WITHDRAW_PAUSE = "UPDATE treadle_runs SET pause_requested = NULL WHERE run_id = ?"

HONOUR_PAUSE = """
UPDATE treadle_runs
SET status = ?, pause_requested = NULL, owner = NULL, lease_until = NULL
WHERE run_id = ?"""
"""A commit or release under a lease found a pause asked: (the status it takes, run id).

Run in the same transaction, after the fenced write that returned
``pause_requested``; the status is ``paused`` unless the run just ended.
"""

_RESUMED_STATUS = (
    "COALESCE((SELECT c.status FROM treadle_checkpoints AS c"
    " WHERE c.checkpoint_id = treadle_runs.checkpoint_id), 'pending')"
)

# The status its latest checkpoint says (a queued run has none: pending), and
# ready if its inbox holds items, so that a service or worker applies them.
_UNPAUSE = f"""
UPDATE treadle_runs
SET status = {_RESUMED_STATUS}, pause_requested = NULL, updated_at = ?,
    ready_at = (CASE WHEN {UNAPPLIED} THEN COALESCE(ready_at, ?) END){{lease}}
WHERE run_id = ? AND status = 'paused'
RETURNING lease_epoch"""  # noqa: S608 - constants only

UNPAUSE = _UNPAUSE.format(lease="")
"""Unpause a paused run: (now, now, run id); returns its lease epoch."""

UNPAUSE_TO = _UNPAUSE.format(lease=", owner = ?, lease_until = ?, lease_epoch = lease_epoch + 1")
"""Unpause a paused run and lease it: (now, now, owner, until, run id); returns the new epoch."""
