"""The options several ``treadle`` commands share, declared once.

Most are plain ``Annotated`` aliases (``--store``, ``--app``, ``--json``,
``--wait``) that a command lists among its parameters. The options of every
command that advances a run (``run``, ``resume``, ``respond``, ``send``) are
one frozen value instead, :class:`RunFlags`: a command decorated with
:func:`with_run_flags` receives them as ``flags``, so that an option those
commands all take is declared, parsed and passed on in one place rather than
once per command.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle._cli._execute import refuse
from treadle._engine._options import RunOptions
from treadle._operations._starting import StartChoice
from treadle._values._schedules import chosen_run_id

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TREADLE_STORE",
        help="A SQLite file (default: treadle.sqlite here) or a postgresql:// URL.",
    ),
]
AppOption = Annotated[
    str | None,
    typer.Option("--app", help="pkg.module:workflow, when the run does not record it."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
WhereOption = Annotated[
    str | None,
    typer.Option(
        "--where",
        metavar="FILTER",
        help="A filter of runs (docs/search.md), e.g. 'fields.customer == \"42\"'.",
    ),
]
WaitOption = Annotated[
    bool,
    typer.Option("--wait", help="If another process owns the run, wait for it rather than refuse."),
]
RunIdArgument = Annotated[str, typer.Argument(help="The run id, or a prefix of it naming one run.")]


def _new_run_id(value: str | None) -> str | None:
    """A ``--run-id`` for a new run, refused (exit 2) where another door could not name it."""
    if value is None:
        return None
    try:
        return chosen_run_id(value)  # the CLI is never a schedule
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def new_run_id_option(help_text: str) -> Any:
    """``--run-id`` of a command that makes a run: checked as every door checks a run's id."""
    return typer.Option("--run-id", help=help_text, callback=_new_run_id)


FollowOption = Annotated[
    bool,
    typer.Option("--follow", help="Draw the run's events as they commit, until it rests or ends."),
]

# The run options (``treadle.RunOptions``), one typer option each; left out,
# each takes the workflow's default.
MaxSuperstepsOption = Annotated[
    int | None, typer.Option("--max-supersteps", help="Stop a runaway loop after this many.")
]
MaxNodeIterationsOption = Annotated[
    int | None,
    typer.Option("--max-node-iterations", help="Stop any one executor after this many runs."),
]
MaxConcurrencyOption = Annotated[
    int | None, typer.Option("--max-concurrency", help="Most handlers running at once.")
]
DeterministicOption = Annotated[
    bool | None,
    typer.Option(
        "--deterministic/--no-deterministic",
        help="Run a superstep's executors one at a time, in rank order.",
        show_default=False,
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", help="The run's deadline, in seconds from now (stored with it)."),
]
DurabilityOption = Annotated[
    str | None,
    typer.Option("--durability", help="sync (default), background or batched checkpoints."),
]
KeepLastOption = Annotated[
    int | None, typer.Option("--keep-last", help="Checkpoints to keep for this run.")
]


@dataclasses.dataclass(frozen=True, slots=True)
class RunFlags:
    """The options of every command that advances a run, parsed.

    Each field is one option: its annotation is the typer option it is
    parsed from, and :func:`with_run_flags` adds it to each such command.

    Attributes:
        store: ``--store``: the store's file or URL (``None``: the default).
        as_json: ``--json``: print JSON for scripts rather than rich text.
        follow: ``--follow``: draw the run's events from its log as they
            commit (``run`` always does), until it rests or ends.
        max_supersteps, max_node_iterations, max_concurrency, deterministic,
        timeout, durability, keep_last: the run's options, as in
            ``treadle.RunOptions`` (``None``: the workflow's default).
    """

    store: StoreOption = None
    as_json: JsonOption = False
    follow: FollowOption = False
    max_supersteps: MaxSuperstepsOption = None
    max_node_iterations: MaxNodeIterationsOption = None
    max_concurrency: MaxConcurrencyOption = None
    deterministic: DeterministicOption = None
    timeout: TimeoutOption = None
    durability: DurabilityOption = None
    keep_last: KeepLastOption = None

    def run_options(self, *, continuing: bool = False) -> RunOptions:
        """The run's options, checked as the library checks them.

        A bad value ends the command (exit 2) before anything runs, naming
        the flag at fault. ``continuing``: for a stored run, which keeps the
        deadline it started with (``--timeout`` is refused).
        """
        if continuing and self.timeout is not None:
            refuse(
                "--timeout sets a new run's deadline; a stored run keeps the one it started with"
            )
        given = {
            name: getattr(self, name)
            for name in _RUN_OPTION_FLAGS
            if getattr(self, name) is not None
        }
        try:
            return RunOptions(**given)
        except (TypeError, ValueError) as error:
            flag = next((f for f in given if f in str(error)), None)
            where = f"--{flag.replace('_', '-')}: " if flag else ""
            refuse(f"{where}{error}")

    @property
    def sets_run_options(self) -> bool:
        """Whether any run option was given on the command line."""
        return any(getattr(self, name) is not None for name in _RUN_OPTION_FLAGS)


_RUN_OPTION_FLAGS = (
    "max_supersteps",
    "max_node_iterations",
    "max_concurrency",
    "deterministic",
    "timeout",
    "durability",
    "keep_last",
)


def with_run_flags(command: Callable[..., None]) -> Callable[..., None]:
    """``command``, taking the options of :class:`RunFlags` as well as its own (as ``flags``)."""
    return with_flags(command, RunFlags, "flags")


def with_flags(
    command: Callable[..., None],
    value: type,
    name: str,
    options: Mapping[str, Any] | None = None,
) -> Callable[..., None]:
    """``command``, taking the fields of the frozen ``value`` as options, given it as ``name``.

    Typer reads a command's options from its signature, so the command
    returned declares ``command``'s own parameters (all but ``name``), then
    one keyword parameter per field of ``value``; it calls ``command`` with
    those gathered into one ``value``. Decorators of several values stack.

    Args:
        command: A typer command with a keyword parameter ``name: value``.
        value: A dataclass; each field one option.
        name: The parameter ``command`` takes the value as.
        options: The typer annotation of each field, where the field's own
            annotation is not one (a value of a lower layer).
    """
    fields = dataclasses.fields(value)
    flag_hints = dict(options) if options is not None else {}
    if options is None:
        flag_hints = typing.get_type_hints(value, include_extras=True)
    known = {"RunFlags": RunFlags, "StartChoice": StartChoice}
    own_hints = typing.get_type_hints(command, localns=known, include_extras=True)
    declared = inspect.signature(command)
    own = [
        parameter.replace(annotation=own_hints[parameter.name])
        for parameter in declared.parameters.values()
        if parameter.name != name
    ]
    added = [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.default,
            annotation=flag_hints[field.name],
        )
        for field in fields
    ]

    @functools.wraps(command)
    def parsed(**arguments: Any) -> None:
        gathered = value(**{field.name: arguments.pop(field.name) for field in fields})
        command(**arguments, **{name: gathered})

    signature = declared.replace(parameters=[*own, *added])
    parsed.__signature__ = signature  # type: ignore[attr-defined]
    parsed.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return parsed
