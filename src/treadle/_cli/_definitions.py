"""``treadle validate FILE...``: check declarative definitions without running anything.

Every problem of every file is printed, one a line, as
``file:line:column: message`` (the form editors and CI annotate), and the
command exits with 2; with none it prints one line per file and exits 0.
``treadle run FILE.yaml`` and ``treadle graph FILE.yaml`` load definitions
through the app loader (``_operations/_inputs.py``), like any app.
"""

from __future__ import annotations

from pathlib import Path  # noqa: TC003 - typer reads the annotation
from typing import Annotated

import typer
from rich.markup import escape

from treadle._cli._execute import EXIT_REFUSED, refuse
from treadle._cli._help import command_set
from treadle._cli._views import out
from treadle._exceptions import DefinitionError
from treadle._extras import needs_extra

cli = command_set()


@cli.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Definition files (.yaml, .yml, .json).")],
) -> None:
    """Check workflow definitions: every problem as file:line:col, exit 2; else exit 0."""
    try:
        from treadle._declarative._loader import load_path  # noqa: PLC0415 - yaml and CEL on demand
    except ImportError as error:
        refuse(escape(needs_extra("treadle validate", "declarative", error)))
    problems: list[str] = []
    for file in files:
        try:
            workflow = load_path(file)
        except DefinitionError as error:
            problems.extend(error.problems)
            continue
        count = len(workflow.executor_ids)
        out.print(escape(f"{file}: ok ({workflow.name}, {count} nodes)"), soft_wrap=True)
    for problem in problems:
        out.print(escape(problem), soft_wrap=True, highlight=False)
    if problems:
        raise typer.Exit(EXIT_REFUSED)
