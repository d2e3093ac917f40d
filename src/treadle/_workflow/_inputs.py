"""Turning a plain JSON input into the type a workflow's start executor takes.

Whatever starts a run from data rather than from Python values (a worker
taking up a queued run, a schedule's tick, a command) goes through
:func:`coerce_input`, so an input is checked the same way wherever it
comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._exceptions import AppLoadError
from treadle._values._strict import fit_type

if TYPE_CHECKING:
    from treadle._workflow._workflow import Workflow

__all__ = ["coerce_input", "misdirected"]


def coerce_input(workflow: Workflow, value: Any) -> Any:
    """Turn JSON into the type the start executor accepts (a dataclass, a model...).

    Checked as answers are (:mod:`treadle._values._strict`): nothing is
    coerced (``"12"`` is no number) and a key the type lacks is refused,
    naming it; a whole number is a ``float`` where one is accepted.

    Raises:
        AppLoadError: The value fits none of the types the start executor takes.
    """
    start = workflow.prototype(workflow.start_id)
    accepted = start.accepted_types()
    if any(isinstance(value, cls) for cls in accepted) or object in accepted:
        return _fitting(workflow.start_id, start.input_problems(value), value)
    problems = []
    for cls in accepted:
        built, wrong = fit_type(cls, value)
        if not wrong:
            return _fitting(workflow.start_id, start.input_problems(built), built)
        problems.append(f"as {cls.__qualname__}, {'; '.join(wrong)}")
    names = ", ".join(c.__qualname__ for c in accepted)
    msg = (
        f"the input does not fit the start executor {workflow.start_id!r} "
        f"(accepts {names}): {' | '.join(problems)}"
    )
    raise AppLoadError(msg)


def _fitting(start_id: str, problems: list[str], value: Any) -> Any:
    """``value``, unless the start executor finds it does not fit (its ``input_problems``).

    Raises:
        AppLoadError: naming each problem, before any run exists.
    """
    if problems:
        msg = f"the input does not fit the start executor {start_id!r}: {'; '.join(problems)}"
        raise AppLoadError(msg)
    return value


def misdirected(workflow: Workflow, target: str | None) -> str | None:
    """Why a session message for ``target`` cannot reach it (``None``: it can).

    ``target`` names an executor of ``workflow``, or a path into one that
    runs a sub-workflow (``review/inner``); ``None`` is the session's own.
    """
    if target is None:
        return None
    head, path, _ = target.partition("/")
    if head in workflow.executor_ids and not (path and workflow.subgraph_of(head) is None):
        return None
    return (
        f"target {target!r} is no executor of workflow {workflow.name!r} "
        f"(it has: {', '.join(workflow.executor_ids)})"
    )
