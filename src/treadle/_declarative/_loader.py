"""Loading a definition: read it, check all of it, build it; or report every problem at once.

The checks run in one pass before anything runs: the text's syntax, the
shape of every part (the schema), then what needs the whole definition
(nodes that do not exist, import paths that import nothing, templates
naming keys that are not declared, expression syntax and names), then the
builder's own checks (types along edges...). Each problem is
``file:line:column: message``; all of them travel in one
:class:`~treadle.errors.DefinitionError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from treadle._declarative import _schema as schema
from treadle._declarative._reader import ReadDefinition, ReadError, read_text
from treadle._declarative._translate import Sources, Translation
from treadle._exceptions import DefinitionError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._declarative._reader import Path as Where
    from treadle._workflow._workflow import Workflow

_NODE: TypeAdapter[schema.Node] = TypeAdapter(schema.Node)
_EDGE: TypeAdapter[Any] = TypeAdapter(schema.EdgeSpec)
_TAGS = frozenset(
    {"direct", "fan_out", "fan_in", "switch", "handoff", "on_error", "case", "default"}
)
SUFFIXES = (".yaml", ".yml", ".json")
"""The file names a definition may have."""


class _Problems:
    """Every problem of one file, each at its place."""

    def __init__(self, file: str, read: ReadDefinition) -> None:
        self.file = file
        self.read = read
        self.found: list[tuple[int, int, str]] = []

    def add(self, where: Where, message: str, *, at_key: bool = False) -> None:
        position = self.read.key_position(where) if at_key else self.read.position(where)
        self.found.append((position.line, position.column, message))

    def raise_if_any(self) -> None:
        if self.found:
            ordered = sorted(dict.fromkeys(self.found))
            raise DefinitionError([f"{self.file}:{ln}:{col}: {msg}" for ln, col, msg in ordered])


def _path_in(data: Any, loc: tuple[int | str, ...]) -> tuple[Where, str | None]:
    """The data path a pydantic ``loc`` points at (tags dropped), and the key it lacks."""
    path: list[str | int] = []
    for part in loc:
        inside = (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and part < len(data)
        )
        if inside:
            data = data[part]
        elif part in _TAGS:
            continue
        else:
            return tuple(path), str(part)
        path.append(part)
    return tuple(path), None


def _schema_problems(data: Any, problems: _Problems) -> None:
    try:
        schema.Definition.model_validate(data)
    except ValidationError as error:
        for item in error.errors(include_url=False):
            path, missing = _path_in(data, tuple(item["loc"]))
            if item["type"] == "missing" and missing is not None:
                problems.add(path, f"missing {missing!r}")
            elif item["type"] == "extra_forbidden":
                problems.add(path, f"unknown key {path[-1]!r}", at_key=True)
            else:
                shown = ".".join(str(p) for p in path) or "the definition"
                problems.add(path, f"{shown}: {item['msg']}")


def _salvage(data: dict[str, Any]) -> tuple[schema.Definition, frozenset[str]]:
    """The valid parts of an invalid definition, so the later checks can run on them."""
    raw_nodes = data.get("nodes") if isinstance(data.get("nodes"), dict) else {}
    nodes: dict[str, schema.Node] = {}
    for node_id, body in (raw_nodes or {}).items():
        try:
            nodes[node_id] = _NODE.validate_python(body)
        except ValidationError:
            continue
    edges: list[Any] = []
    raw_edges = data.get("edges")
    for body in raw_edges if isinstance(raw_edges, list) else []:
        try:
            edges.append(_EDGE.validate_python(body))
        except ValidationError:
            edges.append(None)  # keeps the indexes of the others
    fields: dict[str, Any] = {}
    names = ("name", "version", "description", "start", "inputs", "types", "state", "limits")
    for name in (*names, "call_limits", "retry", "four_eyes", "search", "start_policy"):
        if name not in data:
            continue
        field = schema.Definition.model_fields[name]
        try:
            fields[name] = TypeAdapter(
                Any if field.annotation is None else field.annotation
            ).validate_python(data[name])
        except (ValidationError, TypeError):
            continue
    made = schema.Definition.model_construct(
        name=fields.get("name", "workflow"),
        version=fields.get("version", 1),
        description=fields.get("description"),
        start=fields.get("start", ""),
        inputs=fields.get("inputs", {}),
        types=fields.get("types", []),
        state=fields.get("state", {}),
        limits=fields.get("limits", schema.Limits()),
        call_limits=fields.get("call_limits", {}),
        retry=fields.get("retry"),
        four_eyes=bool(fields.get("four_eyes", False)),
        search=fields.get("search", {}),
        start_policy=fields.get("start_policy"),
        nodes=nodes,
        edges=edges,
    )
    return made, frozenset(str(n) for n in raw_nodes or {})


def load_text(
    text: str,
    *,
    file: str = "<definition>",
    directory: Path | None = None,
    agents: Mapping[str, Any] | None = None,
    workflows: Mapping[str, Workflow] | None = None,
    _loading: tuple[Path, ...] = (),
) -> Workflow:
    """The workflow a definition's text describes.

    Raises:
        DefinitionError: listing every problem as ``file:line:column: message``.
    """
    try:
        read = read_text(text)
    except ReadError as error:
        at = error.position
        raise DefinitionError([f"{file}:{at.line}:{at.column}: {error.message}"]) from None
    problems = _Problems(file, read)
    if not isinstance(read.data, dict):
        problems.add((), "a definition is a mapping (name, start, nodes, edges...)")
        problems.raise_if_any()
    data: dict[str, Any] = read.data
    _schema_problems(data, problems)
    definition, node_ids = _salvage(data)

    def load_file(path: Path) -> Workflow:
        resolved = path.resolve()
        if resolved in _loading:
            chain = " -> ".join(p.name for p in (*_loading, resolved))
            raise DefinitionError([f"{path}:1:1: sub-workflows include each other ({chain})"])
        return load_path(
            resolved, agents=agents, workflows=workflows, _loading=(*_loading, resolved)
        )

    sources = Sources(
        agents=agents or {}, workflows=workflows or {}, directory=directory, load_file=load_file
    )
    translation = Translation(definition, node_ids, sources, problems.add)
    translation.mistakes = len(problems.found)  # the schema's: parts were left out
    workflow = translation.workflow()
    problems.raise_if_any()
    if workflow is None:  # pragma: no cover - a refused build always reports why
        raise DefinitionError([f"{file}:1:1: the definition did not build"])
    return workflow


def load_path(
    path: str | Path,
    *,
    agents: Mapping[str, Any] | None = None,
    workflows: Mapping[str, Workflow] | None = None,
    _loading: tuple[Path, ...] = (),
) -> Workflow:
    """The workflow a definition file describes (its origin: the file's absolute path).

    Raises:
        DefinitionError: listing every problem; or naming a file that cannot be read.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DefinitionError([f"{file}:1:1: cannot read the definition: {error}"]) from None
    workflow = load_text(
        text,
        file=str(file),
        directory=file.resolve().parent,
        agents=agents,
        workflows=workflows,
        _loading=_loading or (file.resolve(),),
    )
    workflow.origin = str(file.resolve())
    return workflow
