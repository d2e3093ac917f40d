"""Safe serialization of checkpoint values: typed JSON over an allowlist of classes.

Values JSON represents unambiguously stay plain (``str``, ``int``, finite
``float``, ``bool``, ``None``, ``list``, ``dict`` with ``str`` keys). Anything
else becomes a tagged object whose ``"__t"`` key says how to rebuild it::

    {"__t": "tuple", "v": [1, "a"]}
    {"__t": "dict", "v": [[1, "one"]]}            # non-str keys, or a "__t" key
    {"__t": "datetime", "v": "2024-05-01T09:30:00", "z": "Europe/Paris"}
    {"__t": "dc", "n": "app.models.Doc", "v": {"owner": "ann"}}

Enums, dataclasses and pydantic models (``"enum"``, ``"dc"``, ``"model"``) are
stored under the name they were registered with in a :class:`TypeRegistry`.
Decoding resolves that name in the registry and nowhere else: stored data can
never make treadle import a module, evaluate text or unpickle bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import math
import pickle
import re
import sys
import typing
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any, ClassVar, Final, Protocol

from treadle._exceptions import SerializationError
from treadle._values._registry import TypeEntry, TypeRegistry, kind_of, loaded, of, qualified

TAG = "__t"
"""Key that marks a JSON object as a tagged value rather than a user dict."""

_PLAIN: frozenset[type] = frozenset({str, int, bool, type(None)})
_STR_ONLY: frozenset[type] = frozenset({str})
_MISSING: Any = object()
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
_Clock = typing.TypeVar("_Clock", dt.datetime, dt.time)
_NONFINITE = MappingProxyType({"nan": math.nan, "inf": math.inf, "-inf": -math.inf})


class Serializer(Protocol):
    """Turns checkpoint values into bytes and back: the port checkpoint stores use.

    ``name`` is meant to be recorded next to what a serializer writes, so data
    written by one serializer is never handed to another.
    """

    @property
    def name(self) -> str:
        """Stable identifier of the encoding, stored alongside the bytes."""
        ...

    def dumps(self, value: Any) -> bytes:
        """Encode ``value``; raise :class:`SerializationError` if it cannot be."""
        ...

    def loads(self, data: bytes) -> Any:
        """Decode ``data``; raise :class:`SerializationError` if it is not valid."""
        ...


class _UnsupportedError(Exception):
    """Raised inside the encoder; ``dumps`` turns it into a message with a path."""

    def __init__(self, value: Any, reason: str | None = None) -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason


def _clock_fields(value: dt.datetime | dt.time) -> dict[str, Any]:
    """Encode a datetime or time as naive ISO text plus its fold and time zone."""
    tz = value.tzinfo
    out: dict[str, Any] = {"v": value.replace(tzinfo=None).isoformat()}
    if value.fold:
        out["f"] = 1
    if tz is None:
        return out
    if type(tz) is dt.timezone:
        offset = tz.utcoffset(None)
        out["o"] = offset // dt.timedelta(microseconds=1)
        if tz.tzname(None) != dt.timezone(offset).tzname(None):
            out["tn"] = tz.tzname(None)
        return out
    zone_info = loaded("zoneinfo", "ZoneInfo")
    if zone_info is not None and type(tz) is zone_info and tz.key is not None:  # type: ignore[attr-defined]
        out["z"] = tz.key  # type: ignore[attr-defined]
        return out
    reason = f"its tzinfo {type(tz).__qualname__} is not a timezone or a named ZoneInfo"
    raise _UnsupportedError(value, reason)


def _clock(cls: type[_Clock], d: dict[str, Any]) -> _Clock:
    naive = cls.fromisoformat(of(str, d["v"]))
    return naive.replace(tzinfo=_tz_from(d), fold=1 if d.get("f") == 1 else 0)


def _tz_from(d: dict[str, Any]) -> dt.tzinfo | None:
    if "z" in d:
        key = of(str, d["z"])
        if len(key) > 255 or not _ZONE_KEY.fullmatch(key):  # noqa: PLR2004 - a path name limit
            raise SerializationError(f"invalid time zone key {key!r}")
        import zoneinfo  # noqa: PLC0415 - loaded only when stored data names a zone

        return zoneinfo.ZoneInfo(key)
    if "o" in d:
        offset = dt.timedelta(microseconds=of(int, d["o"]))
        return dt.timezone(offset) if "tn" not in d else dt.timezone(offset, of(str, d["tn"]))
    return None


_Encode = Callable[[Any], Any]


def _items(values: Any, enc: _Encode) -> list[Any]:
    return [x if type(x) in _PLAIN else enc(x) for x in values]


_BUILTIN_ENCODERS: Final[Mapping[type, Callable[[Any, _Encode], Any]]] = {
    tuple: lambda v, enc: {TAG: "tuple", "v": _items(v, enc)},
    set: lambda v, enc: {TAG: "set", "v": _items(v, enc)},
    frozenset: lambda v, enc: {TAG: "frozenset", "v": _items(v, enc)},
    bytes: lambda v, _: {TAG: "bytes", "v": base64.b64encode(v).decode("ascii")},
    bytearray: lambda v, _: {TAG: "bytearray", "v": base64.b64encode(v).decode("ascii")},
    dt.datetime: lambda v, _: {TAG: "datetime", **_clock_fields(v)},
    dt.date: lambda v, _: {TAG: "date", "v": v.isoformat()},
    dt.time: lambda v, _: {TAG: "time", **_clock_fields(v)},
    dt.timedelta: lambda v, _: {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]},
    Decimal: lambda v, _: {TAG: "decimal", "v": str(v)},
    uuid.UUID: lambda v, _: {TAG: "uuid", "v": str(v)},
}


def _b64(d: dict[str, Any]) -> bytes:
    return base64.b64decode(of(str, d["v"]), validate=True)


def _timedelta(d: dict[str, Any]) -> dt.timedelta:
    days, seconds, micros = (of(int, x) for x in of(list, d["v"]))
    return dt.timedelta(days=days, seconds=seconds, microseconds=micros)


_BUILTIN_DECODERS: Final[Mapping[str, Callable[[dict[str, Any]], Any]]] = {
    "float": lambda d: _NONFINITE[of(str, d["v"])],
    "tuple": lambda d: tuple(of(list, d["v"])),
    "set": lambda d: set(of(list, d["v"])),
    "frozenset": lambda d: frozenset(of(list, d["v"])),
    "dict": lambda d: dict(map(_pair, of(list, d["v"]))),
    "bytes": _b64,
    "bytearray": lambda d: bytearray(_b64(d)),
    "datetime": lambda d: _clock(dt.datetime, d),
    "date": lambda d: dt.date.fromisoformat(of(str, d["v"])),
    "time": lambda d: _clock(dt.time, d),
    "timedelta": _timedelta,
    "decimal": lambda d: Decimal(of(str, d["v"])),
    "uuid": lambda d: uuid.UUID(of(str, d["v"])),
}


def _pair(item: Any) -> tuple[Any, Any]:
    key, value = of(list, item)
    return key, value


class JsonSerializer:
    """The default serializer: typed JSON whose classes come only from a :class:`TypeRegistry`.

    Handles primitives (``nan`` and infinities included), ``list``, ``tuple``,
    ``dict`` with any keys, ``set``, ``frozenset``, ``bytes``, ``datetime``,
    ``date``, ``time`` (naive, ``datetime.timezone`` or ``zoneinfo.ZoneInfo``),
    ``timedelta``, ``Decimal``, ``UUID``, and registered enums, dataclasses and
    pydantic models. TypedDicts are dicts at runtime and round-trip as dicts.

    Dataclasses are rebuilt through their constructor (so fields added since with
    defaults still load), then fields with ``init=False`` are set as stored.
    Pydantic models are stored as ``model_dump(mode="json")`` and rebuilt with
    ``model_validate``, so their fields round-trip as pydantic's JSON mode does:
    as their annotations say (an aware datetime comes back with pydantic's
    fixed-offset tzinfo; a field typed ``Any`` gets JSON types back).
    """

    name: ClassVar[str] = "json"

    def __init__(self, registry: TypeRegistry | None = None) -> None:
        """Create a serializer resolving class names in ``registry`` (a new one if omitted)."""
        self.registry = registry if registry is not None else TypeRegistry()
        self._encode = _make_encoder(self.registry)
        self._hook = _make_hook(self.registry)
        # ``json.loads`` with a hook makes a decoder per call: a woken run decodes its frame.
        self._decoder = json.JSONDecoder(object_hook=self._hook, parse_constant=_refuse_constant)

    def dumps(self, value: Any) -> bytes:
        """Encode ``value`` as compact typed JSON.

        Raises:
            SerializationError: ``value`` holds something this serializer cannot
                store; the message names its type and where it sits in ``value``.
        """
        return dump_plain(self.to_json(value))

    def to_json(self, value: Any) -> Any:
        """``value`` as plain JSON data (tagged where JSON alone is ambiguous).

        :meth:`dumps` is ``to_json`` plus ``json.dumps``. Callers that embed
        user values in a document of their own (checkpoints) encode just the
        values with this and dump the document once; :meth:`loads` decodes
        the tags wherever they sit.

        Raises:
            SerializationError: as :meth:`dumps`.
        """
        try:
            return self._encode(value)
        except _UnsupportedError as exc:
            raise SerializationError(_unsupported_message(value, exc, self.registry)) from None
        except RecursionError:
            raise SerializationError("value is nested too deeply or contains a cycle") from None

    def loads(self, data: bytes) -> Any:
        """Decode bytes written by :meth:`dumps`.

        Raises:
            SerializationError: ``data`` is not valid typed JSON, or names a class
                the registry does not allow.
        """
        try:
            if type(data) is bytes:  # json.loads' own steps, with the decoder made once
                text = data.decode(json.detect_encoding(data), "surrogatepass")
                return self._decoder.decode(text)
            return json.loads(data, object_hook=self._hook, parse_constant=_refuse_constant)
        except SerializationError:
            raise
        except (ValueError, RecursionError) as exc:
            raise SerializationError(f"stored data is not valid treadle JSON: {exc}") from exc


def untagged_json(data: bytes) -> str | None:
    """Stored typed JSON as the plain JSON a person typed or reads: its tags taken off.

    A dataclass, model or enum shows as its fields or value, a tuple or set
    as an array, a date as its ISO text; no class is looked up, so this
    reads what any workflow stored. ``None``: ``data`` is not typed JSON
    (another serializer wrote it).
    """
    try:
        document = json.loads(data, object_hook=_untag, parse_constant=str)
    except (ValueError, RecursionError):
        return None
    return _READABLE.encode(document)


def _untag(d: dict[str, Any]) -> Any:
    kind = d.get(TAG, _MISSING)
    if kind is _MISSING or "v" not in d:
        return d
    value = d["v"]
    if kind == "dict" and isinstance(value, list):
        pairs = [pair for pair in value if isinstance(pair, list) and len(pair) == 2]  # noqa: PLR2004 - key and value
        return {k if isinstance(k, str) else _READABLE.encode(k): v for k, v in pairs}
    return value


# One encoder for every dump: json.dumps with options builds a new one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)
# For people to read (untagged_json): accents and NaN shown as they are.
_READABLE = json.JSONEncoder(separators=(",", ":"), check_circular=False, ensure_ascii=False)


def dump_plain(document: Any) -> bytes:
    """Plain JSON data (as :meth:`JsonSerializer.to_json` returns) as compact bytes.

    Written by pydantic-core's encoder, in about a third of the time of the
    standard library's: every checkpoint frame and piece of a stored run
    comes through here. Text outside ASCII is written as UTF-8, not escaped
    (JSON either way). What that encoder cannot write (a lone surrogate,
    which only an escape can carry) and what it writes that JSON has not
    (``NaN``, ``Infinity``, integers longer than Python reads back) is made
    again by the standard library's, as before: it escapes the one and
    refuses the others. So is any document as long as Python's limit of
    digits read back (``sys.get_int_max_str_digits``): only such a document
    can hold such an integer.

    Raises:
        SerializationError: ``document`` holds a float that is not finite,
            or an integer too long to write.
    """
    to_json = _plain_encoder()
    try:
        data = to_json(document)
    except ValueError:  # pydantic-core's errors are ValueErrors
        data = None
    digits = sys.get_int_max_str_digits()
    if data is None or (digits and len(data) >= digits) or b"NaN" in data or b"Infinity" in data:
        try:
            return _COMPACT.encode(document).encode("ascii")
        except ValueError as exc:  # a float that is not finite; ints beyond the digit limit
            raise SerializationError(f"cannot serialize value: {exc}") from exc
    return data


@functools.cache
def _plain_encoder() -> Callable[[Any], bytes]:
    """pydantic-core's ``to_json``, imported on first use: ``import treadle`` loads no pydantic."""
    from pydantic_core import to_json  # noqa: PLC0415 - see the docstring

    return to_json


def _refuse_constant(name: str) -> Any:
    raise SerializationError(f"stored data holds the bare JSON constant {name}")


def _make_encoder(registry: TypeRegistry) -> _Encode:
    by_class = registry.entries

    def encode(v: Any) -> Any:
        t = type(v)
        if t in _PLAIN:
            return v
        if t is list:
            return [x if type(x) in _PLAIN else encode(x) for x in v]
        if t is dict:
            return encode_dict(v)
        if t is float:
            return v if math.isfinite(v) else {TAG: "float", "v": repr(v)}
        builtin = _BUILTIN_ENCODERS.get(t)
        if builtin is not None:
            return builtin(v, encode)
        entry = by_class.get(t)
        if entry is None:
            raise _UnsupportedError(v)
        return encode_registered(v, entry)

    def encode_registered(v: Any, entry: TypeEntry) -> Any:
        try:
            if entry.kind == "enum":
                return {TAG: "enum", "n": entry.name, "v": encode(v.value)}
            if entry.kind == "dc":
                fields = {f: getattr(v, f) for f in entry.fields}
                return {TAG: "dc", "n": entry.name, "v": encode_dict(fields)}
            dumped = v.model_dump(mode="json", by_alias=True, round_trip=True)
        except (_UnsupportedError, RecursionError):
            raise
        except Exception as exc:  # unset fields, failing properties, pydantic's own errors
            raise _UnsupportedError(v, f"reading it failed: {exc!r}") from exc
        return {TAG: "model", "n": entry.name, "v": encode(dumped)}

    def encode_dict(d: dict[Any, Any]) -> Any:
        if TAG not in d and _STR_ONLY.issuperset(map(type, d)):
            return {k: x if type(x) in _PLAIN else encode(x) for k, x in d.items()}
        return {TAG: "dict", "v": [[encode(k), encode(x)] for k, x in d.items()]}

    return encode


def _make_hook(registry: TypeRegistry) -> Callable[[dict[str, Any]], Any]:
    def hook(d: dict[str, Any]) -> Any:
        kind = d.get(TAG, _MISSING)
        if kind is _MISSING:
            return d
        decode = _BUILTIN_DECODERS.get(kind) if type(kind) is str else None
        try:
            if decode is not None:
                return decode(d)
            if kind in ("enum", "dc", "model"):
                return registry.restore(kind, d)
        except SerializationError as exc:
            raise SerializationError(f"cannot restore a stored {kind!r} value: {exc}") from None
        except Exception as exc:  # constructors and validators may raise anything
            raise SerializationError(f"cannot restore a stored {kind!r} value: {exc!r}") from exc
        raise SerializationError(f"stored data has an unknown tag {kind!r}: foreign or newer data")

    return hook


def _unsupported_message(root: Any, exc: _UnsupportedError, registry: TypeRegistry) -> str:
    cls = type(exc.value)
    try:
        path = _locate(root, exc.value, registry)
    except RecursionError:
        path = None
    where = "" if path is None else " at value" + "".join(path)
    if exc.reason is not None:
        hint = exc.reason
    elif kind_of(cls) is not None:
        hint = (
            f"register it with WorkflowBuilder.register_type({cls.__qualname__}) "
            f"or name it in a handler annotation"
        )
    else:
        hint = (
            "the JSON serializer stores primitives, containers, bytes, datetimes, Decimal, "
            "UUID and registered enums, dataclasses and pydantic models; convert the value "
            "or opt into PickleSerializer"
        )
    return f"cannot serialize {qualified(cls)}{where}: {hint}"


def _locate(v: Any, target: Any, registry: TypeRegistry) -> list[str] | None:
    """Find ``target`` inside ``v`` in the encoder's order and return its path segments."""
    if v is target:
        return []
    t = type(v)
    children: Any = ()
    if t is dict:
        children = (c for k, x in v.items() for c in ((f"<key {k!r}>", k), (f"[{k!r}]", x)))
    elif t in (list, tuple):
        children = ((f"[{i}]", x) for i, x in enumerate(v))
    elif t in (set, frozenset):
        children = (("<set element>", x) for x in v)
    elif (entry := registry.entries.get(t)) is not None and entry.kind != "model":
        names = entry.fields if entry.kind == "dc" else ("value",)
        children = ((f".{name}", getattr(v, name)) for name in names)
    for segment, child in children:
        found = _locate(child, target, registry)
        if found is not None:
            return [segment, *found]
    return None


class PickleSerializer:
    """UNSAFE opt-in serializer that stores values with :mod:`pickle`.

    Unpickling runs code chosen by whoever wrote the bytes, so anyone able to
    write to the store (or to alter a backup) can run arbitrary code in every
    worker that resumes a run. Use it only when the store is trusted as much as
    the workers' own code, preferably with a sealing key so altered blobs are
    refused before they are unpickled. It exists for values the JSON serializer
    cannot express; treadle never selects it on its own.
    """

    name: ClassVar[str] = "pickle-unsafe"

    def __init__(self, protocol: int = pickle.HIGHEST_PROTOCOL) -> None:
        """Create a serializer writing the given pickle ``protocol``."""
        self.protocol = protocol

    def dumps(self, value: Any) -> bytes:
        """Pickle ``value``; raise :class:`SerializationError` if it cannot be pickled."""
        try:
            return pickle.dumps(value, protocol=self.protocol)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            raise SerializationError(f"cannot pickle value: {exc}") from exc

    def loads(self, data: bytes) -> Any:
        """Unpickle ``data``, running whatever code it names (see the class docstring)."""
        try:
            return pickle.loads(data)  # noqa: S301 - the user opted into this serializer
        except Exception as exc:  # a bad pickle can fail in any way
            raise SerializationError(f"cannot unpickle stored data: {exc!r}") from exc
