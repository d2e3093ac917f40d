"""The statements of call limits on the SQL stores (neutral dialect): see ``_sql_limits.py``.

Every change to a line is one batch of these, sent at once (one round trip
on PostgreSQL), whose answers are read at the end: no statement's
parameters depend on an earlier one's answer. What was decided in Python
between statements is decided in SQL, in their ``WHERE`` clauses.
"""

from __future__ import annotations

from treadle._stores._sql_ownership import ENDED_STATUSES

_ENDED = "(" + ", ".join(f"'{status}'" for status in ENDED_STATUSES) + ")"


def _going_on(alias: str) -> str:
    """Whether the run of the slot row ``alias`` is there and has not ended."""
    return (
        f"EXISTS (SELECT 1 FROM treadle_runs AS e WHERE e.run_id = {alias}.run_id "  # noqa: S608
        f"AND e.status NOT IN {_ENDED})"
    )


ENSURE_LINE = """
INSERT INTO treadle_limits (limit_name, arrivals, serving) VALUES (?, 0, 0)
ON CONFLICT DO NOTHING"""

# Locks the limit's row until the transaction ends, keeps the terms last used, and moves
# the line's clock on to the caller's time unless another caller's was later: every
# later statement reads the time from it (NOW). A caller that read its time before
# waiting for the lock is then never behind one served before it, whose grants are
# stamped later and whose pruning dropped grants older than its window.
LOCK_LINE = """
UPDATE treadle_limits SET concurrency = ?, calls = ?, per = ?,
clock = CASE WHEN clock IS NULL OR clock < ? THEN ? ELSE clock END
WHERE limit_name = ?"""

# The line's time, once locked (a scalar subquery naming the limit once more).
_NOW = "(SELECT clock FROM treadle_limits WHERE limit_name = ?)"

# The caller's lease is its run's, and current (its run id, owner, epoch and time).
_LEASE_OK = """EXISTS (SELECT 1 FROM treadle_runs
WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND lease_until > ?)"""

# A call entered again whose earlier grant is still inside the window: that grant stays
# counted, as a released row of its own (pruned with the others).
KEEP_GRANT = f"""
INSERT INTO treadle_limit_slots
(limit_name, call_id, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, noticed, granted_at, released_at)
SELECT limit_name, ?, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, 1, granted_at, COALESCE(released_at, {_NOW})
FROM treadle_limit_slots
WHERE limit_name = ? AND call_id = ? AND granted_at > {_NOW} - ?
AND (released_at IS NOT NULL OR lease_epoch <> ?) AND {_LEASE_OK}
ON CONFLICT DO NOTHING"""  # noqa: S608 - constants only

# A call tried again, or its run taken over: it waits again, in the place it had.
REENTER = f"""
UPDATE treadle_limit_slots
SET lease_epoch = ?, granted_at = NULL, released_at = NULL, gate = ?, noticed = 0, cost = ?
WHERE limit_name = ? AND call_id = ? AND (released_at IS NOT NULL OR lease_epoch <> ?)
AND {_LEASE_OK}"""  # noqa: S608 - constants only

# A new call: its turn is the one after the last its key waits with (never before the
# turn being served), its arrival after every call in the line.
ENTER = f"""
INSERT INTO treadle_limit_slots
(limit_name, call_id, run_id, lease_epoch, call_key, priority, turn, arrival, cost,
 entered_at, gate, noticed)
SELECT ?, ?, ?, ?, ?, ?,
 (SELECT CASE WHEN l.serving > COALESCE(m.turn, -1) + 1 THEN l.serving
              ELSE COALESCE(m.turn, -1) + 1 END
  FROM treadle_limits AS l,
       (SELECT MAX(turn) AS turn FROM treadle_limit_slots
        WHERE limit_name = ? AND call_key = ? AND granted_at IS NULL) AS m
  WHERE l.limit_name = ?),
 (SELECT COALESCE(MAX(arrival), 0) + 1 FROM treadle_limit_slots WHERE limit_name = ?),
 ?, {_NOW}, ?, 0
WHERE {_LEASE_OK}
AND NOT EXISTS (SELECT 1 FROM treadle_limit_slots WHERE limit_name = ? AND call_id = ?)"""  # noqa: S608 - constants only

# Waiting or holding already under this lease: tell the asking gate again.
RETELL = f"""
UPDATE treadle_limit_slots SET gate = ?, noticed = 0
WHERE limit_name = ? AND call_id = ? AND lease_epoch = ? AND released_at IS NULL
AND {_LEASE_OK}"""  # noqa: S608 - constants only

# Whether a slot row's lease is still its run's, and current (as of the line's time).
_CURRENT = f"""EXISTS (SELECT 1 FROM treadle_runs AS r
WHERE r.run_id = treadle_limit_slots.run_id AND r.lease_epoch = treadle_limit_slots.lease_epoch
AND r.owner IS NOT NULL AND r.lease_until > {_NOW})"""  # noqa: S608 - constants only

# A holder whose lease is gone (its process died or lost the run) holds nothing more.
FREE_LOST = f"""
UPDATE treadle_limit_slots SET released_at = {_NOW}
WHERE limit_name = ? AND granted_at IS NOT NULL AND released_at IS NULL
AND NOT {_CURRENT}"""  # noqa: S608 - constants only

# A call waiting for a run that ended (cancelled, say) or is gone never takes its slot:
# it leaves the line, and the calls behind it move up.
DROP_ENDED = f"""
DELETE FROM treadle_limit_slots
WHERE limit_name = ? AND granted_at IS NULL
AND NOT {_going_on("treadle_limit_slots")}"""  # noqa: S608 - constants only

PRUNE = f"""
DELETE FROM treadle_limit_slots
WHERE limit_name = ? AND released_at IS NOT NULL AND granted_at <= {_NOW} - ?"""  # noqa: S608 - constants only

RELEASE = f"""
UPDATE treadle_limit_slots SET released_at = {_NOW}, cost = COALESCE(?, cost)
WHERE limit_name = ? AND call_id = ? AND lease_epoch = ?
AND granted_at IS NOT NULL AND released_at IS NULL"""  # noqa: S608 - constants only

# The head of the line, in order (priority, then turn, then arrival), granted while the
# concurrency, the rate's window and the token budget have room, unless the limit is
# slowed down. A call that does not fit stops the line: those behind it have a later
# place and a larger running cost. The caps come as numbers (2**30: none).
GRANT = f"""
UPDATE treadle_limit_slots SET granted_at = {_NOW}
WHERE limit_name = ? AND call_id IN (
  SELECT h.call_id FROM (
    SELECT s.call_id,
      ROW_NUMBER() OVER (ORDER BY s.priority DESC, s.turn, s.arrival) AS place,
      SUM(s.cost) OVER (ORDER BY s.priority DESC, s.turn, s.arrival
                        ROWS UNBOUNDED PRECEDING) AS upto
    FROM treadle_limit_slots AS s
    WHERE s.limit_name = ? AND s.granted_at IS NULL
    AND EXISTS (SELECT 1 FROM treadle_runs AS r
      WHERE r.run_id = s.run_id AND r.lease_epoch = s.lease_epoch
      AND r.owner IS NOT NULL AND r.lease_until > {_NOW})
  ) AS h
  WHERE h.place <= ? - (SELECT COUNT(*) FROM treadle_limit_slots
                        WHERE limit_name = ? AND granted_at IS NOT NULL AND released_at IS NULL)
  AND h.place <= ? - (SELECT COUNT(*) FROM treadle_limit_slots
                      WHERE limit_name = ? AND granted_at > {_NOW} - ?)
  AND h.upto <= ? - (SELECT COALESCE(SUM(cost), 0) FROM treadle_limit_slots
                     WHERE limit_name = ? AND granted_at > {_NOW} - ?)
)
AND NOT EXISTS (SELECT 1 FROM treadle_limits
                WHERE limit_name = ? AND paused_until > {_NOW})"""  # noqa: S608 - constants only

# The turn being served moves on to the last one granted.
SERVE = f"""
UPDATE treadle_limits SET serving = (
  SELECT MAX(turn) FROM treadle_limit_slots WHERE limit_name = ? AND granted_at = {_NOW})
WHERE limit_name = ? AND serving < (
  SELECT COALESCE(MAX(turn), -1) FROM treadle_limit_slots
  WHERE limit_name = ? AND granted_at = {_NOW})"""  # noqa: S608 - constants only

NOTICE = """
UPDATE treadle_limit_slots SET noticed = 1
WHERE limit_name = ? AND gate = ? AND noticed = 0
AND granted_at IS NOT NULL AND released_at IS NULL
RETURNING call_id"""

# What the asker needs to know when to ask again: the line's time, its slow-down, the
# grant that leaves the rate's window first once the window is full (NULL: not full),
# and whether the caller's lease was current.
STATE = f"""
SELECT l.clock, l.paused_until,
  (SELECT g.granted_at FROM treadle_limit_slots AS g
   WHERE g.limit_name = l.limit_name AND g.granted_at > l.clock - ?
   ORDER BY g.granted_at DESC LIMIT 1 OFFSET ?),
  CASE WHEN {_LEASE_OK} THEN 1 ELSE 0 END
FROM treadle_limits AS l WHERE l.limit_name = ?"""  # noqa: S608 - constants only

# For a token budget: what the window has spent, oldest first, and the first waiting
# call's cost (when it may start depends on both).
SPENT = f"""
SELECT granted_at, cost FROM treadle_limit_slots
WHERE limit_name = ? AND granted_at > {_NOW} - ? ORDER BY granted_at"""  # noqa: S608 - constants only

FIRST_COST = f"""
SELECT cost FROM treadle_limit_slots
WHERE limit_name = ? AND granted_at IS NULL AND {_CURRENT}
ORDER BY priority DESC, turn, arrival LIMIT 1"""  # noqa: S608 - constants only

LEAVE = """
DELETE FROM treadle_limit_slots
WHERE limit_name = ? AND call_id = ? AND lease_epoch = ? AND granted_at IS NULL"""

SLOW = """
UPDATE treadle_limits SET paused_until = ?
WHERE limit_name = ? AND (paused_until IS NULL OR paused_until < ?)"""

# A run's waits and each call's place, behind the waiting calls of runs going on only.
WAITS = f"""
SELECT s.run_id, s.limit_name, s.call_id, s.call_key, s.entered_at,
  (SELECT COUNT(*) FROM treadle_limit_slots AS o
   WHERE o.limit_name = s.limit_name AND o.granted_at IS NULL AND {_going_on("o")}
   AND (o.priority > s.priority OR (o.priority = s.priority
        AND (o.turn < s.turn OR (o.turn = s.turn AND o.arrival < s.arrival))))),
  l.paused_until, l.calls, l.per,
  (SELECT MIN(g.granted_at) FROM treadle_limit_slots AS g
   WHERE g.limit_name = s.limit_name AND g.granted_at > ? - l.per),
  (SELECT COUNT(*) FROM treadle_limit_slots AS c
   WHERE c.limit_name = s.limit_name AND c.granted_at > ? - l.per)
FROM treadle_limit_slots AS s JOIN treadle_limits AS l ON l.limit_name = s.limit_name
WHERE s.granted_at IS NULL AND s.run_id IN ({{ids}}) AND {_going_on("s")}
ORDER BY s.run_id, s.limit_name"""  # noqa: S608 - constants only

NONE = 1 << 30
"""A cap that caps nothing (no concurrency, no rate, no token budget), as a number."""
