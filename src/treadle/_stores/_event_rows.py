"""How a SQLite store writes a row of a run's event log: short codes, and no field said twice.

A row written as the log's JSON (:mod:`treadle._stores._sql_events`) spells
every event in full, ``[superstep, kind, executor_id, at, data]``: the
kind's name, the superstep and time every event of a commit shares, ``null``
for a run's own events, the names of the data's fields. A parked run's two
rows are 800 bytes of it, a third of what the run costs its store, and
deflating them (:mod:`treadle._stores._event_packing`) costs about as much
CPU as a tenth of the commit. So SQLite writes a row as a JSON array of
its own, *layout 2* (:func:`short_text`)::

    [2, superstep, at, event, event, ...]

where each ``event`` is an array ``[code, data..., executor_id, at, superstep]``:

- ``code`` is a number of :data:`_CODES` (a kind, and maybe the shape of
  its data), or the kind's name for a kind the table lacks;
- the data follows: for a code with a shape, the values of its fields in
  order (``[12, "waiting"]`` is ``status_changed``, ``{"status": "waiting",
  "error": null}``); otherwise the data object, left out when it is ``{}``;
- then the executor's id, the time and the superstep, each left out from
  the end while it is the default: ``null`` for the executor, and the time
  and superstep of the event before (the row's own, for its first).

A shape is used only where the data's text is exactly what the shape writes
(its fields in its order, strings without escapes, integers): every other
text keeps its object, so any event reads back as it was given, field order
and all. :func:`decoded` reads both layouts; :func:`log_text` turns a row
of layout 2 back into the log's JSON (what the webhooks' trigger reads).

The table is part of the file format: never change or reorder a code; add
new ones at the end.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._stores._events import EventEntry

LAYOUT = 2
"""The first item of a row of layout 2 (a row of the log's JSON starts with an event)."""

_HEAD: Final = "[2,"

# What a field of a shape holds, as the JSON text of the data spells it. A string
# holds no quote or backslash: its text is then its own JSON, whatever else it holds.
_STR, _INT, _STRS, _STR_OR_NULL = "str", "int", "strs", "str_or_null"
_UNESCAPED = r'"[^"\\]*"'
_PATTERNS: Final[Mapping[str, str]] = MappingProxyType(
    {
        _STR: _UNESCAPED,
        _INT: r"-?(?:0|[1-9][0-9]*)",
        _STRS: rf"\[(?:{_UNESCAPED}(?:,{_UNESCAPED})*)?\]",
        _STR_OR_NULL: rf"(?:{_UNESCAPED}|null)",
    }
)
_TYPES: Final[Mapping[str, type | tuple[type, ...]]] = MappingProxyType(
    {_STR: str, _INT: int, _STRS: list, _STR_OR_NULL: (str, type(None))}
)

_Spec = tuple[tuple[str, Any], ...]
"""A shape: its fields in order, each a kind of value above, a constant, or a nested shape."""


@dataclass(frozen=True, slots=True)
class _Constant:
    """A field a shape always holds with this value: not kept in the row."""

    value: Any


_ACTOR: _Spec = (
    *(("kind", _STR), ("name", _STR), ("label", _STR), ("door", _STR), ("role", _STR)),
    ("groups", _STRS),
)

# code -> (kind, shape or None: the data object as it is). Append only.
_CODES: tuple[tuple[str, _Spec | None], ...] = (
    ("run_started", None),  # 0
    (
        "run_started",
        (("resumed", _Constant(value=True)), ("from_status", _STR), ("by", _STR_OR_NULL)),
    ),
    ("superstep_started", None),
    ("superstep_started", (("executor_ids", _STRS),)),
    ("superstep_completed", None),
    ("executor_invoked", None),  # 5
    ("executor_invoked", (("position", _INT), ("attempt", _INT))),
    ("executor_completed", None),
    ("executor_completed", (("position", _INT),)),
    ("executor_suspended", None),
    ("checkpoint_saved", None),  # 10
    ("status_changed", None),
    ("status_changed", (("status", _STR), ("error", _Constant(value=None)))),
    ("run_created", None),
    ("run_created", (("actor", _ACTOR), ("audit", (("seq", _INT), ("hash", _STR))))),
    ("executor_failed", None),  # 15
    ("executor_resumed", None),
    ("output", None),
    ("request", None),
    ("request_answered", None),
    ("request_timed_out", None),  # 20
    ("message_sent", None),
    ("progress", None),
    ("custom", None),
    ("limit_slowed", None),
    ("run_forked", None),  # 25
    ("run_paused", None),
    ("run_unpaused", None),
    ("run_resumed", None),
    ("run_cancelled", None),
    ("run_pruned", None),  # 30
    ("run_migrated", None),
    ("inbox_refused", None),
)

# The data of most shaped events repeats from run to run (a superstep's executors, an
# invocation's position and attempt, a status), and each text is matched once (a memo);
# a start's ends in its audit entry, new every time, matched on its own after its actor.
# No shape is given to data whose text is nearly all new every time (a checkpoint's id,
# a timer's key): matching it in Python costs 5,000 to 7,000 instructions an event, more
# than the 20 to 30 bytes it would save are worth on the path of every commit.
_NEW_EVERY_TIME: Final = frozenset(("run_created",))


def _fields(spec: _Spec) -> list[str]:
    """The regular expressions of a shape's fields, ``"name":value``, a group per value kept."""
    fields = []
    for name, part in spec:
        key = re.escape(encode_basestring(name)) + ":"
        if isinstance(part, _Constant):
            fields.append(key + re.escape(json.dumps(part.value)))
        elif isinstance(part, tuple):
            fields.append(key + r"\{" + ",".join(_fields(part)) + r"\}")
        else:
            fields.append(f"{key}({_PATTERNS[part]})")
    return fields


def _build(spec: _Spec, values: Sequence[Any], at: int) -> tuple[dict[str, Any], int]:
    """The data a shape's values from ``at`` on stand for, and where its values end."""
    data: dict[str, Any] = {}
    for name, part in spec:
        if isinstance(part, _Constant):
            data[name] = part.value
        elif isinstance(part, tuple):
            data[name], at = _build(part, values, at)
        else:
            value = values[at]
            if not isinstance(value, _TYPES[part]):
                raise ValueError(f"{name!r} holds {value!r}")  # noqa: TRY004 - a bad row
            data[name] = value
            at += 1
    return data, at


_Encode = Callable[[str], str | None]
"""A shape's encoder: the head of an event whose data is this text (``None``: not its shape)."""


def _matching(head: str, pattern: str) -> _Encode:
    """The encoder of a shape: the data's text matched whole."""
    match = re.compile(pattern).fullmatch

    def encode(data: str) -> str | None:
        found = match(data)
        return None if found is None else ",".join((head, *found.groups()))

    return encode


def _split(head: str, spec: _Spec) -> _Encode:
    """The encoder of a shape of several fields whose last is new in every event."""
    name = spec[-1][0]
    fields = _fields(spec)
    known = functools.lru_cache(maxsize=256)(_matching(head, r"\{" + ",".join(fields[:-1])))
    starts = "," + encode_basestring(name) + ":"
    rest = re.compile("," + fields[-1] + r"\}").fullmatch

    def encode(data: str) -> str | None:
        at = data.rfind(starts)
        front = known(data[:at]) if at > 0 else None
        found = None if front is None else rest(data, at)
        return None if front is None or found is None else ",".join((front, *found.groups()))

    return encode


def _encoders() -> Mapping[str, _Encode]:
    encoders: dict[str, _Encode] = {}
    for code, (kind, spec) in enumerate(_CODES):
        if spec is None:
            continue
        if kind in _NEW_EVERY_TIME:
            encoders[kind] = _split(f"[{code}", spec)
        else:
            whole = r"\{" + ",".join(_fields(spec)) + r"\}"
            encoders[kind] = functools.lru_cache(maxsize=256)(_matching(f"[{code}", whole))
    return encoders


_ENCODERS: Final = _encoders()
"""Each kind that has a shape: its encoder."""

_PLAIN: Final[Mapping[str, str]] = {
    kind: f"[{code}" for code, (kind, spec) in enumerate(_CODES) if spec is None
}
"""Each kind in the table: the head of its events that keep their data object."""

_quoted: Final = encode_basestring


def short_text(entries: Sequence[EventEntry]) -> str:
    """The row of layout 2 that holds ``entries`` (each ``data`` JSON text of an object)."""
    superstep, _, _, at, _ = entries[0]
    shown = repr(at)
    parts = [f"[2,{superstep},{shown}"]
    append = parts.append
    for step, kind, executor_id, when, data in entries:
        head = _PLAIN.get(kind) or "[" + _quoted(kind)
        bare = data == "{}"  # its data left out: ``{}`` in its place if anything follows
        if not bare:
            encode = _ENCODERS.get(kind)
            shaped = None if encode is None else encode(data)
            head = head + "," + data if shaped is None else shaped
        time = repr(when)
        if step == superstep and time == shown:
            if executor_id is None:
                append(head + "]")
            else:
                append(f"{head}{',{}' if bare else ''},{_executor(executor_id)}]")
            continue
        executor = "null" if executor_id is None else _executor(executor_id)
        if bare:
            head += ",{}"
        if step != superstep:
            append(f"{head},{executor},{time},{step}]")
        else:
            append(f"{head},{executor},{time}]")
        superstep, shown = step, time
    return ",".join(parts) + "]"


# Executor ids repeat in every superstep of every run: each is quoted once.
_executor: Final = functools.lru_cache(maxsize=4096)(encode_basestring)


def is_layout_2(text: str) -> bool:
    """Whether ``text`` is a row of layout 2 (else it is the log's JSON)."""
    return text.startswith(_HEAD)


def decoded(text: str) -> list[tuple[int, str, str | None, float, dict[str, Any]]]:
    """The events of a row of layout 2, each ``(superstep, kind, executor_id, at, data)``.

    Raises:
        ValueError: ``text`` is not a row of layout 2 (a bad disk, a hand edit).
    """
    row = json.loads(text)
    if type(row) is not list or len(row) < 4 or row[0] != LAYOUT:  # noqa: PLR2004 - head, one event
        raise ValueError("not a row of layout 2")
    _, superstep, at, *items = row
    events = []
    try:
        for item in items:
            code = item[0]
            if type(code) is str:
                kind, spec = code, None
            elif type(code) is int and 0 <= code < len(_CODES):
                kind, spec = _CODES[code]
            else:
                raise ValueError(f"no event code {code!r}")
            if spec is None:
                data, end = (item[1] if len(item) > 1 else {}), 2
            else:
                data, end = _build(spec, item, 1)
            rest = item[end:]
            if len(rest) > 1:
                at = rest[1]
            if len(rest) > 2:  # noqa: PLR2004 - executor, at, superstep
                superstep = rest[2]
            if len(rest) > 3 or type(data) is not dict:  # noqa: PLR2004
                raise ValueError(f"not an event: {item!r}")
            events.append((superstep, kind, rest[0] if rest else None, at, data))
    except (IndexError, TypeError, KeyError) as error:
        raise ValueError(f"not a row of layout 2: {error}") from None
    return events


def log_text(text: str) -> str:
    """A row of layout 2 as the log's JSON, ``[[superstep, kind, executor_id, at, data], ...]``."""
    return json.dumps(decoded(text), separators=(",", ":"))
