"""What ``treadle run`` says before a run starts: the input it needs, an id already taken.

A new user's first command is ``treadle run``, and its first mistakes are
an input left out or of the wrong shape, and a ``--run-id`` already used.
Each is refused (exit 2, nothing stored) with what to type instead: the
fields the start executor's input has (the JSON schema the HTTP API serves,
printed as ``treadle respond`` prints an answer's), or the commands that
look at and continue the run that has the id. Kept apart from the command
(:mod:`treadle._cli._running`) to keep it short.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any, TypeVar

from treadle._cli._answering import example_answer, field_lines
from treadle._engine._result import RunStatus
from treadle._exceptions import CommandError, RunExistsError
from treadle._operations._inputs import coerce_input, load_workflow, parse_json
from treadle._operations._schemas import input_schema

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from treadle._stores._store import RunReads
    from treadle._workflow._workflow import Workflow

T = TypeVar("T")


def prepare_run(app: str, raw_input: str | None) -> tuple[Workflow, Any]:
    """The workflow ``app`` names and its input, typed as its start executor takes it.

    ``raw_input`` is ``--input`` (``None``: left out, which is a ``null``
    input only for a workflow that takes one).

    Raises:
        CommandError: The app does not load, the input is not JSON, or it is
            missing or does not fit; the message (one line, as every
            refusal) says what the input must be and gives an example.
    """
    workflow = load_workflow(app)
    if raw_input is None:
        try:
            return workflow, coerce_input(workflow, None)
        except CommandError:
            msg = f"--input is required: {_expected(workflow)}"
            raise CommandError(msg) from None
    value = parse_json(raw_input, "input")
    try:
        return workflow, coerce_input(workflow, value)
    except CommandError as error:
        # An example only where the input's type says one (anything fits "any": null does not).
        example = f"; {_example(workflow)}" if input_schema(workflow) else ""
        raise CommandError(f"{error}{example}") from None


def _expected(workflow: Workflow) -> str:
    """What the start executor accepts: its types, their top-level fields, an example."""
    accepted = workflow.prototype(workflow.start_id).accepted_types()
    names = ", ".join(t.__qualname__ for t in accepted)
    text = f"the start executor {workflow.start_id!r} accepts {names}"
    lines = field_lines(input_schema(workflow))
    fields = [line.strip() for line in lines[1:] if line[:2] == "  " and line[2:3] != " "]
    if fields:  # field_lines' first line says it is an object; nested fields stay out
        text += f", a JSON object with {', '.join(fields)}"
    return f"{text}; {_example(workflow)}"


def _example(workflow: Workflow) -> str:
    """``e.g. --input '...'``: an input that fits (defaults, else simple values), quoted."""
    return f"e.g. --input {shlex.quote(json.dumps(example_answer(input_schema(workflow))))}"


async def refuse_taken_id(store: RunReads, started: Awaitable[T], run_id: str | None) -> T:
    """Await ``started``; if ``run_id`` is taken, say which run has it and what to do with it.

    Raises:
        CommandError: A run with ``run_id`` exists already (nothing was started).
    """
    try:
        return await started
    except RunExistsError:
        assert run_id is not None  # noqa: S101 - only a chosen id can be taken
        row = await store.get_run(run_id)
        if RunStatus(row.status).is_final:
            then = f"`treadle fork {run_id} --superstep N` branches a new run from it"
        else:
            then = f"`treadle resume {run_id}` continues it"
        msg = (
            f"a run {run_id!r} exists already ({row.workflow}, {row.status} at superstep "
            f"{row.superstep}): `treadle show {run_id}` shows it, {then}; "
            f"to start a new run, choose another --run-id (or leave it out)"
        )
        raise CommandError(msg) from None
