"""What a stored run reports, kept for its event log (see :mod:`treadle._stores._events`).

:class:`EventJournal` sits between the run loop and whoever listens (or
nobody): it passes every event on and keeps a plain-data copy, which the
:class:`~treadle._checkpoints._checkpointer.Checkpointer` hands to the store
with the checkpoint of the superstep the events belong to. So the log holds
what committed and nothing else: a superstep a crash interrupts is
re-planned, and reports again, with no trace of the attempt that died.

Two kinds of event are the checkpointer's to record, not the loop's: a
checkpoint being saved and the run's status moving. The loop announces
both after the commit that made them true, too late to travel with it, so
the journal drops the loop's and the checkpointer writes its own into the
same transaction (:meth:`EventJournal.take`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from treadle._engine._events import (
    CheckpointSaved,
    ExecutorCompleted,
    ExecutorInvoked,
    ExecutorSuspended,
    StatusChanged,
    SuperstepCompleted,
    SuperstepStarted,
    WorkflowEvent,
)
from treadle._stores._events import EventEntry
from treadle._values._text import message_of, storable, traceback_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from treadle._engine._barrier import EventSink
    from treadle._engine._clock import Clock
    from treadle._stores._live import LiveFeed

# The fields every event has, which the log keeps in columns of their own.
_COMMON = frozenset(("run_id", "superstep", "executor_id", "sequence", "at"))

# Announced after the commit that made them true: the checkpointer records its own.
_RECORDED_BY_CHECKPOINTER = (CheckpointSaved, StatusChanged)

_Found = TypeVar("_Found")


def _once_per_class(
    find: Callable[[type[WorkflowEvent]], _Found],
) -> Callable[[type[WorkflowEvent]], _Found]:
    """``find``, remembered for each event class: what it finds of a class never changes."""
    return cast("Callable[[type[WorkflowEvent]], _Found]", functools.cache(find))


_RUN_STARTED = "run_started"  # RunStarted's kind in the log

# Whether each event class goes into the log, found once per class.
_LOGGED, _OWN, _LIVE = 0, 1, 2
"""What the journal does with an event: log it; leave it to the checkpointer; not log it.

Ephemeral events (``_LIVE``) reach the run's live followers, in any process,
from the context that raised them, the moment they are raised
(:meth:`EventJournal.relay`).
"""


@_once_per_class  # what the journal does with each event class
def _handling(event_type: type[WorkflowEvent]) -> int:
    """Whether events of a class are logged, the checkpointer's, or ephemeral.

    A class that sets ``ephemeral = True`` (an agent's token deltas) reaches
    live listeners only: there are many, and the final message they add up
    to is what is kept.
    """
    if issubclass(event_type, _RECORDED_BY_CHECKPOINTER):
        return _OWN
    return _LIVE if event_type.ephemeral else _LOGGED


@_once_per_class
def kind_of(event_type: type[WorkflowEvent]) -> str:
    """An event class's name in the log: ``ExecutorFailed`` -> ``executor_failed``.

    ``RequestEvent`` and ``OutputEvent`` drop their suffix (``request``,
    ``output``), as does ``CustomEvent`` (``custom``), and so every class
    named ``...Event``.
    """
    name = event_type.__name__.removesuffix("Event") or event_type.__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def error_data(error: BaseException | None) -> dict[str, Any] | None:
    """An exception as plain data: its type, message and full traceback (with causes).

    An error that says all there is in its message keeps an empty
    traceback (see :func:`~treadle._values._text.traceback_of`).
    """
    if error is None:
        return None
    return {
        "type": type(error).__name__,
        "message": message_of(error),
        "traceback": storable(traceback_of(error)),
    }


_REPR_LIMIT = 2000
"""Characters of a value's ``repr`` the log keeps when the value cannot be written as JSON."""


def _json(value: Any) -> str:
    """``value`` as JSON text: dataclasses, models, enums, ...; ``repr`` for anything else.

    pydantic-core's encoder, which is several times quicker than the standard
    library's on the small objects most events are; every stored run logs
    several events a superstep, so this is on its path. Imported here, so
    that ``import treadle`` loads no pydantic until a stored run logs.
    """
    from pydantic_core import to_json  # noqa: PLC0415 - see the docstring

    # A number that is not finite is written as the string JSON needs ("Infinity"):
    # the bare word is not JSON, and a store reading the log as JSON (its webhook
    # feed) would fail the commit that wrote it.
    return to_json(value, fallback=repr, inf_nan_mode="strings").decode()


def _unrepresentable(value: Any) -> dict[str, str]:
    """What the log keeps of a value that cannot be written as JSON (nested too deep, say)."""
    try:
        shown = repr(value)
    except Exception:  # noqa: BLE001 - a repr that raises: the type is all there is
        shown = f"<{type(value).__name__}>"
    return {"unrepresentable": shown[:_REPR_LIMIT]}


@_once_per_class  # each event class's own fields (not the common ones)
def _own_fields(event_type: type[WorkflowEvent]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(event_type) if f.name not in _COMMON)


_entry: Final = tuple.__new__  # EventEntry(*fields), for the entries of every superstep

# Executor and checkpoint ids as JSON strings, without an encoder's call: the
# standard library's own quoting, in C (non-ASCII kept, as pydantic-core's).
_quoted: Final = json.encoder.encode_basestring


def _ids(ids: tuple[str, ...]) -> str:
    return "[" + ",".join(map(_quoted, ids)) + "]"


# The events every superstep logs, written without a JSON encoder (they hold
# only numbers and executor ids, quoted as strings are).
_WRITTEN: Final[Mapping[type[WorkflowEvent], Callable[[Any], str]]] = MappingProxyType(
    {
        SuperstepStarted: lambda e: '{"executor_ids":' + _ids(e.executor_ids) + "}",
        SuperstepCompleted: lambda _: "{}",
        ExecutorInvoked: lambda e: f'{{"position":{e.position},"attempt":{e.attempt}}}',
        ExecutorCompleted: lambda e: f'{{"position":{e.position}}}',
        ExecutorSuspended: lambda e: (
            f'{{"position":{e.position},"wait":{_quoted(e.wait)},"key":{_quoted(e.key)}}}'
        ),
    }
)


def entry_of(event: WorkflowEvent, at: float) -> EventEntry:
    """One event as the log keeps it: its own fields as JSON, errors with their tracebacks.

    Never raises: what a run reports must not stop it. A field that cannot be
    written as JSON is kept as ``{"unrepresentable": "<its repr, cut short>"}``.
    """
    event_type = type(event)
    written = _WRITTEN.get(event_type)
    if written is not None:  # the named tuple made as its own __new__ makes it, without the call
        return _entry(
            EventEntry,
            (event.superstep, kind_of(event_type), event.executor_id, at, written(event)),
        )
    own = _own_fields(event_type)
    if not own:  # run_started, executor_resumed, ...: nothing but the common fields
        return _entry(
            EventEntry, (event.superstep, kind_of(event_type), event.executor_id, at, "{}")
        )
    data: dict[str, Any] = {}
    for name in own:
        value = getattr(event, name)
        data[name] = error_data(value) if isinstance(value, BaseException) else value
    try:
        text = _json(data)
    except Exception:  # noqa: BLE001 - see the docstring: field by field, then
        kept = {}
        for name, value in data.items():
            try:
                kept[name] = json.loads(_json(value))
            except Exception:  # noqa: BLE001
                kept[name] = _unrepresentable(value)
        text = _json(kept)
    return EventEntry(event.superstep, kind_of(type(event)), event.executor_id, at, text)


class EventJournal:
    """An event sink that keeps a stored run's events for its log, and passes each on.

    Args:
        inner: The caller's sink (``None``: nobody listens). Whether the
            run streams live, and its backpressure, are the inner sink's.
        clock: The run's clock, which stamps each event's ``at``.
        status: The run's status as stored before this process took it up
            (``None`` for a new run): a status is logged when it changes.
        superstep: The run's last committed superstep (0 for a new run).
        owner: The process taking a stored run up (``host:pid:tag``), if known.
        live: The store's feed of live events, where :meth:`relay` hands
            the run's token deltas and progress the moment they are raised.

    A stored run taken up again logs its ``run_started`` as what it is: data
    ``{"resumed": true, "from_status", "by"}`` (``from_status`` ``"running"``:
    taken over from an owner that stopped), so a log that a run went on in
    several processes shows one start and each resumption, not several starts.
    """

    __slots__ = (
        "_clock",
        "_feed",
        "_inner",
        "_kept",
        "_resumed",
        "_status",
        "_superstep",
        "backpressure",
        "live",
    )

    def __init__(
        self,
        inner: EventSink | None,
        clock: Clock,
        status: str | None = None,
        superstep: int = 0,
        owner: str | None = None,
        live: LiveFeed | None = None,
    ) -> None:
        self._inner = inner
        self._feed = live
        self._clock = clock
        # What _json writes for {"resumed": True, "from_status": status, "by": owner},
        # without its call: every woken run makes one.
        self._resumed = (
            None
            if status is None
            else '{"resumed":true,"from_status":'
            + _quoted(status)
            + ',"by":'
            + ("null" if owner is None else _quoted(owner))
            + "}"
        )
        self.live = inner.live if inner is not None else False
        self.backpressure: Callable[[], Awaitable[None]] | None = (
            inner.backpressure if inner is not None else None
        )
        # The log's entries of the events published since the last write, made as each
        # is published (its ``at`` is when): a take then only adds the checkpointer's.
        self._kept: list[EventEntry] = []
        self._status = status
        self._superstep = superstep

    def publish(self, event: WorkflowEvent) -> None:
        """Keep ``event`` for the next checkpoint (unless it is not the log's); pass it on."""
        if _handling(type(event)) == _LOGGED:
            at = event.at  # raised before its barrier and kept to it: when it was raised
            self._kept.append(entry_of(event, self._clock.now() if at is None else at))
        if self._inner is not None:
            self._inner.publish(event)

    def relay(self, event: WorkflowEvent) -> None:
        """Hand a live event to the run's followers in any process now (see ``_stores/_live``).

        Written as the log writes it, stamped by the run's clock; the feed
        queues it and returns, so a follower slow or gone costs the run
        nothing but this encoding.
        """
        if self._feed is not None:
            self._feed.publish(event.run_id, entry_of(event, self._clock.now()))

    def take(
        self,
        superstep: int,
        status: str,
        checkpoint_id: str | None,
        error: str | None = None,
        *,
        outcome: tuple[str, str | None] | None = None,
    ) -> tuple[EventEntry, ...]:
        """The events kept since the last call, then the checkpointer's own, for one write.

        ``checkpoint_id`` is the checkpoint being written (``None``: a status
        recorded without one); a ``status_changed`` entry follows when
        ``status`` differs from the last one logged, with the run's
        ``outcome`` and ``outcome_summary`` when it has one (``ctx.set_outcome``),
        so a reader of the log alone sees how a run ended.
        """
        entries, self._kept = self._kept, []
        if self._resumed is not None:  # its run_started is kept before its first checkpoint
            entries = [self._resumption(entry) for entry in entries]
            self._resumed = None
        now = self._clock.now()
        if checkpoint_id is not None:
            data = f'{{"checkpoint_id":{_quoted(checkpoint_id)}}}'
            entries.append(EventEntry(superstep, "checkpoint_saved", None, now, data))
        if status != self._status:
            self._status = status
            if error is None and outcome is None:  # what _json writes, without its call
                data = f'{{"status":{_quoted(status)},"error":null}}'
            else:
                changed: dict[str, Any] = {"status": status, "error": error}
                if outcome is not None:
                    changed |= {"outcome": outcome[0], "outcome_summary": outcome[1]}
                data = _json(changed)
            entries.append(EventEntry(superstep, "status_changed", None, now, data))
        self._superstep = superstep
        return tuple(entries)

    def _resumption(self, entry: EventEntry) -> EventEntry:
        """A ``run_started`` of a stored run taken up again, as its resumption (else as is)."""
        if entry.kind != _RUN_STARTED or self._resumed is None:
            return entry
        return entry._replace(data=self._resumed)

    def failure_entries(self, status: str, error: str | None) -> tuple[EventEntry, ...]:
        """What a status recorded without a checkpoint (failed, cancelled) carries to the log.

        Its ``status_changed`` belongs to the superstep that failed (or was
        under way), with that superstep's events: the one after the last
        committed, which the run's own ``StatusChanged`` names instead.
        """
        superstep = max((entry.superstep for entry in self._kept), default=self._superstep)
        return self.take(superstep, status, None, error)
