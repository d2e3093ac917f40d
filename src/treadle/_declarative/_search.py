"""Search fields in a definition (``search:``) and its ``start_policy:``: CEL over the input.

The YAML counterpart of ``WorkflowBuilder.add_search_field``: an ``input``
expression reads ``inputs`` (the run's input), a ``state`` expression reads
``state`` (the committed state). They are checked when the definition is
loaded, like conditions, and evaluated within the same step budget
(:mod:`treadle._declarative._budget`); one that fails or goes over its budget
leaves the field unset at that commit, with a warning, as any search field.
A ``start_policy:`` key reads ``inputs`` too; one that fails refuses the
start (nothing is stored), naming the workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._declarative._conditions import compile_expression, plain
from treadle._workflow._start_policy import StartPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping

    from treadle._declarative._conditions import Expression
    from treadle._declarative._schema import SearchSpec, StartPolicySpec
    from treadle._workflow._builder import WorkflowBuilder

    Where = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class CelField:
    """A search field's value: its expression over the input (``inputs``) or the state."""

    expression: Expression
    name: str  # "inputs" or "state"

    def __call__(self, given: Any) -> Any:
        """The expression's value over ``given``.

        Raises:
            ExpressionError, TypeError: it failed (the field is then unset).
        """
        value = plain(dict(given) if self.name == "state" else given)
        return self.expression.evaluate({self.name: value})


def add_search_fields(
    builder: WorkflowBuilder,
    fields: Mapping[str, SearchSpec],
    problem: Callable[[Where, str], None],
    declared: Mapping[str, Collection[str]],
) -> None:
    """Declare each field of ``search:`` on ``builder``, reporting each mistake where it is.

    ``declared``: the fields of ``state`` and ``inputs`` there are (see ``compile_expression``).
    """
    for name, spec in fields.items():
        given = [
            (key, text) for key, text in (("input", spec.input), ("state", spec.state)) if text
        ]
        if len(given) != 1:
            problem(("search", name), "give exactly one of input: and state:")
            continue
        source, text = given[0]
        variable = "inputs" if source == "input" else "state"
        try:
            expression = compile_expression(text, [variable], declared)
        except ValueError as error:
            problem(("search", name, source), str(error))
            continue
        value = CelField(expression, variable)
        if source == "input":
            builder.add_search_field(name, spec.type, input=value)
        else:
            builder.add_search_field(name, spec.type, state=value)


def start_policy_of(
    spec: StartPolicySpec | None,
    problem: Callable[[Where, str], None],
    declared: Mapping[str, Collection[str]],
) -> StartPolicy | None:
    """The workflow's ``start_policy:``, its key a CEL expression over ``inputs``.

    Kept beside the search fields: both are CEL over the run's input.
    """
    if spec is None:
        return None
    key = None
    if spec.key is not None:
        try:
            key = CelField(compile_expression(spec.key, ["inputs"], declared), "inputs")
        except ValueError as error:
            problem(("start_policy", "key"), str(error))
            return None
    try:
        return StartPolicy(
            key=key,
            singleton=spec.singleton,
            concurrency=spec.concurrency,
            when_busy=spec.when_busy,
            debounce=spec.debounce,
        )
    except ValueError as error:
        problem(("start_policy",), str(error).removeprefix("StartPolicy: "))
        return None
