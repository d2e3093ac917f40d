"""Reading a definition's text into plain data, remembering where every value was written.

YAML and JSON are read by one reader, PyYAML's composer (JSON is YAML), so
both report positions the same way. Each value's path from the root
(``("nodes", "shout", "executor")``) maps to its line and column, 1-based,
which is how every problem of a definition names its place.

Only the safe subset is read: mappings, sequences and scalars resolved by
the YAML core schema. Tags that would construct Python objects
(``!!python/object``) are refused, and so are anchors' aliases, which let a
small document expand into an enormous one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]
"""Where a value sits in a definition: mapping keys and sequence indexes from the root."""

_STANDARD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}


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
        ReadError: The text does not parse, holds an alias or a non-standard tag,
            or a mapping repeats a key.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)
        raise ReadError(f"not valid YAML or JSON: {error.problem or error}", where) from None
    except yaml.YAMLError as error:
        raise ReadError(f"not valid YAML or JSON: {error}", Position(1, 1)) from None
    read = ReadDefinition(None)
    if root is None:
        read.data = None
        return read
    read.data = _Composer(read.positions, read.keys).value(root, ())
    return read


def _position(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


class _Composer:
    """Turns composed nodes into plain values, recording the position of each."""

    def __init__(self, positions: dict[Path, Position], keys: dict[Path, Position]) -> None:
        self.positions = positions
        self.keys = keys
        self.seen: set[int] = set()
        self.constructor = yaml.constructor.SafeConstructor()

    def value(self, node: yaml.Node, path: Path) -> Any:
        """The plain value of ``node``, recording positions under ``path``."""
        self.positions.setdefault(path, _position(node))
        if id(node) in self.seen:  # the composer shares one node between an anchor and its aliases
            msg = "anchors and aliases (&name, *name) are not allowed in a definition"
            raise ReadError(msg, _position(node))
        if node.tag not in _STANDARD_TAGS:
            raise ReadError(f"the tag {node.tag!r} is not allowed in a definition", _position(node))
        if isinstance(node, yaml.MappingNode):
            self.seen.add(id(node))
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise ReadError("a key must be a plain value", _position(key_node))
                name = key_node.value  # as written: `yes:` and `1:` are names, not True and 1
                if name in result:
                    raise ReadError(f"the key {name!r} is written twice", _position(key_node))
                self.keys[(*path, name)] = _position(key_node)
                if not isinstance(value_node, yaml.ScalarNode):  # a block: point at its key
                    self.positions[(*path, name)] = _position(key_node)
                result[name] = self.value(value_node, (*path, name))
            return result
        if isinstance(node, yaml.SequenceNode):
            self.seen.add(id(node))
            return [self.value(item, (*path, i)) for i, item in enumerate(node.value)]
        return self.scalar(node)

    def scalar(self, node: yaml.Node) -> Any:
        """A scalar's value under the YAML core schema."""
        if not isinstance(node, yaml.ScalarNode):
            raise ReadError("a key must be a plain value", _position(node))
        if node.tag not in _STANDARD_TAGS:
            raise ReadError(f"the tag {node.tag!r} is not allowed in a definition", _position(node))
        return self.constructor.construct_object(node, deep=True)
