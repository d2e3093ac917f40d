"""The ownership part of the SQL port: leases, fencing, the inbox, cancelling, claims.

Templates in the neutral dialect of :mod:`treadle._stores._sql_dialect`,
rendered by each backend with its
:class:`~treadle._stores._sql_dialect.Dialect`, and the port's rules about
ownership that every store (``MemoryStore`` included) applies, so that all
refuse the same calls alike.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from treadle._exceptions import RequestError, RunNotFoundError, VersionMismatchError
from treadle._graph._input_policy import MESSAGE_KIND, InputPolicy
from treadle._stores._sql_schema import DUE_AT
from treadle._values._serialization import untagged_json

if TYPE_CHECKING:
    from collections.abc import Sequence

# --- statements ---------------------------------------------------------------

READY_CHANNEL = "treadle_ready"
"""Where a run becoming ready is announced (PostgreSQL), so idle workers claim it at once."""

# Sent when the transaction commits (never for one rolled back), and only to
# listeners on this schema: writers of other schemas in the database do not wake them.
NOTIFY_READY = f"SELECT pg_notify('{READY_CHANNEL}', current_schema())"
"""Announce on :data:`READY_CHANNEL` that a run of this schema became ready (PostgreSQL only)."""

FENCE = " AND owner = ? AND lease_epoch = ?"
"""Appended to a run-row write made under a lease: it changes nothing once the lease is gone."""

# A lease is free when nobody holds one, or the holder's ran out (it died).
_FREE = "(owner IS NULL OR lease_until IS NULL OR lease_until <= ?)"

# A paused run is taken by nobody: ``unpause`` (which may lease it) lets it go on.
ACQUIRE = f"""
UPDATE treadle_runs
SET owner = ?, lease_epoch = lease_epoch + 1, lease_until = ?, parked = NULL
WHERE run_id = ? AND status <> 'paused' AND {_FREE}
RETURNING lease_epoch, status"""  # noqa: S608 - constants only

# Taking a lease over from an owner known to be dead (its process is gone), however long it had.
ACQUIRE_FROM = """
UPDATE treadle_runs
SET owner = ?, lease_epoch = lease_epoch + 1, lease_until = ?, parked = NULL
WHERE run_id = ? AND owner = ? AND status <> 'paused'
RETURNING lease_epoch, status"""

NOTHING_TO_RESUME = frozenset({"completed", "cancelled"})
"""A resume finds nothing to do in a run that completed, and is refused one cancelled: taking
its lease to find so is not recorded as ``run_resumed`` (a failed run's resume runs it again)."""

# Why an acquire took nothing: the owner and its lease, or the run is paused.
SELECT_OWNER = "SELECT owner, lease_until, status FROM treadle_runs WHERE run_id = ?"

RENEW = "UPDATE treadle_runs SET lease_until = ? WHERE run_id = ?" + FENCE  # noqa: S608 - constants

UNAPPLIED = (
    "EXISTS (SELECT 1 FROM treadle_inbox AS i"
    " WHERE i.run_id = treadle_runs.run_id AND i.consumed_at IS NULL)"
)
"""Whether a run's inbox holds items no owner has applied (a condition on ``treadle_runs``)."""

UNAPPLIED_AFTER = UNAPPLIED[:-1] + " AND i.{order} > ?)"
"""``UNAPPLIED``, of the items after a given one (those its owner has not read)."""

# Giving a lease up leaves the run ready when its inbox holds unapplied items,
# so a timer service or worker applies what arrived while it was owned.
RELEASE = f"""
UPDATE treadle_runs
SET owner = NULL, lease_until = NULL,
    ready_at = (CASE WHEN {UNAPPLIED_AFTER} THEN COALESCE(ready_at, ?) END)
WHERE run_id = ?{FENCE}"""  # noqa: S608 - constants only

# A commit that brings a run to rest under its lease, in one statement: the
# run row follows the checkpoint, takes its status and lets the lease go
# (each statement is a round trip to the store's thread, and parking a run is
# mostly this one commit). It leaves ``ready_at`` alone (naming an indexed
# column in SET rewrites its index entry even when the value stays): on
# SQLite, ``ready_at`` is set exactly while the inbox holds unapplied items,
# set by ``deliver`` and cleared by ``CLEAR_READY`` in the commit that applies
# the last of them.
ADVANCE_AND_RELEASE = f"""
UPDATE treadle_runs
SET status = ?, superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?, error = NULL,
    outcome = ?, outcome_summary = ?, owner = NULL, lease_until = NULL
WHERE run_id = ?{FENCE}"""  # noqa: S608 - constants only

CLEAR_READY = f"""
UPDATE treadle_runs SET ready_at = NULL
WHERE run_id = ? AND ready_at IS NOT NULL AND NOT {UNAPPLIED}"""  # noqa: S608 - constants only

CONSUME_INBOX = (
    "UPDATE treadle_inbox SET consumed_at = ?"
    " WHERE run_id = ? AND {order} <= ? AND consumed_at IS NULL"
)

SELECT_INBOX = (
    "SELECT {order}, kind, target, payload, created_at FROM treadle_inbox"
    " WHERE run_id = ? AND consumed_at IS NULL ORDER BY {order}"
)

# The answers that wait to be applied, of the runs given (a JSON array, see {ids}).
ANSWERS_WAITING = (
    "SELECT run_id, target FROM treadle_inbox WHERE run_id IN ({ids})"
    " AND kind = 'answer' AND consumed_at IS NULL"
)

SELECT_ANSWER = (
    "SELECT payload, created_at FROM treadle_inbox"
    " WHERE run_id = ? AND kind = 'answer' AND target = ?"
)

INSERT_INBOX = (
    "INSERT INTO treadle_inbox (run_id, kind, target, payload, created_at) VALUES (?, ?, ?, ?, ?)"
)

MAKE_READY = "UPDATE treadle_runs SET ready_at = COALESCE(ready_at, ?) WHERE run_id = ?"

ENDED_STATUSES = ("cancelled", "completed", "failed", "stalled")
"""The statuses after which a run never moves again (``RunStatus.ENDED``), as stored."""

_ENDED_SQL = "(" + ", ".join(f"'{status}'" for status in ENDED_STATUSES) + ")"

# Not for a timer service: ended runs, paused ones, and runs a client queued for
# ``treadle worker``s (``pending``: no checkpoint yet; only a worker can start them).
_NOT_SERVICEABLE = "(" + ", ".join(f"'{s}'" for s in (*ENDED_STATUSES, "paused", "pending")) + ")"

CANCEL = f"""
UPDATE treadle_runs
SET status = 'cancelled', owner = NULL, lease_until = NULL, ready_at = NULL,
    lease_epoch = lease_epoch + 1, updated_at = ?, error = NULL, pause_requested = NULL
WHERE run_id = ? AND status NOT IN {_ENDED_SQL}"""  # noqa: S608 - constants only


SELECT_HELD = "SELECT run_id FROM treadle_runs WHERE run_id = ?" + FENCE  # noqa: S608 - constants

SELECT_UNAPPLIED = (
    "SELECT kind, target FROM treadle_inbox"
    " WHERE run_id = ? AND {order} = ? AND consumed_at IS NULL"
)

# A refused item stays, as what was sent, but is no answer any more: the
# request may be answered again (``treadle_inbox_answers`` holds answers only).
REFUSE_UNAPPLIED = (
    "UPDATE treadle_inbox SET kind = 'refused', consumed_at = ?"
    " WHERE run_id = ? AND {order} = ? AND consumed_at IS NULL"
)

CONSUME_ALL = "UPDATE treadle_inbox SET consumed_at = ? WHERE run_id = ? AND consumed_at IS NULL"

# The session messages a run that ends leaves unapplied, refused by its owner (see
# REFUSE_UNAPPLIED). Not answers: one kept decides its request for every later caller.
_LEFT_MESSAGES = (
    "run_id = ? AND consumed_at IS NULL AND (kind = 'message' OR substr(kind, 1, 8) = 'message:')"
)
SELECT_LEFTOVERS = (
    f"SELECT kind, target FROM treadle_inbox WHERE {_LEFT_MESSAGES} ORDER BY {{order}}"  # noqa: S608 - constants
)
REFUSE_LEFTOVERS = (
    f"UPDATE treadle_inbox SET kind = 'refused', consumed_at = ? WHERE {_LEFT_MESSAGES}"  # noqa: S608 - constants
)

# An ended run's answers left unmarked (one applied from behind a message that waited for
# a rest that never came: the store marks a prefix applied): marked with its leftovers.
CONSUME_LEFT_ANSWERS = (
    "UPDATE treadle_inbox SET consumed_at = ?"
    " WHERE run_id = ? AND consumed_at IS NULL AND kind = 'answer'"
)

SELECT_STATUS = "SELECT status FROM treadle_runs WHERE run_id = ?"

# What a delivery checks, the row locked (in PostgreSQL) so a migration takes turns with it.
SELECT_DELIVERABLE = "SELECT status, workflow, version FROM treadle_runs WHERE run_id = ?"

PARK = (
    "UPDATE treadle_runs SET parked = ?, owner = NULL, lease_until = NULL, ready_at = NULL"  # noqa: S608 - constants
    " WHERE run_id = ?" + FENCE
)

PARK_CLAIMED = "UPDATE treadle_runs SET parked = ? WHERE run_id = ?" + FENCE  # noqa: S608
"""Park a run a worker holds, keeping its claim (the worker lets go): (reason, run id, fence)."""

ADOPT_PENDING = f"""
UPDATE treadle_runs
SET status = ?, superstep = ?, checkpoint_id = ?, updated_at = ?, wake_at = ?,
    deadline_at = ?, graph = ?, graph_digest = ?, error = NULL, version = ?
WHERE run_id = ?{FENCE}"""  # noqa: S608 - constants only
"""Turn the pending row a client enqueued into the run a worker started, under its claim."""

# What a timer service takes up, each served by its own index: a due timer or
# deadline (due), something delivered and not applied (ready), or an orphan
# (running, with nobody's current lease: its owner died mid-run).
_CLAIMABLE = " AND parked IS NULL AND " + _FREE
CLAIMABLE_DUE = (
    f"SELECT run_id FROM treadle_runs WHERE {DUE_AT} <= ?{_CLAIMABLE}"  # noqa: S608 - constants
    f" ORDER BY {DUE_AT} LIMIT ?"
)
CLAIMABLE_READY = (
    f"SELECT run_id FROM treadle_runs WHERE ready_at <= ?{_CLAIMABLE}"  # noqa: S608 - constants
    f" AND status NOT IN {_NOT_SERVICEABLE} ORDER BY ready_at LIMIT ?"
)
CLAIMABLE_ORPHANS = (
    f"SELECT run_id FROM treadle_runs WHERE status = 'running' AND ? > 0{_CLAIMABLE}"  # noqa: S608 - constants
    " LIMIT ?"
)

# The same runs held under a current lease, with the lease: a service takes one
# at once from an owner it knows is dead. Read by the indexes above, as the
# claim is (status, ready_at, the due time).
HELD_CLAIMABLE = (
    "SELECT run_id, owner, lease_epoch, lease_until FROM treadle_runs"  # noqa: S608 - constants
    f" WHERE (status = 'running' OR ready_at <= ? OR {DUE_AT} <= ?)"
    f" AND owner IS NOT NULL AND lease_until > ? AND parked IS NULL"
    f" AND status NOT IN {_NOT_SERVICEABLE} LIMIT ?"
)

CLAIM = f"""
UPDATE treadle_runs
SET owner = ?, lease_epoch = lease_epoch + 1, lease_until = ?
WHERE run_id = ? AND parked IS NULL AND status NOT IN {_NOT_SERVICEABLE} AND {_FREE}
RETURNING lease_epoch, workflow, ready_at, version"""  # noqa: S608 - constants only


@functools.cache
def claim_many(count: int) -> str:
    """``CLAIM`` for ``count`` runs at once: one statement for a whole batch of claims."""
    runs = ", ".join(["?"] * count)
    return (
        "UPDATE treadle_runs SET owner = ?, lease_epoch = lease_epoch + 1, lease_until = ?"  # noqa: S608 - constants only
        f" WHERE run_id IN ({runs}) AND parked IS NULL AND status NOT IN {_NOT_SERVICEABLE}"
        f" AND {_FREE} RETURNING run_id, lease_epoch, workflow, ready_at, version"
    )


# --- the port's rules about ownership, which every store applies -------------


def check_lease(lease: float) -> None:
    """Refuse a lease duration that is not a positive number of seconds.

    Raises:
        ValueError: ``lease`` is zero or negative.
    """
    if not lease > 0:
        raise ValueError(f"lease must be a positive number of seconds, got {lease}")


_PREVIEW = 200


def answer_preview(payload: bytes) -> str:
    """A stored answer as an error shows it: plain JSON, as it was typed, cut to 200 characters.

    The store keeps an answer as its serializer wrote it (typed JSON, a
    dataclass tagged with its registered name); a person reads the answer
    without those tags. Bytes of another serializer are shown as text.
    """
    data = bytes(payload)
    text = untagged_json(data) or data.decode("utf-8", errors="replace")
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def not_cancellable(run_id: str, found: Sequence[Any] | None) -> Exception:
    """Why ``CANCEL`` changed no row: no such run, or it has ended (``found``: its status row)."""
    if found is None:
        return RunNotFoundError(run_id)
    return RequestError(f"run {run_id!r} has ended ({found[0]}); there is nothing to cancel")


def check_found(run_id: str, found: Sequence[Any] | None) -> Sequence[Any]:
    """The row a run's ``SELECT_STATUS`` found, or ``RunNotFoundError``."""
    if found is None:
        raise RunNotFoundError(run_id)
    return found


def check_items(run_id: str, items: Sequence[tuple[str, str | None, bytes]]) -> None:
    """Refuse a delivery holding an item no owner could apply, before anything is written.

    What a door delivers is made right; this is for a caller of
    ``Store.deliver`` (a client of its own): an item of another kind would
    reach the run's owner, and an unknown input policy fail the run there.

    Raises:
        ValueError: An item's kind is not ``answer``, ``message`` or
            ``message:POLICY`` (a policy of ``InputPolicy.parse`` other than
            reject), or an answer names no request (the error names the item).
        TypeError: A target is not text or ``None``, or a payload not bytes.
    """
    for index, (kind, target, payload) in enumerate(items):
        where = f"delivery to run {run_id!r}, item {index}"
        if kind == "answer":
            if not isinstance(target, str) or not target:
                msg = f"{where}: an answer names the request it answers, got {target!r}"
                raise ValueError(msg)
        elif kind.startswith(MESSAGE_KIND + ":"):
            try:
                policy = InputPolicy.parse(kind[len(MESSAGE_KIND) + 1 :])
            except ValueError as error:
                raise ValueError(f"{where}: kind {kind!r}: {error}") from None
            if not policy.watches_turns:
                msg = f"{where}: kind {kind!r}: a message under reject is of kind {MESSAGE_KIND!r}"
                raise ValueError(msg)
        elif kind != MESSAGE_KIND:
            msg = (
                f"{where}: kind {kind!r} is not 'answer', {MESSAGE_KIND!r} "
                f"or '{MESSAGE_KIND}:POLICY' (as 'message:enqueue')"
            )
            raise ValueError(msg)
        if target is not None and not isinstance(target, str):
            raise TypeError(f"{where}: a target is text or None, got {type(target).__name__}")
        if not isinstance(payload, bytes | bytearray | memoryview):
            got = type(payload).__name__
            raise TypeError(f"{where}: a payload is bytes (its serializer's), got {got}")


def check_version(run_id: str, workflow: str, held: int, version: int | None) -> None:
    """Refuse a delivery meant for ``version`` of a run that is on version ``held``.

    Raises:
        VersionMismatchError: The versions differ (``version`` given).
    """
    if version is not None and held != version:
        raise VersionMismatchError(run_id, workflow, held, version)


def check_not_ended(run_id: str, status: str) -> None:
    """Refuse a delivery to a run that has ended.

    Checked after the answers, so that an answer to a request answered
    already is refused as such (the more useful error), not as too late.

    Raises:
        RequestError: ``status`` is an ended status.
    """
    if status in ENDED_STATUSES:
        raise RequestError(f"run {run_id!r} has ended ({status}); nothing can be delivered to it")
