"""``treadle.load``: light to import, it loads the declarative machinery only when called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._extras import importing_extra

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from treadle._workflow._workflow import Workflow


def load(
    path: str | Path,
    *,
    agents: Mapping[str, Any] | None = None,
    workflows: Mapping[str, Workflow] | None = None,
) -> Workflow:
    """The workflow a definition file (``.yaml``, ``.yml`` or ``.json``) describes.

    Every problem of the definition is found before anything runs and
    reported at once. Needs the ``declarative`` extra
    (``pip install 'treadle[declarative]'``); see ``docs/declarative.md``.

    Args:
        path: The definition file. Sub-workflow files it names are relative
            to its folder, and modules in that folder are importable.
        agents: Agents by the names its ``agent:`` nodes use: pydantic-ai
            ``Agent`` objects (each becomes an ``AgentExecutor`` with the
            node's ``session`` and ``approve_tools``), or executors used as
            they are.
        workflows: Built workflows by the names its ``workflow:`` nodes use.

    Raises:
        treadle.errors.DefinitionError: listing every problem, each as
            ``file:line:column: message``.
    """
    with importing_extra("treadle.load", "declarative"):
        from treadle._declarative._loader import load_path  # noqa: PLC0415 - yaml and CEL on demand

    return load_path(path, agents=agents, workflows=workflows)
