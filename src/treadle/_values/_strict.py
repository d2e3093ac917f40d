"""One rule for the JSON people and programs hand to runs: inputs, answers, edited tool calls.

A workflow's input (``treadle run --input``, ``POST /api/runs``, a
worker's queued start), the answer to a request (``treadle respond``, the
HTTP API, ``Workflow.respond``, the workers' client) and the arguments of an
edited tool call are all checked here, the same way (``docs/values.md``):

* as strict JSON: nothing is coerced. ``"12"`` is not a number, ``"yes"``
  not a boolean; a whole number is a ``float`` where a float is asked for.
  A type that wants a string read as a number says so itself, with a
  pydantic ``BeforeValidator`` on the field.
* a key the type has no field for is refused, naming it and the field it
  was perhaps meant to be, never dropped: validation alone would lose a
  misspelt field without a word.
* every problem is reported at once, each as ``loc: what is wrong``,
  separated by ``"; "`` (the HTTP API splits them back into fields); past
  :data:`MOST_PROBLEMS` of them, the rest are counted, not listed, so a
  value of a hundred thousand wrong keys is refused in a short message
  and bounded time.
* what is cheap is checked first: an array given for a type that takes
  none (a dataclass, a model, an enum) is refused as an array before any
  walk of its items (:mod:`treadle._values._json_kinds`), and whether a
  value is plain JSON is asked of the C encoder before a walk in Python
  names what is not. A 16 MiB array of five million items answering a
  request for an object was walked item by item, three times, first.

Session messages have no declared type: they reach the run as the JSON
they are.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Iterator
from itertools import chain, compress, repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from treadle._values._json_kinds import ARRAY, OBJECT, json_kind, kinds_refused
from treadle._values._places import LONGEST_SHOWN, WHOLE, Place, cut, inside, shown, where
from treadle._values._strict_json import is_plain_json
from treadle._values._text import lone_surrogate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from pydantic import TypeAdapter

MOST_PROBLEMS = 20
"""How many problems with a value are named; more are counted."""


def fit_type(cls: Any, value: Any) -> tuple[Any, list[str]]:
    """``value`` (JSON data) built as ``cls`` by the rule above, and the problems if it is not.

    Returns:
        The built value (``None`` when there are problems) and the problems,
        each ``loc: message`` (``[]``: it fits).
    """
    from pydantic import PydanticUserError  # noqa: PLC0415 - pydantic only when values arrive

    name = getattr(cls, "__qualname__", None) or repr(cls)
    try:
        adapter = _adapter(cls)
    except PydanticUserError:  # a class pydantic cannot build: only itself fits
        return None, [f"value: a {name} cannot be made from JSON"]
    refused = _refused_for_its_kind(cls, value)
    if refused:
        return None, refused
    schema = _schema(cls)
    return fit_schema(value, schema, lambda data: adapter.validate_json(data, strict=True))


_STAND_INS: Final[Mapping[str, bytes]] = MappingProxyType({ARRAY: b"[]", OBJECT: b"{}"})


def _refused_for_its_kind(cls: Any, value: Any) -> list[str]:
    """What pydantic says of ``value`` when ``cls`` refuses every value of its kind; else ``[]``.

    Said of a stand-in of that kind (``[]``, ``{}``), which is refused the
    same way whatever it holds: no item of ``value`` is looked at.
    """
    from pydantic import ValidationError  # noqa: PLC0415 - only when values arrive

    kind = json_kind(value)
    if kind is None or kind not in _kinds_refused(cls):
        return []
    try:
        _adapter(cls).validate_json(_STAND_INS[kind], strict=True)
    except ValidationError as error:
        errors = error.errors()
        if all(e["loc"] == () for e in errors):  # at its top, as kinds_refused has it
            return [f"{where(e['loc'])}: {e['msg']}" for e in errors]
    return []  # taken after all: the whole check decides


@functools.lru_cache(maxsize=256)
def _kinds_refused(cls: Any) -> frozenset[str]:
    """The JSON kinds ``cls`` refuses whatever they hold, kept as :func:`_schema` is.

    No kind when pydantic cannot finish its core schema (a name it cannot resolve):
    the whole check says what is wrong then.
    """
    from pydantic import PydanticUserError  # noqa: PLC0415 - pydantic only when values arrive

    try:
        return kinds_refused(_adapter(cls).core_schema)
    except PydanticUserError:
        return frozenset()


def fit_schema(
    value: Any, schema: dict[str, Any], validate_json: Callable[[bytes], Any]
) -> tuple[Any, list[str]]:
    """``value`` checked by the rule above with a validator of JSON text and its JSON schema.

    ``validate_json`` validates strictly (pydantic's ``strict=True``) and
    raises ``ValidationError``; ``schema`` is the JSON schema of the same
    type, read for the keys it has.
    """
    from pydantic import ValidationError  # noqa: PLC0415 - only when values arrive
    from pydantic_core import PydanticSerializationError, to_json  # noqa: PLC0415

    problems = not_json(value)
    if problems:  # made into JSON text, they would fail there, or be changed (a NaN)
        return None, _counted(problems)
    strangers, unknown = unknown_keys(value, schema)
    problems = [_unknown(*stranger) for stranger in strangers]
    built = None
    try:
        if unknown >= MOST_PROBLEMS:  # refused already, with as much as is shown
            return None, [*problems, *_more(unknown)]
        text = to_json(value)
        built = validate_json(text)
        if _HUGE_INTEGER.search(text):  # a float field may have made it inf: pydantic does
            problems += _past_a_float(built)
    except PydanticSerializationError as error:  # a value with no JSON form (bytes not UTF-8)
        # Or one nested past what pydantic writes: said where, as the reader's limit is.
        deep = "serialization depth" in str(error)
        problems.append(_too_deep(value) if deep else f"value: {error}")
    except ValidationError as error:
        problems += [
            _too_deep(value) if _parser_gave_up(e) else f"{where(e['loc'])}: {e['msg']}"
            for e in error.errors()
            if e["type"] != "extra_forbidden"  # named above, with what it may have meant
        ]
    return (None, _counted(problems)) if problems else (built, [])


_HUGE_INTEGER = re.compile(rb"(?<![0-9])[0-9]{309}")
"""A whole number of 309 digits or more: past what a float holds, if a float field reads it.

Tried only where a run of digits begins: tried at every digit, an answer of
308-digit numbers cost 308 steps a character (16 MB: 8.9 s, now 0.5 s).
"""


def _past_a_float(built: Any) -> list[str]:
    """Where a float of ``built`` is infinite: a whole number past a float, read as one.

    The JSON reader refuses such a number written with a point or an
    exponent (``_strict_json``); written whole, it reaches the type, and
    pydantic makes it ``inf`` for a ``float`` field: an answer nobody gave.
    Looked for only when the answer's text holds a number that long.
    """
    from pydantic_core import to_jsonable_python  # noqa: PLC0415 - only when values arrive

    found: list[str] = []
    # Each item with its container's place and its key: its own place is made only for
    # a container or an infinity (a location for each item cost 1.7 KB an item).
    stack: list[tuple[Place, Any, Any]] = [(WHOLE, None, to_jsonable_python(built))]
    while stack:
        place, key, item = stack.pop()
        if isinstance(item, float) and math.isinf(item):
            at = place if key is None else inside(place, key)
            found.append(f"{shown(at)}: a whole number past what a float holds")
        elif isinstance(item, dict | list | tuple):
            at = place if key is None else inside(place, key)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((at, inner_key, inner) for inner_key, inner in pairs)
    return sorted(found)


def _parser_gave_up(error: Any) -> bool:
    """Whether pydantic's JSON reader stopped at its depth bound (it calls the JSON invalid)."""
    return bool(error["type"] == "json_invalid" and "recursion limit" in str(error["msg"]))


_READER_DEPTH = 200
"""How deep pydantic's JSON reader reads arrays and objects in a field: one deeper, it gives up."""


def _too_deep(value: Any) -> str:
    """What is said of a value nested too deeply to be read: where its deepest part is.

    A field holding a part deeper than pydantic reads, looked for depth
    first (a chain of arrays is gone down at once, not walked level by
    level over the whole value: 16 MiB of chains 200 deep took 8 s); else
    the last field or item of ``value`` that holds a part as deep as any,
    found a level at a time by C iterators, each part's field kept beside
    it in a list of their own.
    """
    stack: list[tuple[Any, Any, int]] = []
    if isinstance(value, dict):
        stack = [(str(key), inner, 1) for key, inner in value.items()]
    elif isinstance(value, list | tuple):
        stack = [(index, inner, 1) for index, inner in enumerate(value)]
    while stack:
        at, part, depth = stack.pop()
        if not isinstance(part, dict | list | tuple):
            continue
        if depth > _READER_DEPTH:
            return f"{where((at,))}: nests arrays and objects too deeply to be checked"
        stack.extend((at, inner, depth + 1) for inner in _items(part))
    ats: list[int | str]
    if isinstance(value, dict):
        ats, parts = [str(key) for key in value], list(value.values())
    elif isinstance(value, list | tuple):
        ats, parts = list(range(len(value))), list(value)
    else:
        ats, parts = [], []
    deepest = tuple(ats[-1:])  # the last field is one deep, if there is one
    while parts:
        held = list(map(isinstance, parts, repeat(dict | list | tuple)))
        ats, parts = list(compress(ats, held)), list(compress(parts, held))
        if parts:  # an array or object at this level, empty or not: the last is deepest yet
            deepest = (ats[-1],)
        sizes = list(map(len, parts))  # those holding items go a level deeper
        ats, parts = list(compress(ats, sizes)), list(compress(parts, sizes))
        ats = list(chain.from_iterable(map(repeat, ats, filter(None, sizes))))
        parts = list(chain.from_iterable(map(_items, parts)))
    return f"{where(deepest)}: nests arrays and objects too deeply to be checked"


def _items(part: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Iterable[Any]:
    return part.values() if isinstance(part, dict) else part


def _more(unknown: int) -> list[str]:
    """How many more keys it has no place for than are named, if any."""
    more = unknown - MOST_PROBLEMS
    return [f"value: {more} more fields it has no place for"] if more > 0 else []


def _counted(problems: list[str]) -> list[str]:
    """The first :data:`MOST_PROBLEMS` problems, and how many more there are."""
    if len(problems) <= MOST_PROBLEMS + 1:
        return problems
    return [*problems[:MOST_PROBLEMS], f"value: {len(problems) - MOST_PROBLEMS} more problems"]


def not_json(value: Any) -> list[str]:
    """Where ``value`` holds what no JSON text can carry: each ``loc: what it is``.

    Text with a lone surrogate is no Unicode text (making it JSON fails),
    and a NaN or an infinity would be made ``null``, an answer nobody gave.
    Other Python values (a datetime, a UUID, bytes) go in their JSON form,
    as the type's own validator reads them. Asked of the C encoder first
    (:func:`is_plain_json`: JSON from any door is); else walked without
    recursion and each container once, so a value of any depth (or one
    holding itself) is answered, with a location made for each container
    and each problem, not for each item.
    """
    if is_plain_json(value):
        return []
    if not isinstance(value, dict | list | tuple | set | frozenset):
        problem = _scalar_problem(value)
        return [] if problem is None else [f"{where(())}: {problem}"]
    problems: list[str] = []
    stack: list[tuple[Place, Any]] = [(WHOLE, value)]
    seen: set[int] = set()  # a container met again (shared, or in a cycle) is walked once
    while stack:
        place, container = stack.pop()
        if id(container) in seen:
            continue  # a cycle is the serializer's to name, below
        seen.add(id(container))
        keyed = isinstance(container, dict)
        for key, inner in container.items() if keyed else enumerate(container):
            if keyed and isinstance(key, str) and lone_surrogate(key) is not None:
                problems.append(f"{shown(place)}: a key with a lone surrogate is not Unicode text")
            elif isinstance(inner, dict | list | tuple | set | frozenset):
                stack.append((inside(place, key), inner))
            elif isinstance(inner, str | float | Iterator) and (problem := _scalar_problem(inner)):
                problems.append(f"{shown(inside(place, key))}: {problem}")
    return sorted(problems)


def _scalar_problem(item: Any) -> str | None:
    """What no JSON text can carry of a value that is not an array or an object, if anything."""
    if isinstance(item, str) and lone_surrogate(item) is not None:
        return "text with a lone surrogate is not Unicode text"
    if isinstance(item, float) and not math.isfinite(item):
        return f"{item} is not a JSON number"
    if isinstance(item, Iterator):  # what it holds cannot be looked at without using it up
        return "an iterator is not an answer's value: give a list"
    return None


def unknown_keys(
    value: Any, schema: dict[str, Any]
) -> tuple[list[tuple[str, str, dict[str, Any]]], int]:
    """Keys of ``value`` the JSON schema has no property for: the first ones, and how many.

    The first :data:`MOST_PROBLEMS`, in the order of the value, each as its
    path (as shown), the key and the properties, named by :func:`_unknown`
    (with what it may have meant); and the count of all of them.

    An object whose schema allows other keys (``additionalProperties``
    true or a schema: a model with ``extra="allow"``, a mapping) is taken as
    it is, but the values of a mapping of objects, like the items of a
    list or a tuple of them, are looked into (their unknown keys were
    dropped). Walked without recursion (a self-referencing type's value
    of any depth is answered), each place made from its parent's: a path
    copied for each key below it cost a 0.3 MB answer 2 GB.
    """
    defs = schema.get("$defs", {})
    named: list[tuple[str, str, dict[str, Any]]] = []
    unknown = 0
    stack: list[tuple[Any, dict[str, Any], Place]] = [(value, schema, WHOLE)]
    while stack:
        item, node, place = stack.pop()
        node = _object_form(node, defs, item)  # an optional field, a union: its object form
        below: list[tuple[Any, Any, Any]]
        if isinstance(item, list | tuple | dict) and (inner := _inner_schemas(node, item)):
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            below = [(key, part, of) for key, part in pairs if (of := inner(key)) is not None]
        else:
            properties = node.get("properties")
            if not isinstance(item, dict) or not isinstance(properties, dict):
                continue
            if node.get("additionalProperties", False) is False:
                for key in item:
                    if key not in properties:
                        unknown += 1
                        if len(named) < MOST_PROBLEMS:
                            named.append((shown(inside(place, key), ""), str(key), properties))
            below = [
                (key, part, properties[key])
                for key, part in item.items()
                if key in properties and isinstance(properties[key], dict)
            ]
        # Popped in the value's order: depth first, as a recursive walk would go.
        stack.extend((part, of, inside(place, key)) for key, part, of in reversed(below))
    return named, unknown


def _inner_schemas(schema: dict[str, Any], value: Any) -> Callable[[Any], Any] | None:
    """The schema of each item of a list, tuple or mapping, by index or key, if any may hold keys.

    ``None`` for a model's own object (its fields are looked into by name),
    and where no item can be an object: a list of numbers is not walked.
    """
    if isinstance(value, dict):
        extra = schema.get("additionalProperties")
        if "properties" in schema or not isinstance(extra, dict) or not _may_hold_keys(extra):
            return None
        return lambda _: extra
    items, prefix = schema.get("items"), schema.get("prefixItems")
    if isinstance(prefix, list) and any(isinstance(s, dict) and _may_hold_keys(s) for s in prefix):
        rest = items if isinstance(items, dict) else None
        return lambda index: prefix[index] if index < len(prefix) else rest
    if isinstance(items, dict) and _may_hold_keys(items):
        return lambda _: items
    return None


def _may_hold_keys(schema: dict[str, Any]) -> bool:
    """Whether a value of this JSON schema may be an object with fields, or hold one."""
    return any(
        key in schema for key in ("$ref", "properties", "anyOf", "items", "prefixItems")
    ) or (isinstance(schema.get("additionalProperties"), dict))


def _unknown(loc: str, key: str, properties: dict[str, Any]) -> str:
    near = len(key) <= LONGEST_SHOWN  # a guess at a megabyte-long key costs seconds
    close = difflib.get_close_matches(key, list(properties), n=1) if near else []
    guess = f", did you mean {close[0]!r}?" if close else ""
    return f"{cut(loc)}: no such field (it has: {', '.join(properties) or 'none'}){guess}"


@functools.lru_cache(maxsize=256)
def _adapter(cls: Any) -> TypeAdapter[Any]:
    """Pydantic's adapter of a type, kept: building one costs far more than using it."""
    from pydantic import TypeAdapter  # noqa: PLC0415 - pydantic only when values arrive

    return TypeAdapter(cls)


@functools.lru_cache(maxsize=256)
def _schema(cls: Any) -> dict[str, Any]:
    """The JSON schema of a type pydantic builds, kept: pydantic makes it afresh when asked.

    Every run a worker starts has its input checked by it. ``{}`` when the
    type has none (buildable, but no keys to compare). Shared: only read.
    """
    from pydantic import PydanticUserError  # noqa: PLC0415 - pydantic only when values arrive

    try:
        return _adapter(cls).json_schema()
    except PydanticUserError:
        return {}


def _object_form(schema: dict[str, Any], defs: dict[str, Any], value: Any = None) -> dict[str, Any]:
    """A schema with its reference followed; of an optional object or a union, the object form.

    Of a union of objects, the one that has every key of ``value`` (the
    first otherwise named took an answer for another one of them as full
    of unknown keys); when none has them all, their keys together, so only
    a key none of them has is unknown.
    """
    options = [
        _followed(option, defs)
        for option in schema.get("anyOf", ())
        if isinstance(option, dict) and ("$ref" in option or "properties" in option)
    ]
    if not options:
        return _followed(schema, defs)
    if len(options) == 1 or not isinstance(value, dict):
        return options[0]
    for option in options:
        properties = option.get("properties")
        if isinstance(properties, dict) and all(key in properties for key in value):
            return option
    merged: dict[str, Any] = {}
    for option in options:
        merged.update(option.get("properties") or {})
    closed = all(option.get("additionalProperties", False) is False for option in options)
    return {"properties": merged, "additionalProperties": not closed}


def _followed(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or the definition its ``$ref`` names."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        found = defs.get(ref.rsplit("/", 1)[-1], {})
        return found if isinstance(found, dict) else {}
    return schema
