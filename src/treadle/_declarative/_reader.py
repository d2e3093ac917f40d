"""Reading a definition's text into plain data, remembering where every value was written.

YAML and JSON are read by one reader, PyYAML's composer (JSON is YAML), so
both report positions the same way. Each value's path from the root
(``("nodes", "shout", "executor")``) maps to its line and column, 1-based,
which is how every problem of a definition names its place.

Only the safe subset is read: mappings, sequences and scalars resolved by
the YAML core schema. Tags that would construct Python objects
(``!!python/object``) are refused, and so are anchors' aliases, which let a
small document expand into an enormous one. Nesting is bounded
(:data:`MAX_DEPTH`) as the text is read, so no input exhausts the stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]
"""Where a value sits in a definition: mapping keys and sequence indexes from the root."""

MAX_DEPTH = 64
"""How deeply mappings and lists may nest in a definition (deeper is a mistake, not a workflow)."""

_STANDARD_TAGS = frozenset(
    {
        "tag:yaml.org,2002:str",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:map",
        "tag:yaml.org,2002:seq",
    }
)


@dataclass(frozen=True, slots=True)
class Position:
    """A place in a definition's text: 1-based line and column."""

    line: int
    column: int


@dataclass(slots=True)
class ReadDefinition:
    """A definition's data and the position of each of its values."""

    data: Any
    positions: dict[Path, Position] = field(default_factory=dict)
    keys: dict[Path, Position] = field(default_factory=dict)  # where each mapping key was written

    def key_position(self, path: Path) -> Position:
        """Where the key of the mapping entry at ``path`` was written."""
        return self.keys.get(path) or self.position(path)

    def position(self, path: Path) -> Position:
        """Where ``path`` (or the closest value above it) was written."""
        for end in range(len(path), -1, -1):
            found = self.positions.get(path[:end])
            if found is not None:
                return found
        return Position(1, 1)


class ReadError(Exception):
    """The text is not a definition at all (not YAML or JSON), with where it broke."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


def read_text(text: str) -> ReadDefinition:
    """Parse YAML or JSON text into plain data with positions.

    Raises:
        ReadError: The text does not parse, nests deeper than :data:`MAX_DEPTH`,
            holds an alias or a non-standard tag, or a mapping repeats a key.
    """
    loader = yaml.SafeLoader(text)
    read = ReadDefinition(None)
    try:
        read.data = _Builder(loader, read).document()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)
        raise ReadError(f"not valid YAML or JSON: {error.problem or error}", where) from None
    except yaml.YAMLError as error:
        raise ReadError(f"not valid YAML or JSON: {error}", Position(1, 1)) from None
    finally:
        loader.dispose()
    return read


def _position(event: Any) -> Position:
    return Position(event.start_mark.line + 1, event.start_mark.column + 1)


@dataclass(slots=True)
class _Open:
    """A mapping or sequence being read: where it is, and the key waiting for its value."""

    value: dict[str, Any] | list[Any]
    path: Path
    key: str | None = None
    key_position: Position | None = None


class _Builder:
    """Plain values from the parser's events, one event at a time, never recursing.

    PyYAML's own composer recurses once per level of nesting, so a file of
    ten thousand ``[`` exhausts the interpreter's stack; its parser does
    not. Reading the events with an explicit stack of open collections
    bounds the depth as it is reached (:data:`MAX_DEPTH`), before the rest
    of the text is even scanned.
    """

    def __init__(self, loader: yaml.SafeLoader, read: ReadDefinition) -> None:
        self.loader: Any = loader  # PyYAML's parser and resolver methods are untyped
        self.positions = read.positions
        self.keys = read.keys
        self.constructor = yaml.constructor.SafeConstructor()
        self.open: list[_Open] = []

    def document(self) -> Any:
        """The one document's value (``None`` for an empty text)."""
        loader = self.loader
        loader.get_event()  # the stream's start
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # the document's start
        root = self.root()
        loader.get_event()  # the document's end
        if not loader.check_event(yaml.StreamEndEvent):
            extra = loader.get_event()
            msg = "a definition is one document (a second starts here)"
            raise ReadError(msg, _position(extra))
        return root

    def root(self) -> Any:
        """The document's root value, its collections filled event by event."""
        while True:
            event = self.loader.get_event()
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                done = self.open.pop()
                if not self.open:
                    return done.value
                continue
            top = self.open[-1] if self.open else None
            if top is not None and isinstance(top.value, dict) and top.key is None:
                self.key(top, event)
                continue
            value = self.value(top, event)
            if top is None and not isinstance(event, yaml.CollectionStartEvent):
                return value  # a document that is one scalar

    def key(self, top: _Open, event: yaml.Event) -> None:
        if not isinstance(event, yaml.ScalarEvent):
            self.refuse_alias(event)
            raise ReadError("a key must be a plain value", _position(event))
        name = event.value  # as written: `yes:` and `1:` are names, not True and 1
        if name in top.value:
            raise ReadError(f"the key {name!r} is written twice", _position(event))
        top.key, top.key_position = name, _position(event)
        self.keys[(*top.path, name)] = top.key_position

    def value(self, top: _Open | None, event: yaml.Event) -> Any:
        self.refuse_alias(event)
        if top is None:
            path: Path = ()
        elif isinstance(top.value, dict):
            assert top.key is not None  # noqa: S101 - a value follows its key
            path = (*top.path, top.key)
            if top.key_position is not None and not isinstance(event, yaml.ScalarEvent):
                self.positions[path] = top.key_position  # a block: point at its key
        else:
            path = (*top.path, len(top.value))
        self.positions.setdefault(path, _position(event))
        value = self.made(event, path)
        if top is not None and isinstance(top.value, dict):
            top.value[top.key or ""] = value
            top.key = top.key_position = None
        elif top is not None and isinstance(top.value, list):
            top.value.append(value)
        return value

    def made(self, event: yaml.Event, path: Path) -> Any:
        """A scalar's value, or a new empty collection (opened: its items follow)."""
        if isinstance(event, yaml.ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
            self.check_tag(tag, event)
            node = yaml.ScalarNode(tag, event.value)
            return self.constructor.construct_object(node, deep=True)
        if not isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            raise ReadError("not valid YAML or JSON", _position(event))  # pragma: no cover
        mapping = isinstance(event, yaml.MappingStartEvent)
        tag = event.tag
        if tag is None or tag == "!":
            kind = yaml.MappingNode if mapping else yaml.SequenceNode
            tag = self.loader.resolve(kind, None, event.implicit)
        self.check_tag(tag, event)
        if len(self.open) >= MAX_DEPTH:
            msg = f"the definition nests more than {MAX_DEPTH} levels deep"
            raise ReadError(msg, _position(event))
        made: dict[str, Any] | list[Any] = {} if mapping else []
        self.open.append(_Open(made, path))
        return made

    @staticmethod
    def check_tag(tag: str, event: yaml.Event) -> None:
        if tag not in _STANDARD_TAGS:
            raise ReadError(f"the tag {tag!r} is not allowed in a definition", _position(event))

    @staticmethod
    def refuse_alias(event: yaml.Event) -> None:
        if isinstance(event, yaml.AliasEvent):
            msg = "anchors and aliases (&name, *name) are not allowed in a definition"
            raise ReadError(msg, _position(event))
