"""How ``--help`` reads: whole at 80 columns, values named as a person would name them.

typer names an option's value by its Python annotation (``<str>``,
``<list[str]>``, ``<bool>`` for a flag) and, in its boxed layout, cuts a
long option name short (``--max-node-iterati…``) to fit 80 columns. The
``treadle`` command asks for click's plain layout instead, which puts a
long option on a line of its own rather than cutting it, and
:class:`TreadleGroup` names every value plainly where it is declared
without a name of its own: ``TEXT``, ``INTEGER``, ``NUMBER``, ``PATH``, an
argument by its name (``RUN_ID``), a flag by nothing.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperGroup

if TYPE_CHECKING:
    from typer._click.core import Command, Context, Parameter

_NAMES = MappingProxyType({"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "Path": "PATH"})


class _NamedArgument(TyperArgument):
    """An argument shown by its name alone: its help line already says what it holds."""

    def display_type_rich(self, ctx: Context) -> str | None:
        """Nothing: the argument's name (``RUN_ID``) stands for its value."""
        del ctx
        return None


def _value_name(param: Any) -> str:
    """What ``--help`` calls a parameter's value (empty for a flag)."""
    if isinstance(param, TyperArgument):
        return str(param.name).upper()
    if getattr(param, "is_flag", False):
        return ""
    bare = str(param.bare_type()) if hasattr(param, "bare_type") else "str"
    element = bare.removeprefix("list[").removesuffix("]")
    return _NAMES.get(element, element.upper())


def name_values(params: list[Parameter]) -> None:
    """Give each parameter declared without a value name (``metavar``) a plain one."""
    for param in params:
        if param.metavar is not None:
            continue
        param.metavar = _value_name(param)
        if type(param) is TyperArgument:
            param.__class__ = _NamedArgument  # the same argument, shown without its type


class TreadleGroup(TyperGroup):
    """The ``treadle`` group: its commands' values named plainly in ``--help``."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The group's own options (``--version``, completion), named plainly."""
        params = super().get_params(ctx)
        name_values(params)
        return params

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        """A command, its values named plainly."""
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            name_values(command.params)
        return command


def command_group(help_text: str) -> typer.Typer:
    """A group of ``treadle`` subcommands (``tokens``, ``webhooks``), its help read as the rest."""
    return typer.Typer(
        help=help_text, no_args_is_help=True, cls=TreadleGroup, rich_markup_mode=None
    )


def command_set() -> typer.Typer:
    """The commands one module of ``_cli`` defines, which ``_app.py`` adds to ``treadle`` whole.

    It has no name of its own, so its commands (and its groups, such as
    ``tokens``) stand at the top level: ``treadle cancel``, not ``treadle
    control cancel``. A module defines its commands on it and never imports
    the app, which imports the module.
    """
    return typer.Typer()
