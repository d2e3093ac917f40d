"""Call limits in a definition: ``call_limits:``, with keys and priorities written in CEL.

A definition declares its limits by name, beside its nodes, and each node
names the ones it runs under (``limits: [openai]``). A limit's ``key``,
``priority`` and ``estimate`` (when not a number) are CEL expressions
over the call: ``message`` (the message the node handles, as plain
data), ``run_id``, ``workflow`` and ``executor`` (the node's id). They
are checked when the definition loads, with the same rules and
evaluation budget as the definition's conditions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._declarative._conditions import ExpressionError, compile_expression, plain
from treadle._graph._limits import CallLimit

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._declarative import _schema as schema
    from treadle._declarative._conditions import Expression
    from treadle._graph._limits import LimitCall

CALL_NAMES = ("message", "run_id", "workflow", "executor")
"""What a limit's ``key`` and ``priority`` may read."""


@dataclass(frozen=True, slots=True)
class CelCallValue:
    """A limit's ``key`` or ``priority`` as a callable of the call.

    Raises (when called):
        ExpressionError: naming the limit, the field and what went wrong
            (the call's attempt fails, as a failing handler would).
    """

    expression: Expression
    limit: str
    field: str

    def __call__(self, call: LimitCall) -> Any:
        values = {
            "message": plain(call.message),
            "run_id": call.run_id,
            "workflow": call.workflow,
            "executor": call.executor,
        }
        try:
            value = self.expression.evaluate(values)
        except ExpressionError as error:
            msg = f"limit {self.limit!r}: its {self.field} {error}"
            raise ExpressionError(msg) from None
        if self.field in ("priority", "estimate") and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            msg = (
                f"limit {self.limit!r}: its {self.field} {self.expression.source!r} gave {value!r}"
            )
            raise ExpressionError(msg + ", not an integer")
        return value


def declared_limits(
    specs: Mapping[str, schema.CallLimitSpec], problem: Callable[[tuple[str, ...], str], None]
) -> list[CallLimit]:
    """The definition's ``call_limits``, each problem reported at its place."""
    limits = []
    for name, spec in specs.items():
        where = ("call_limits", name)
        made: dict[str, CelCallValue] = {}
        for field in ("key", "priority", "estimate"):
            source = getattr(spec, field)
            if source is None or isinstance(source, int):
                continue
            try:
                made[field] = CelCallValue(compile_expression(source, CALL_NAMES), name, field)
            except ValueError as error:
                problem((*where, field), str(error))
        try:
            limits.append(
                CallLimit(
                    name,
                    concurrency=spec.concurrency,
                    rate=spec.rate,
                    key=made.get("key"),
                    priority=made.get("priority"),
                    tokens=spec.tokens,
                    estimate=made.get("estimate", spec.estimate),  # type: ignore[arg-type]
                )
            )
        except (TypeError, ValueError) as error:
            problem(where, str(error))
    return limits
