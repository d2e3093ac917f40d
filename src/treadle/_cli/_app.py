"""The ``treadle`` command line, assembled: the top-level group and where its commands come from.

Every command lives in a module of its concern (starting and moving runs
on, looking at them, steering them, serving, housekeeping...), defined on
that module's own :func:`~treadle._cli._help.command_set`, named ``cli``.
This module adds each set to the ``treadle`` group, in the order ``--help``
lists them, and is the only one that imports them: no command module
imports the app, so the package has no import cycle
(``tests/test_import_cycles.py``).

To add a command: define it on ``cli = command_set()`` in the module whose
concern it is (or a new one), and name that module in :data:`COMMANDS`.
How commands run, print and exit is shared: :mod:`treadle._cli._execute`,
:mod:`treadle._cli._views`, :mod:`treadle._cli._exits` (the exit codes).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Annotated

import typer

from treadle._cli import (
    _bulk,
    _control,
    _definitions,
    _graphs,
    _housekeeping,
    _inspect,
    _migrate,
    _running,
    _schedules,
    _serve_http,
    _tokens,
    _upgrade,
    _webhooks,
    _worker,
)
from treadle._cli._help import TreadleGroup
from treadle._cli._stopping import guard_output
from treadle._cli._views import out

COMMANDS = (
    _running,  # run, resume, respond, send, start, fork
    _inspect,  # runs, show, history, requests, watch, logs, export
    _graphs,  # graph
    _worker,  # worker
    _serve_http,  # serve
    _control,  # cancel, pause, unpause
    _bulk,  # bulk cancel | pause | unpause | resume | respond | delete --where
    _schedules,  # schedules create | list | show | pause | unpause | trigger | backfill | delete
    _definitions,  # validate
    _housekeeping,  # delete, prune, audit
    _migrate,  # migrate
    _upgrade,  # check-upgrade
    _tokens,  # tokens create | list | revoke
    _webhooks,  # webhooks ..., links create
)
"""The modules whose commands ``treadle`` has, in the order ``--help`` lists them."""

app = typer.Typer(
    name="treadle",
    help="Run, inspect and steer durable treadle workflows.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    cls=TreadleGroup,
    rich_markup_mode=None,  # click's plain help: whole at 80 columns (see _help.py)
)
for _module in COMMANDS:
    app.add_typer(_module.cli)


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"treadle {version('treadle')}", highlight=False)
        raise typer.Exit


@app.callback()
def main_options(
    version_: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print treadle's version and exit.",
        ),
    ] = False,
) -> None:
    """Run, inspect and steer durable treadle workflows."""


def main() -> None:
    """Entry point of the ``treadle`` console script."""
    guard_output()
    app()
