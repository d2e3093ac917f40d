"""The store's record of who did what to which run: event-log entries and the audit chain.

Every action taken on a run from outside it (an answer, a message, a
cancel, a pause, a start, a fork, a delete, a migration, a prune, a
resume) is written by the store in the transaction of its effect, twice:
as an event in the run's log (``request_answered``, ``run_cancelled``,
...), which ``treadle logs``, ``export`` and the page show beside what the
run did, and as an entry of the store's **audit log**, which outlives the
run (a deleted or pruned run keeps its entries). So there is never an
effect without its entry, nor an entry without its effect: a crash either
loses both or keeps both.

Audit entries are numbered 1, 2, 3, ... across the store and hash-chained:
each entry's ``hash`` is the SHA-256 of the previous entry's hash and the
entry's own fields (:func:`entry_hash`). An edited entry no longer matches
its hash, a removed or reordered one breaks the chain of the next, and
:func:`chain_problems` names each. The run's log event of an action carries
its audit entry's seq and hash, so an entry removed from the end of the
chain is found missing from the run's log (``treadle audit --verify``).

The decisions here (which event an action writes, what its entry holds)
are the same for every store; the SQL stores' statements are
:mod:`treadle._stores._sql_audit`'s, ``MemoryStore`` keeps a list.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from treadle._values._actors import Actor
from treadle._values._serialization import untagged_json

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from treadle._stores._records import RunRecord

GENESIS = "0" * 64
"""The ``prev_hash`` of the first entry: there is none before it."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One entry of the store's audit log.

    Attributes:
        seq: Its place in the log: 1 for the first, then one more each.
        at: When the action was taken (epoch seconds).
        run_id: The run acted on (``None`` for an action on the store).
        action: What was done: the kind of the event it wrote in the run's
            log (``"request_answered"``, ``"run_cancelled"``, ...).
        actor: Who did it, as :meth:`Actor.to_json` gives (plain JSON).
        door: How it came in (``"page"``, ``"cli"``, ...).
        detail: What else says what was done (the request and the answer,
            the checkpoint forked from, ...).
        prev_hash: The hash of the entry before it (:data:`GENESIS` for the first).
        hash: SHA-256 of ``prev_hash`` and the fields above (:func:`entry_hash`).
    """

    seq: int
    at: float
    run_id: str | None
    action: str
    actor: dict[str, Any]
    door: str
    detail: dict[str, Any]
    prev_hash: str
    hash: str

    def to_json(self) -> dict[str, Any]:
        """The entry as plain data (``treadle audit --json``, the HTTP API)."""
        return {
            "seq": self.seq,
            "at": self.at,
            "run_id": self.run_id,
            "action": self.action,
            "actor": self.actor,
            "door": self.door,
            "detail": self.detail,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


class AuditLog(Protocol):
    """What the store port asks of a store about its audit log (a part of ``Store``)."""

    async def read_audit(
        self, run_id: str | None = None, *, after: int = 0, limit: int | None = None
    ) -> list[AuditEntry]:
        """Audit entries with ``seq`` above ``after``, oldest first, at most ``limit``.

        With ``run_id``, only that run's (also once it is deleted).
        """
        ...


@dataclass(frozen=True, slots=True)
class Recorded:
    """An action about to be written: its event in the run's log and its audit entry.

    Attributes:
        run_id: The run acted on (``None``: an action on the store, such as
            a change to a schedule, which no run's log gets).
        action: The event's kind and the audit entry's action.
        actor: Who acts.
        detail: The event's data and the entry's detail, besides the actor.
        logged: Whether the run's log gets the event (not for a deleted run:
            its log goes with it, and the audit entry stays).
    """

    run_id: str | None
    action: str
    actor: Actor
    detail: Mapping[str, Any]
    logged: bool = True

    def row(self, seq: int, at: float, prev_hash: str) -> tuple[Any, ...]:
        """The audit row (seq, at, run_id, action, actor, door, detail, prev_hash, hash)."""
        actor = _stored(self.actor)
        detail = _canonical(self.detail) if self.detail else "{}"
        fields = (seq, at, self.run_id, self.action, actor, self.actor.door, detail)
        return (*fields, prev_hash, entry_hash(*fields, prev_hash))

    def event_data(self, seq: int, digest: str) -> str:
        """The event's data (JSON text): the detail, the actor, and the audit entry it matches."""
        if self.detail:
            audit = {"seq": seq, "hash": digest}
            data = {**self.detail, "actor": self.actor.to_json(), "audit": audit}
            return json.dumps(data, separators=(",", ":"))
        # What the above writes with no detail (a run's start), the actor written once.
        return f'{{"actor":{_shown(self.actor)},"audit":{{"seq":{seq},"hash":"{digest}"}}}}'


# An actor's two texts, kept per actor: every run one caller starts writes them
# again. Actors are frozen values; a process meets few distinct ones.
_stored = functools.lru_cache(maxsize=256)(Actor.encode)


@functools.lru_cache(maxsize=256)
def _shown(actor: Actor) -> str:
    return json.dumps(actor.to_json(), separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _actor_of(started_by: str) -> Actor:
    """The actor a run row's ``started_by`` names (parsed once per distinct text)."""
    return Actor.from_json(json.loads(started_by))


def entry_hash(
    seq: int,
    at: float,
    run_id: str | None,
    action: str,
    actor: str,
    door: str,
    detail: str,
    prev_hash: str,
) -> str:
    """The SHA-256 an entry with these stored fields must carry (hex)."""
    text = json.dumps([seq, at, run_id, action, actor, door, detail, prev_hash])
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def entry_of(row: Sequence[Any]) -> AuditEntry:
    """An :class:`AuditEntry` from a stored row, in the column order of ``treadle_audit``."""
    seq, at, run_id, action, actor, door, detail, prev_hash, digest = row
    return AuditEntry(
        int(seq),
        float(at),
        run_id,
        action,
        _object(actor),
        door,
        _object(detail),
        prev_hash,
        digest,
    )


def _object(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return found if isinstance(found, dict) else {"unreadable": text}


def recomputed_hash(entry: AuditEntry) -> str:
    """The hash the entry's fields, as stored, call for (actor and detail as stored text)."""
    actor = json.dumps(entry.actor, sort_keys=True, separators=(",", ":"))
    detail = _canonical(entry.detail)
    fields = (entry.seq, entry.at, entry.run_id, entry.action, actor, entry.door, detail)
    return entry_hash(*fields, entry.prev_hash)


def chain_problems(entries: Iterable[AuditEntry]) -> list[str]:
    """What is wrong with the chain ``entries`` make, read oldest first: one line each.

    An entry whose hash does not match its fields was edited; a seq that
    does not follow the one before was removed (or one was inserted); a
    ``prev_hash`` that is not the hash before it was reordered or its
    predecessor removed. Empty: the chain holds.
    """
    problems: list[str] = []
    expected_seq, prev = 1, GENESIS
    for entry in entries:
        if entry.seq != expected_seq:
            if entry.seq > expected_seq:
                gone = f"{expected_seq}" + (
                    f"-{entry.seq - 1}" if entry.seq - 1 > expected_seq else ""
                )
                problems.append(f"entry {gone} is missing before entry {entry.seq}")
            else:
                problems.append(f"entry {entry.seq} is out of order (after {expected_seq - 1})")
        if entry.prev_hash != prev:
            problems.append(f"entry {entry.seq} does not follow the entry before it (prev_hash)")
        if recomputed_hash(entry) != entry.hash:
            problems.append(f"entry {entry.seq} ({entry.action}) was changed after it was written")
        expected_seq, prev = entry.seq + 1, entry.hash
    return problems


# --- what each action writes ------------------------------------------------------


TIMER_DOOR = "timer"
"""The door of a request's timeout: an answer the timer delivers is ``request_timed_out``."""


def delivered(
    run_id: str, items: Sequence[tuple[str, str | None, bytes]], actor: Actor
) -> list[Recorded]:
    """The record of a delivery: one ``request_answered`` (or ``_timed_out``), ``message_sent``.

    The answer is kept as plain JSON, as it was typed (the serializer's
    tags taken off), so the record reads without the workflow's code.
    """
    records: list[Recorded] = []
    for kind, target, payload in items:
        if kind == "answer" and actor.door == TIMER_DOOR:
            records.append(Recorded(run_id, "request_timed_out", actor, {"request_id": target}))
        elif kind == "answer":
            detail = {"request_id": target, "answer": plain(payload)}
            records.append(Recorded(run_id, "request_answered", actor, detail))
        elif kind == "message" or kind.startswith("message:"):
            # The policy it meets a running turn with (``message:enqueue``; a bare kind: reject).
            policy = kind.partition(":")[2] or "reject"
            detail = {"target": target, "message": plain(payload), "policy": policy}
            records.append(Recorded(run_id, "message_sent", actor, detail))
        elif kind == "start":
            records.append(Recorded(run_id, "run_created", actor, {"input": plain(payload)}))
    return records


def debounced(run_id: str, payload: bytes, actor: Actor) -> Recorded:
    """The record of a start that joined a debounced run waiting for its key: ``start_debounced``.

    The run goes on with this start's input (the last one wins), so the
    record says who gave it, and what, beside the ``run_created`` of the
    start that made the run.
    """
    return Recorded(run_id, "start_debounced", actor, {"input": plain(payload)})


def plain(payload: bytes) -> Any:
    """A stored value as plain JSON (tags taken off), or its text where it is not JSON."""
    data = bytes(payload)
    text = untagged_json(data)
    if text is None:
        return data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def refused(run_id: str, actor: Actor, kind: str, target: str | None, reason: str) -> Recorded:
    """The record of an inbox item its run's owner could not apply: ``inbox_refused``.

    An answer that does not fit its request (or a message nobody waits for)
    delivered without the check a workflow's code makes: it is taken out of
    the inbox, so the request can be answered again, and the record says why.
    """
    detail = {"kind": kind, "target": target, "reason": reason}
    return Recorded(run_id, "inbox_refused", actor, detail)


def started(run_id: str, started_by: str, parent: tuple[str, str] | None) -> Recorded:
    """The record of a new run (``run_created``), or of a fork (``run_forked``, ``parent``)."""
    actor = _actor_of(started_by)
    if parent is None:
        return Recorded(run_id, "run_created", actor, {})
    parent_run, checkpoint = parent
    detail = {"parent_run_id": parent_run, "parent_checkpoint_id": checkpoint}
    return Recorded(run_id, "run_forked", actor, detail)


def paused(run_id: str, actor: Actor, step: str) -> Recorded:
    """The record of a pause: ``run_paused`` (``outcome``: paused now, or asked of its owner)."""
    outcome = "requested" if step == "request" else "paused"
    return Recorded(run_id, "run_paused", actor, {"outcome": outcome})


def unpaused(run_id: str, actor: Actor, step: str) -> Recorded:
    """The record of an unpause: ``run_unpaused`` (``withdrawn``: a pause asked was withdrawn)."""
    return Recorded(run_id, "run_unpaused", actor, {"withdrawn": step == "withdraw"})


def started_of(run: RunRecord) -> Recorded | None:
    """The record a new run's row calls for: ``run_created`` or ``run_forked`` (``None``: none).

    A run is recorded as started when its row says who started it
    (``started_by``); the runtime's own runs (a worker taking a queued run
    up, whose start the client recorded) say nobody.
    """
    if run.started_by is None:
        return None
    parent = (
        (run.parent_run_id, run.parent_checkpoint_id or "")
        if run.parent_run_id is not None
        else None
    )
    return started(run.run_id, run.started_by, parent)


def migrated(run_id: str, actor: Actor, version: int) -> Recorded:
    """The audit entry of a migration to ``version`` (``run_migrated``).

    Only the audit log gets it: the migrated checkpoint's own ``run_migrated``
    event, in the same transaction, is the run's log's, with the actor in it.
    """
    return Recorded(run_id, "run_migrated", actor, {"version": version}, logged=False)


def deleted(run_id: str, actor: Actor) -> Recorded:
    """The record of a delete: ``run_deleted``, kept in the audit log only (the run's log goes)."""
    return Recorded(run_id, "run_deleted", actor, {}, logged=False)


def pruned(run_id: str, actor: Actor, keep_last: int, removed: int) -> Recorded:
    """The record of a prune: ``run_pruned``, with how many checkpoints went."""
    return Recorded(run_id, "run_pruned", actor, {"keep_last": keep_last, "removed": removed})
