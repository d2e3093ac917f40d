"""The ``treadle`` command line, assembled: the top-level group and where its commands come from.

Every command lives in a module of its concern (starting and moving runs
on, looking at them, steering them, serving, housekeeping...), defined on
that module's own :func:`~treadle._cli._help.command_set`, named ``cli``.
This module names each module and the commands it defines in
:data:`COMMANDS`, in the order ``--help`` lists them, and imports a module
only when one of its commands is asked for: ``treadle worker`` loads the
worker's module, not the server's, the schedules' or the inspectors' (which
cost it half its start-up before; ``tests/cli/test_cli_lazy.py``). Only
``treadle --help`` (and shell completion) imports them all. No command module
imports the app, so the package has no import cycle
(``tests/test_import_cycles.py``).

To add a command: define it on ``cli = command_set()`` in the module whose
concern it is (or a new one), and name it under that module in
:data:`COMMANDS` (a test checks the two agree). How commands run, print and
exit is shared: :mod:`treadle._cli._execute`, :mod:`treadle._cli._views`,
:mod:`treadle._cli._exits` (the exit codes).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.main import get_group_from_info
from typer.models import TyperInfo

from treadle._cli._help import TreadleGroup
from treadle._cli._stopping import UNWRITABLE_OUTPUT, guard_output, output_failure

if TYPE_CHECKING:
    from typer._click.core import Command

COMMANDS = (
    ("_running", ("run", "resume", "respond", "send", "start", "fork")),
    ("_inspect", ("runs", "show", "history", "requests", "watch", "logs", "export")),
    ("_graphs", ("graph",)),
    ("_worker", ("worker",)),
    ("_serve_http", ("serve",)),
    ("_control", ("cancel", "pause", "unpause")),
    ("_bulk", ("bulk",)),  # bulk cancel | pause | unpause | resume | respond | delete --where
    ("_schedules", ("schedules",)),  # schedules create | list | show | ... | delete
    ("_definitions", ("validate",)),
    ("_housekeeping", ("delete", "prune", "audit")),
    ("_migrate", ("migrate",)),
    ("_upgrade", ("check-upgrade",)),
    ("_tokens", ("tokens",)),  # tokens create | list | revoke
    ("_webhooks", ("webhooks", "links")),  # webhooks ..., links create
)
"""Each command module of ``treadle._cli`` and its commands, in the order ``--help`` lists them."""


class _Commands(MutableMapping[str, "Command"]):
    """``treadle``'s commands by name, a module's imported when one of them is first asked for.

    Its names, in :data:`COMMANDS`' order, are known without importing
    anything, so listing them (``--help``, a misspelt command's "did you
    mean") costs nothing until a command itself is needed.
    """

    def __init__(self, added: Mapping[str, Command]) -> None:
        self._modules = {name: module for module, names in COMMANDS for name in names}
        self._loaded = dict(added)  # any added to the app itself (none so far)

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._loaded

    def __getitem__(self, name: str) -> Command:
        module = self._modules.get(name)
        if name not in self._loaded and module is not None:
            self._loaded.update(commands_of(importlib.import_module(f"treadle._cli.{module}").cli))
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._modules.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._loaded]))

    def __len__(self) -> int:
        return len(self._modules.keys() | self._loaded.keys())


class _Treadle(TreadleGroup):
    """The ``treadle`` group, its commands loaded as they are asked for (:class:`_Commands`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.commands)


app = typer.Typer(
    name="treadle",
    help="Run, inspect and steer durable treadle workflows.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    cls=_Treadle,
    rich_markup_mode=None,  # click's plain help: whole at 80 columns (see _help.py)
)


def commands_of(cli: typer.Typer) -> dict[str, Command]:
    """The commands (and groups) a module's ``cli`` defines, as ``app.add_typer(cli)`` adds them."""
    group = get_group_from_info(
        TyperInfo(cli),
        pretty_exceptions_short=app.pretty_exceptions_short,
        suggest_commands=app.suggest_commands,
        rich_markup_mode=app.rich_markup_mode,
    )
    return dict(group.commands)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version  # noqa: PLC0415 - only to print it

        from treadle._cli._views import out  # noqa: PLC0415 - rich, only to print it

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
    """Entry point of the ``treadle`` console script.

    A command whose output could not be written (a full disk) but that
    otherwise succeeded exits 74 saying so, on stderr if it can: its caller
    did not get what it asked for.
    """
    guard_output()
    try:
        app()
    except SystemExit as done:
        failure = output_failure()
        if failure is None or done.code not in (0, None):
            raise
        with contextlib.suppress(OSError):
            os.write(2, f"error: the output could not be written: {failure.strerror}\n".encode())
        raise SystemExit(UNWRITABLE_OUTPUT.exit_code) from None
