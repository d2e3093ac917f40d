"""The audit log as ``treadle audit`` reads and checks it.

The store keeps every action taken on a run in a hash-chained log
(:mod:`treadle._stores._audit`), also after the run is deleted.
:func:`verify` checks it two ways: the chain itself (an edited entry no
longer matches its hash, a removed or reordered one breaks the chain), and
each action a run's log records against the entry it names (an entry cut
from the end of the chain, which leaves no gap behind, is missing there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._operations._commands import get_run
from treadle._operations._shapes import iso_time
from treadle._stores._audit import chain_problems

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from treadle._stores._audit import AuditEntry
    from treadle._stores._store import AuditLog, Store

_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Verified:
    """What :func:`verify` found.

    Attributes:
        entries: How many entries the audit log holds.
        problems: One line per problem (empty: the log holds).
    """

    entries: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        """As ``treadle audit --verify --json`` prints it."""
        return {"entries": self.entries, "ok": self.ok, "problems": self.problems}


async def run_pages(store: Store, run_id: str) -> AsyncIterator[list[AuditEntry]]:
    """The audit entries of the run ``run_id`` names, oldest first, a page at a time.

    By its id, also once the run is deleted (its entries stay); else by a
    prefix of a stored run's id, as every command takes one.

    Raises:
        CommandError: no entry has that id and no run that id or prefix
            (naming the store), or several runs share the prefix.
    """
    if not await store.read_audit(run_id, after=0, limit=1):
        run_id = (await get_run(store, run_id)).run_id
    async for page in pages(store, run_id):
        yield page


async def entries(store: AuditLog, run_id: str | None = None) -> list[AuditEntry]:
    """Every audit entry (of ``run_id``, if given), oldest first."""
    return [entry async for page in pages(store, run_id) for entry in page]


async def pages(store: AuditLog, run_id: str | None = None) -> AsyncIterator[list[AuditEntry]]:
    """Every audit entry (of ``run_id``, if given), oldest first, :data:`_PAGE` at a time.

    The log only grows: a command printing it holds one page, not the whole.
    """
    after = 0
    while True:
        page = await store.read_audit(run_id, after=after, limit=_PAGE)
        if page:
            yield page
            after = page[-1].seq
        if len(page) < _PAGE:
            return


async def verify(store: Store) -> Verified:
    """Check the whole chain, and every run's logged actions against it."""
    chain = await entries(store)
    problems = chain_problems(chain)
    by_seq = {entry.seq: entry for entry in chain}
    before = None
    while True:
        runs = await store.list_runs(limit=_PAGE, before=before)
        for run in runs:
            for event in await store.read_events(run.run_id):
                named = event.data.get("audit") if "actor" in event.data else None
                if not isinstance(named, dict):
                    continue
                entry = by_seq.get(named.get("seq", -1))
                if entry is None or entry.hash != named.get("hash"):
                    problems.append(
                        f"run {run.run_id!r} logged {event.kind} (event {event.seq}) as audit "
                        f"entry {named.get('seq')}, which the audit log no longer holds as written"
                    )
        if len(runs) < _PAGE:
            break
        before = (runs[-1].created_at, runs[-1].run_id)
    return Verified(len(chain), problems)


# --- how the record reads to a person ---------------------------------------------

_DONE = MappingProxyType(
    {
        "run_created": "started the run",
        "start_debounced": "gave the waiting run its input (debounce)",
        "run_forked": "forked this run",
        "message_sent": "sent a message",
        "run_cancelled": "cancelled the run",
        "run_paused": "paused the run",
        "run_unpaused": "unpaused the run",
        "run_resumed": "resumed the run",
        "run_migrated": "migrated the run",
        "run_pruned": "pruned the run's checkpoints",
        "run_deleted": "deleted the run",
    }
)


def action_sentence(kind: str, data: dict[str, Any], at: float) -> str | None:
    """An action of the record as a person reads it: ``maria approved at 10:02 (page)``.

    ``None`` for an event that is no action (the run's own). The time is
    this machine's local time, hours and minutes, as on a wall clock; a
    yes/no answer (or one whose ``approved``/``ok`` field is) reads as
    approved or rejected, any other as answered.
    """
    actor = data.get("actor")
    if kind == "request_timed_out":
        return f"request {data.get('request_id')} timed out at {_clock(at)}"
    if not isinstance(actor, dict) or not actor.get("label"):
        return None
    who, door = actor["label"], actor.get("door", "?")
    if kind == "request_answered":
        did = _verdict(data.get("answer")) or f"answered {data.get('request_id')}"
    elif kind == "run_paused" and data.get("outcome") == "requested":
        did = "asked the run to pause"
    elif kind == "inbox_refused":
        what = (
            f"the answer to {data.get('target')}" if data.get("kind") == "answer" else "a message"
        )
        did = f"refused {what} ({data.get('reason')})"
    else:
        did = _DONE.get(kind, kind.replace("_", " "))
    return f"{who} {did} at {_clock(at)} ({door})"


def _verdict(answer: Any) -> str | None:
    if isinstance(answer, dict):
        for key in ("approved", "approve", "ok", "accepted"):
            if isinstance(answer.get(key), bool):
                answer = answer[key]
                break
    if isinstance(answer, bool):
        return "approved" if answer else "rejected"
    return None


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().strftime("%H:%M")


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    """An entry as ``treadle audit --json`` prints it: its fields, ``at`` in ISO 8601."""
    return {**entry.to_json(), "at": iso_time(entry.at), "said": audit_line(entry)}


def audit_line(entry: AuditEntry) -> str:
    """An entry on one line: its seq, run, and what was done by whom."""
    said = action_sentence(entry.action, {**entry.detail, "actor": entry.actor}, entry.at)
    return f"#{entry.seq} {iso_time(entry.at, timespec='seconds')} run {entry.run_id}: {said}"
