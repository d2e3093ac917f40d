"""Workflows written as definitions, in YAML or JSON (``pip install 'treadle[declarative]'``).

A definition names its steps (executors by import path, agents by name,
sub-workflows by file or name, built-in steps) and the edges between them;
``{{inputs.x}}``, ``{{state.x.y}}`` and ``{{nodes.n.output}}`` are lookups
into the run's data, and conditions are CEL expressions, checked when the
definition loads. A loaded definition is an ordinary :class:`~treadle.Workflow`::

    import treadle

    workflow = treadle.load("greet.yaml")           # every problem at once, or a Workflow
    result = workflow.run_sync({"text": "hello"})

Nothing that arrives in a run's inputs, state or messages is ever read as a
template or an expression. See ``docs/declarative.md``; the format's JSON
Schema is :func:`definition_schema` (``docs/workflow.schema.json``).

This module imports PyYAML, cel-python and pydantic; ``import treadle`` never does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle._extras import importing_extra
from treadle._public import publish

with importing_extra("treadle.declarative", "declarative"):
    from treadle._declarative._export import export, export_text
    from treadle._declarative._loader import load_text
    from treadle._declarative._schema import definition_schema

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._workflow._workflow import Workflow


def loads(
    text: str,
    *,
    agents: Mapping[str, Any] | None = None,
    workflows: Mapping[str, Workflow] | None = None,
    directory: str | Path | None = None,
    file: str = "<definition>",
) -> Workflow:
    """The workflow a definition's text (YAML or JSON) describes.

    Args:
        text: The definition.
        agents: Agents by the names ``agent:`` nodes use: pydantic-ai
            ``Agent`` objects (each becomes an ``AgentExecutor``), or
            executors used as they are.
        workflows: Built workflows by the names ``workflow:`` nodes use.
        directory: Where sub-workflow files and modules are found (default:
            the current directory).
        file: The name problems are reported under.

    Raises:
        treadle.errors.DefinitionError: listing every problem, each as
            ``file:line:column: message``.
    """
    where = Path(directory) if directory is not None else Path.cwd()
    return load_text(text, file=file, directory=where, agents=agents, workflows=workflows)


__all__ = ["definition_schema", "export", "export_text", "loads"]

publish(__name__, globals(), __all__)
