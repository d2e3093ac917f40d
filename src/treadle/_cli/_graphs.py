"""``treadle graph``: a workflow's graph as Mermaid or Graphviz source, or as a picture.

Workflows draw themselves as text (``to_mermaid``, ``to_dot``); a picture
(PNG, SVG) needs a renderer, and Graphviz's ``dot`` is the one most
machines can install from their package manager. So ``--format png|svg``
pipes the DOT source through ``dot`` when it is on ``PATH``, and otherwise
says what to install rather than only refusing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path  # noqa: TC003 - typer reads the annotation
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from treadle._cli._execute import execute_sync
from treadle._cli._help import command_set
from treadle._cli._views import out, print_graph
from treadle._exceptions import CommandError
from treadle._operations._inputs import load_workflow

if TYPE_CHECKING:
    from treadle._workflow._workflow import Workflow

cli = command_set()

FORMATS = ("mermaid", "dot", "png", "svg")
"""What ``--format`` takes: two sources, two pictures."""

_BY_SUFFIX = MappingProxyType(
    {
        ".mmd": "mermaid",
        ".mermaid": "mermaid",
        ".dot": "dot",
        ".gv": "dot",
        ".png": "png",
        ".svg": "svg",
    }
)

_INSTALL_DOT = (
    "install Graphviz, which provides it (Debian/Ubuntu: sudo apt-get install graphviz; "
    "macOS: brew install graphviz; others: https://graphviz.org/download/), "
    "or print the source with --format dot (or mermaid) and render it elsewhere"
)

_DOT_SECONDS = 60
"""How long ``dot`` may take to draw one workflow."""


def choose_format(fmt: str | None, output: Path | None) -> str:
    """``--format``, else the one ``-o``'s suffix names, else ``mermaid``.

    Raises:
        CommandError: The format is not one of :data:`FORMATS`.
    """
    if fmt is None:
        return _BY_SUFFIX.get(output.suffix.lower(), "mermaid") if output else "mermaid"
    if fmt not in FORMATS:
        msg = f"unknown format {fmt!r}; use {', '.join(FORMATS)}"
        raise CommandError(msg)
    return fmt


def draw(workflow: Workflow, fmt: str, output: Path | None) -> str | None:
    """The graph in ``fmt``: returned as text, or written to ``output`` (then ``None``).

    Raises:
        CommandError: A picture was asked for without ``-o`` (PNG) or
            without Graphviz's ``dot`` on ``PATH``, or ``dot`` failed.
    """
    if fmt in ("mermaid", "dot"):
        text = workflow.to_mermaid() if fmt == "mermaid" else workflow.to_dot()
        if output is None:
            return text
        output.write_text(text + "\n")
        return None
    if output is None and fmt == "png":
        msg = "--format png writes a picture to a file: add -o FILE.png"
        raise CommandError(msg)
    dot = shutil.which("dot")
    if dot is None:
        msg = f"--format {fmt} renders with Graphviz's `dot`, which is not on PATH: {_INSTALL_DOT}"
        raise CommandError(msg)
    command = [dot, f"-T{fmt}", *(("-o", str(output)) if output is not None else ())]
    try:
        drawn = subprocess.run(  # noqa: S603 - dot, found on PATH, with arguments of ours
            command,
            input=workflow.to_dot(),
            capture_output=True,
            text=True,
            timeout=_DOT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        msg = f"Graphviz's `dot` could not draw the graph: {error}"
        raise CommandError(msg) from error
    if drawn.returncode != 0:
        msg = f"Graphviz's `dot` could not draw the graph: {drawn.stderr.strip()}"
        raise CommandError(msg)
    return drawn.stdout if output is None else None


@cli.command()
def graph(
    workflow: Annotated[str, typer.Argument(help="pkg.module:workflow")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="mermaid, dot, or png / svg (drawn by Graphviz's dot)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write it to this file.")
    ] = None,
) -> None:
    """Print a workflow's graph for Mermaid or Graphviz, or draw it (-o graph.png)."""
    chosen = execute_sync(lambda: choose_format(fmt, output))
    loaded = execute_sync(lambda: load_workflow(workflow))
    drawn = execute_sync(lambda: draw(loaded, chosen, output))
    if drawn is not None:
        print_graph(drawn)
    else:
        out.print(f"wrote {escape(str(output))} ({chosen})")
