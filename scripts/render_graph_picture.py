"""Redraw ``docs/graph.png`` and its sources from ``examples/every_edge_kind.py``.

Writes ``docs/graph.mmd`` (``Workflow.to_mermaid``), ``docs/graph.dot``
(``Workflow.to_dot``) and ``docs/graph.png`` (the DOT drawn by Graphviz).
``tests/graph/test_render.py`` fails while the committed sources differ from
what the renderers give, so run this after changing either::

    make renderers && .venv/bin/python scripts/render_graph_picture.py
"""

# ruff: noqa: INP001 - a script run by path, not a module of a package

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from treadle import Workflow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "every_edge_kind.py"
DOCS = ROOT / "docs"
DPI = 110  # legible on a page without scaling; the file stays small


def load_workflow() -> Workflow:
    """The example's workflow (examples are scripts, not an importable package)."""
    spec = importlib.util.spec_from_file_location("every_edge_kind", EXAMPLE)
    if spec is None or spec.loader is None:
        msg = f"cannot load {EXAMPLE}"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    workflow: Workflow = module.workflow
    return workflow


def main() -> int:
    """Write the three files; 1 when Graphviz is missing."""
    dot = shutil.which("dot")
    if dot is None:
        sys.stderr.write("Graphviz's `dot` is not installed: run `make renderers` first\n")
        return 1
    workflow = load_workflow()
    source = workflow.to_dot()
    (DOCS / "graph.mmd").write_text(workflow.to_mermaid(), encoding="utf-8")
    (DOCS / "graph.dot").write_text(source, encoding="utf-8")
    picture = DOCS / "graph.png"
    subprocess.run(  # noqa: S603 - our own DOT text, to the dot found on PATH
        [dot, "-Tpng", f"-Gdpi={DPI}", "-o", str(picture)],
        input=source.encode(),
        check=True,
    )
    sys.stdout.write(f"wrote {picture.relative_to(ROOT)} and its .mmd and .dot sources\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
