"""The SQL stores' statements for webhooks and answer links (see :mod:`treadle._stores._outbox`).

The outbox is fed by a trigger on ``treadle_events``, which exists while an
endpoint does: added with the first endpoint and dropped with the last, in
their transactions. Every writer of a run's log (a commit, a status set, a
delivery, the store's own status records) feeds it, in its own
transaction, without a statement of its own; a store with no endpoint runs
no trigger at all. The trigger is the one part written twice, as SQLite's
and PostgreSQL's JSON functions differ; it maps events to messages as
:func:`treadle._stores._outbox.messages_for` does.
"""

from __future__ import annotations

from treadle._stores._answer_links import LINK_COLUMNS
from treadle._stores._event_packing import TEXT_FUNCTION
from treadle._stores._outbox import MESSAGE_COLUMNS

_ENDPOINT_COLUMNS = (
    "endpoint_id, url, events, secret, attempts, backoff, deadline_lead, created_at, answer_links"
)
INSERT_ENDPOINT = (
    f"INSERT INTO treadle_webhooks ({_ENDPOINT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"  # noqa: S608 - constants only
)
SELECT_ENDPOINTS = (
    f"SELECT {_ENDPOINT_COLUMNS} FROM treadle_webhooks ORDER BY created_at, endpoint_id"  # noqa: S608 - constants only
)
DELETE_ENDPOINT = "DELETE FROM treadle_webhooks WHERE endpoint_id = ?"
DELETE_ENDPOINT_MESSAGES = "DELETE FROM treadle_outbox WHERE endpoint_id = ?"
COUNT_ENDPOINTS = "SELECT COUNT(*) FROM treadle_webhooks"

# Due messages, the first pending one of each run and endpoint (a deadline_near
# holds nothing up), leased to a sender. The outer conditions are checked again
# on a row a concurrent claim changed (PostgreSQL re-reads it), so two senders
# never take one message.
CLAIM = f"""
UPDATE treadle_outbox SET lease_owner = ?, lease_until = ?
WHERE {{order}} IN (
    SELECT o.{{order}} FROM treadle_outbox AS o
    WHERE o.state = 'pending' AND o.due_at <= ?
    AND (o.lease_until IS NULL OR o.lease_until <= ?)
    AND NOT EXISTS (
        SELECT 1 FROM treadle_outbox AS p
        WHERE p.endpoint_id = o.endpoint_id AND p.run_id = o.run_id AND p.state = 'pending'
        AND p.{{order}} < o.{{order}} AND p.event_type <> 'request.deadline_near')
    ORDER BY o.{{order}} LIMIT ?)
AND state = 'pending' AND (lease_until IS NULL OR lease_until <= ?)
RETURNING {MESSAGE_COLUMNS}"""  # noqa: S608 - constants only


def claim_parameters(owner: str, now: float, lease: float, limit: int) -> tuple[object, ...]:
    """The parameters of :data:`CLAIM`."""
    return (owner, now + lease, now, now, limit, now)


SENT = "DELETE FROM treadle_outbox WHERE {order} = ? AND lease_owner = ?"
FAILED = """
UPDATE treadle_outbox SET attempts = attempts + 1, last_error = ?, due_at = ?, state = ?,
    lease_owner = NULL, lease_until = NULL
WHERE {order} = ? AND lease_owner = ?"""
SELECT_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM treadle_outbox WHERE state = ? ORDER BY {{order}} LIMIT ?"  # noqa: S608 - constants only
)
_RESEND = (
    "UPDATE treadle_outbox SET state = 'pending', attempts = 0, due_at = ?, last_error = NULL,"
    " lease_owner = NULL, lease_until = NULL WHERE state = 'dead'"
)
RESEND_ALL = _RESEND
RESEND_ONE = _RESEND + " AND {order} = ?"

INSERT_LINK = f"INSERT INTO treadle_links ({LINK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (nonce) DO NOTHING"  # noqa: S608, E501
SELECT_LINK = f"SELECT {LINK_COLUMNS} FROM treadle_links WHERE nonce = ?"  # noqa: S608
USE_LINK = "UPDATE treadle_links SET used_at = ?, used_by = ? WHERE nonce = ? AND used_at IS NULL"
RELEASE_LINK = "UPDATE treadle_links SET used_at = NULL, used_by = NULL WHERE nonce = ?"

# S105: statements and a row's name, not passwords.
INSERT_SECRET = "INSERT INTO treadle_secrets (name, secret) VALUES (?, ?) ON CONFLICT DO NOTHING"  # noqa: S105
SELECT_SECRET = "SELECT secret FROM treadle_secrets WHERE name = ?"  # noqa: S105
LINK_SECRET = "answer_links"  # noqa: S105

# Both feeds add a row's messages, then drop the pending reminders that an event of the
# row settles (an answer, a timeout, the run's end), those of requests before it: as the
# memory store's feed, event by event, a request with a deadline settled later in its
# own row leaves no reminder. A feed made before dropped first, which kept that
# reminder: it is made again at open.
#
# SQLite's feed: JSON through json_each and json_extract, of a row's text
# (treadle_events_text unpacks a packed row: see _event_packing). A run's log is
# rows of treadle_events and checkpoints holding their superstep's events (see
# _sql_events): a trigger on each. A row retention moves from a checkpoint into
# treadle_events was fed with its checkpoint and is passed by (its checkpoint's
# row is still there when it moves). A database whose feed is older (it reads
# rows as text, or has no trigger on checkpoints) gets this one when it opens
# (_sqlite_transactions.migrate).
_SQLITE_FEED_ON = (  # each trigger's name, and what it fires on
    (
        "treadle_outbox_feed",
        (
            "treadle_events WHEN NOT EXISTS (SELECT 1 FROM treadle_checkpoints"
            " WHERE run_id = NEW.run_id AND first_seq = NEW.first_seq)"
        ),
    ),
    ("treadle_outbox_step_feed", "treadle_checkpoints WHEN NEW.events IS NOT NULL"),
)
_SQLITE_FEED_BODY = """
BEGIN
    INSERT INTO treadle_outbox
        (endpoint_id, run_id, event_seq, event_type, event, due_at, state, attempts)
    SELECT w.endpoint_id, NEW.run_id, NEW.first_seq + e.key, t.event_type, e.value,
        CASE WHEN t.event_type = 'request.deadline_near'
            THEN MAX(json_extract(e.value, '$[3]'),
                json_extract(e.value, '$[4].deadline_at') - w.deadline_lead)
            ELSE json_extract(e.value, '$[3]') END,
        'pending', 0
    FROM json_each(treadle_events_text(NEW.events)) AS e
    JOIN (SELECT 'request' AS kind, NULL AS status, 'request.created' AS event_type
        UNION ALL SELECT 'request', NULL, 'request.deadline_near'
        UNION ALL SELECT 'request_answered', NULL, 'request.answered'
        UNION ALL SELECT 'status_changed', 'completed', 'run.completed'
        UNION ALL SELECT 'status_changed', 'failed', 'run.failed') AS t
    ON t.kind = json_extract(e.value, '$[1]')
        AND (t.status IS NULL OR t.status = json_extract(e.value, '$[4].status'))
        AND (t.event_type <> 'request.deadline_near'
            OR json_extract(e.value, '$[4].deadline_at') IS NOT NULL)
    CROSS JOIN treadle_webhooks AS w
    WHERE instr(',' || w.events || ',', ',' || t.event_type || ',') > 0
    ORDER BY e.key, w.endpoint_id;
    DELETE FROM treadle_outbox
    WHERE run_id = NEW.run_id AND event_type = 'request.deadline_near' AND state = 'pending'
    AND EXISTS (
        SELECT 1 FROM json_each(treadle_events_text(NEW.events)) AS e
        WHERE treadle_outbox.event_seq < NEW.first_seq + e.key
        AND ((json_extract(e.value, '$[1]') IN ('request_answered', 'request_timed_out')
            AND json_extract(e.value, '$[4].request_id')
                = json_extract(treadle_outbox.event, '$[4].request_id'))
        OR (json_extract(e.value, '$[1]') = 'status_changed'
            AND json_extract(e.value, '$[4].status') IN ('completed', 'failed', 'cancelled'))));
END"""
SQLITE_FEED = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {name} AFTER INSERT ON {on}{_SQLITE_FEED_BODY}"
    for name, on in _SQLITE_FEED_ON
)
SQLITE_DROP_FEED = tuple(f"DROP TRIGGER IF EXISTS {name}" for name, _ in _SQLITE_FEED_ON)
# A feed made by an older treadle: it reads rows as text (made before event rows were
# packed), feeds from treadle_events alone (made before checkpoints held events), or
# drops reminders before it adds a row's.
_DROPS_FIRST = (  # {find}: the dialect's substring search (SQLite instr, PostgreSQL strpos)
    "{find}({text}, 'DELETE FROM treadle_outbox') < {find}({text}, 'INSERT INTO treadle_outbox')"
)
SQLITE_OLD_FEED = (
    "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'treadle_outbox_feed'"  # noqa: S608 - constants only
    f" AND (instr(sql, '{TEXT_FUNCTION}') = 0 OR NOT EXISTS (SELECT 1 FROM sqlite_master"
    " WHERE type = 'trigger' AND name = 'treadle_outbox_step_feed')"
    f" OR {_DROPS_FIRST.format(find='instr', text='sql')})"
)

# PostgreSQL's feed: a function (JSON through jsonb) and the trigger calling it.
POSTGRES_FEED_FUNCTION = """
CREATE OR REPLACE FUNCTION treadle_outbox_feed() RETURNS trigger LANGUAGE plpgsql AS $feed$
BEGIN
    INSERT INTO treadle_outbox
        (endpoint_id, run_id, event_seq, event_type, event, due_at, state, attempts)
    SELECT w.endpoint_id, NEW.run_id, NEW.first_seq + e.n - 1, t.event_type,
        CAST(e.value AS text),
        CASE WHEN t.event_type = 'request.deadline_near'
            THEN GREATEST(CAST(e.value ->> 3 AS double precision),
                CAST((e.value -> 4) ->> 'deadline_at' AS double precision) - w.deadline_lead)
            ELSE CAST(e.value ->> 3 AS double precision) END,
        'pending', 0
    FROM jsonb_array_elements(CAST(NEW.events AS jsonb)) WITH ORDINALITY AS e(value, n)
    JOIN (VALUES ('request', NULL, 'request.created'),
        ('request', NULL, 'request.deadline_near'),
        ('request_answered', NULL, 'request.answered'),
        ('status_changed', 'completed', 'run.completed'),
        ('status_changed', 'failed', 'run.failed')) AS t(kind, status, event_type)
    ON t.kind = e.value ->> 1
        AND (t.status IS NULL OR t.status = (e.value -> 4) ->> 'status')
        AND (t.event_type <> 'request.deadline_near'
            OR jsonb_typeof((e.value -> 4) -> 'deadline_at') = 'number')
    CROSS JOIN treadle_webhooks AS w
    WHERE strpos(',' || w.events || ',', ',' || t.event_type || ',') > 0
    ORDER BY e.n, w.endpoint_id;
    DELETE FROM treadle_outbox
    WHERE run_id = NEW.run_id AND event_type = 'request.deadline_near' AND state = 'pending'
    AND EXISTS (
        SELECT 1 FROM jsonb_array_elements(CAST(NEW.events AS jsonb)) WITH ORDINALITY AS e(value, n)
        WHERE treadle_outbox.event_seq < NEW.first_seq + e.n - 1
        AND ((e.value ->> 1 IN ('request_answered', 'request_timed_out')
            AND (e.value -> 4) ->> 'request_id'
                = (CAST(treadle_outbox.event AS jsonb) -> 4) ->> 'request_id')
        OR (e.value ->> 1 = 'status_changed'
            AND (e.value -> 4) ->> 'status' IN ('completed', 'failed', 'cancelled'))));
    RETURN NULL;
END
$feed$"""
POSTGRES_FEED = (
    "CREATE OR REPLACE TRIGGER treadle_outbox_feed AFTER INSERT ON treadle_events"
    " FOR EACH ROW EXECUTE FUNCTION treadle_outbox_feed()"
)
POSTGRES_DROP_FEED = "DROP TRIGGER IF EXISTS treadle_outbox_feed ON treadle_events"
# The schema's feed function, if an older treadle made it (see above).
POSTGRES_OLD_FEED = (
    "SELECT 1 FROM pg_proc WHERE proname = 'treadle_outbox_feed'"  # noqa: S608 - constants only
    " AND pronamespace = CAST(current_schema() AS regnamespace)"
    f" AND {_DROPS_FIRST.format(find='strpos', text='prosrc')}"
)


# Steps of a write that each backend spells its own way: create the feed (the
# trigger) if missing; drop it when no endpoint is left.
ADD_FEED = "-- add the feed"
DROP_FEED_IF_UNUSED = "-- drop the feed if no endpoint is left"
