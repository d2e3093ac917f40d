"""Templates: ``{{inputs.x}}``, ``{{state.x.y}}``, ``{{nodes.n.output}}``, ``{{message}}``.

A template is a path lookup into data and nothing else: no filters, no
calls, no arithmetic, no attribute access on objects. Templates are found
once, when the definition loads, in the definition's own text; a value
they look up is inserted as it is and never read again for templates, so
text that arrives in a run's input, state or a node's output (``{{...}}``,
Jinja, CEL, Python) stays text.

A string that is exactly one template resolves to the looked-up value with
its type (``"{{inputs.count}}"`` gives an ``int``); templates inside a
longer string are replaced by their text (strings as they are, anything
else as JSON).

A path walks mappings by key and lists by index; through a dataclass or a
pydantic model it reads declared fields only (never an attribute that is
not a field, so nothing like ``__class__`` is reachable).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

ROOTS = ("inputs", "state", "nodes", "message")
"""The names a template path may start with."""

_SEGMENT = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_-]*|\d+)$")


class TemplateError(ValueError):
    """A template cannot be resolved (a missing key, a lookup into a non-container)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """One ``{{root.a.b}}``: a root and the keys or indexes below it."""

    root: str
    keys: tuple[str, ...]

    def __str__(self) -> str:
        return ".".join((self.root, *self.keys))


@dataclass(frozen=True, slots=True)
class Text:
    """A string with templates inside: literal pieces and lookups, in order."""

    parts: tuple[str | Lookup, ...]


Compiled = Any
"""A definition value with its templates compiled: a ``Lookup`` (a whole-string
template), a ``Text``, a dict or list of compiled values, or a plain value."""


def parse_lookup(source: str) -> Lookup:
    """The lookup a template's inside names (``" state.a.b "``).

    Raises:
        ValueError: It is not a dotted path starting with one of :data:`ROOTS`.
    """
    segments = source.strip().split(".")
    if not segments[0] or segments[0] not in ROOTS:
        roots = ", ".join(ROOTS)
        msg = f"the template {{{{{source}}}}} must start with one of {roots}"
        raise ValueError(msg)
    for segment in segments[1:]:
        if not _SEGMENT.match(segment):
            msg = (
                f"the template {{{{{source}}}}} is not a path: write keys (letters, digits, "
                f"_ and -) and list indexes joined by dots, nothing else"
            )
            raise ValueError(msg)
    return Lookup(segments[0], tuple(segments[1:]))


def compile_value(value: Any, problems: list[str]) -> Compiled:
    """``value`` (from the definition) with its templates parsed; problems appended."""
    if isinstance(value, str):
        return _compile_string(value, problems)
    if isinstance(value, dict):
        return {key: compile_value(item, problems) for key, item in value.items()}
    if isinstance(value, list):
        return [compile_value(item, problems) for item in value]
    return value


def _compile_string(text: str, problems: list[str]) -> Compiled:
    pieces: list[str | Lookup] = []
    end = 0
    for start, stop in template_spans(text):
        if start > end:
            pieces.append(text[end:start])
        try:
            pieces.append(parse_lookup(text[start + 2 : stop - 2]))
        except ValueError as error:
            problems.append(str(error))
            pieces.append(text[start:stop])
        end = stop
    if end < len(text):
        pieces.append(text[end:])
    if not any(isinstance(piece, Lookup) for piece in pieces):
        return text
    if len(pieces) == 1:
        return pieces[0]
    return Text(tuple(pieces))


def template_spans(text: str) -> list[tuple[int, int]]:
    """Where each ``{{...}}`` is in ``text``: from a ``{{`` to the first ``}}`` after it.

    Two ``str.find`` a template, and the search stops at the first ``{{``
    with no ``}}`` after it (none can close a later one either), so each
    character is scanned at most twice. The regex ``{{(.*?)}}`` it replaces
    found the same spans but scanned to the end of the text again for every
    unclosed ``{{``: 40 KB of them took 32 s to load.
    """
    spans: list[tuple[int, int]] = []
    position = 0
    while (start := text.find("{{", position)) >= 0:
        close = text.find("}}", start + 2)
        if close < 0:
            break
        position = close + 2
        spans.append((start, position))
    return spans


def lookups(compiled: Compiled) -> list[Lookup]:
    """Every lookup in a compiled value, in order."""
    if isinstance(compiled, Lookup):
        return [compiled]
    if isinstance(compiled, Text):
        return [piece for piece in compiled.parts if isinstance(piece, Lookup)]
    if isinstance(compiled, dict):
        return [found for item in compiled.values() for found in lookups(item)]
    if isinstance(compiled, list):
        return [found for item in compiled for found in lookups(item)]
    return []


def resolve(compiled: Compiled, root: Callable[[str], Any]) -> Any:
    """The value of a compiled template, ``root(name)`` giving each root's data.

    Raises:
        TemplateError: A lookup names a key or index that is not there.
    """
    if isinstance(compiled, Lookup):
        return walk(root(compiled.root), compiled)
    if isinstance(compiled, Text):
        return "".join(
            piece if isinstance(piece, str) else _text(walk(root(piece.root), piece))
            for piece in compiled.parts
        )
    if isinstance(compiled, dict):
        return {key: resolve(item, root) for key, item in compiled.items()}
    if isinstance(compiled, list):
        return [resolve(item, root) for item in compiled]
    return compiled


def walk(value: Any, lookup: Lookup) -> Any:
    """Follow ``lookup``'s keys down from ``value`` (the root's data).

    Raises:
        TemplateError: A key or index is not there.
    """
    for depth, key in enumerate(lookup.keys):
        value = _step(value, key, lookup, depth)
    return value


def _step(value: Any, key: str, lookup: Lookup, depth: int) -> Any:
    if isinstance(value, dict):
        if key in value:
            return value[key]
    elif isinstance(value, list | tuple):
        if key.isdigit() and int(key) < len(value):
            return value[int(key)]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        if key in {f.name for f in dataclasses.fields(value)}:
            return getattr(value, key)
    elif key in _model_fields(value):
        return getattr(value, key)
    where = ".".join((lookup.root, *lookup.keys[:depth]))  # made only for the error
    msg = f"{{{{{lookup}}}}}: {where} has no {key!r} (it is {_describe(value)})"
    raise TemplateError(msg)


def _model_fields(value: Any) -> Mapping[str, Any]:
    """A pydantic model's declared fields (read from its class, never the instance)."""
    fields = getattr(type(value), "model_fields", None)
    return fields if isinstance(fields, dict) else {}


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(repr(k) for k in list(value)[:10])
        return f"a mapping with keys {keys}" if keys else "an empty mapping"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)
