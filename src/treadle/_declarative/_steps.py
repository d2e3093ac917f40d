"""What a node names, made into an executor: an import path, an agent, a sub-workflow, a step.

Each function returns the executor (or a factory of one) for a node, or a
problem saying why it cannot; nothing here raises for a mistake in the
definition, so the loader can report every mistake at once.

A definition's author is trusted as the author of code is (its import
paths import modules, which run their top level); the data of its runs
never is.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from treadle._agents._executor import AgentExecutor
from treadle._declarative._nodes import OutputStep, TemplateStep
from treadle._graph._executor import Executor
from treadle._graph._function_executor import FunctionExecutor

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._declarative._schema import Node


@dataclass(frozen=True, slots=True)
class Made:
    """A node's step: an executor instance, or a factory making one per run."""

    executor: Executor
    factory: Callable[[], Executor] | None = None


def import_object(path: str, directory: Path | None) -> Any:
    """The object ``module:attribute`` names (the definition's folder importable).

    Raises:
        LookupError: The module does not import or has no such attribute.
    """
    module_name, _, attribute = path.partition(":")
    for folder in (directory, Path.cwd()):
        where = str(folder)
        if folder is not None and where not in sys.path:
            sys.path.insert(0, where)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - reported as the node's problem, whatever it was
        msg = f"cannot import {module_name!r}: {type(error).__name__}: {error}"
        raise LookupError(msg) from None
    value: Any = module
    for name in attribute.split("."):
        if name.startswith("__"):
            msg = f"{path!r}: dunder names are not importable from a definition"
            raise LookupError(msg)
        try:
            value = getattr(value, name)
        except AttributeError:
            msg = f"{module_name!r} has no attribute {attribute!r}"
            raise LookupError(msg) from None
    return value


def renamed(executor: Executor, node_id: str) -> Executor:
    """``executor`` under the node's id: a copy when the ids differ (the original is shared)."""
    if executor.id == node_id:
        return executor
    import copy  # noqa: PLC0415 - only for renamed executors

    made = copy.copy(executor)
    made.id = node_id
    return made


def executor_step(node_id: str, path: str, directory: Path | None) -> Made:
    """The executor an import path names: an executor, its class, or a handler function.

    Raises:
        LookupError: The path imports nothing usable (the message says why).
    """
    value = import_object(path, directory)
    if isinstance(value, Executor):
        return Made(renamed(value, node_id))
    if isinstance(value, type) and issubclass(value, Executor):
        try:
            made = value()
        except Exception as error:  # noqa: BLE001 - a node's problem
            msg = f"{path!r}: {value.__name__}() raised {type(error).__name__}: {error}"
            raise LookupError(msg) from None

        def factory() -> Executor:
            return renamed(value(), node_id)

        return Made(renamed(made, node_id), factory)
    if callable(value):
        try:
            return Made(FunctionExecutor(value, id=node_id))
        except (TypeError, ValueError) as error:
            raise LookupError(f"{path!r}: {error}") from None
    msg = f"{path!r} is a {type(value).__name__}, not an executor, an Executor class or a function"
    raise LookupError(msg)


def agent_step(node_id: str, node: Node, agents: Mapping[str, Any], directory: Path | None) -> Made:
    """The agent a node names: from the caller's registry, or by import path.

    An executor (say an ``AgentExecutor`` configured in Python) is used as
    it is; an agent (pydantic-ai's ``Agent`` or an ``AgentAdapter``)
    becomes an ``AgentExecutor`` with the node's ``session`` and
    ``approve_tools``.

    Raises:
        LookupError: No such agent, or it is not one.
    """
    name = node.agent or ""
    if ":" in name:
        value = import_object(name, directory)
    elif name in agents:
        value = agents[name]
    else:
        known = ", ".join(sorted(agents)) or "none: pass agents={...} to load"
        msg = f"unknown agent {name!r} (the agents given: {known})"
        raise LookupError(msg)
    if isinstance(value, Executor):
        if node.session is not None or node.approve_tools is not None:
            msg = (
                f"agent {name!r} is an executor already; set session and approve_tools "
                f"where it is made, not in the definition"
            )
            raise LookupError(msg)
        return Made(renamed(value, node_id))
    try:
        made = AgentExecutor(
            value,
            id=node_id,
            session=bool(node.session),
            approve_tools=node.approve_tools or (),
        )
    except (TypeError, ValueError, ImportError) as error:
        msg = f"agent {name!r} cannot be this node: {error}"
        raise LookupError(msg) from None
    return Made(made)


def named_types(executor: Executor) -> list[type]:
    """The dataclasses, pydantic models and enums an executor's handlers name in their code.

    ``ctx.request(question, Decision)`` names ``Decision`` in the handler's
    body, never in an annotation the builder reads; a definition has no
    Python to call ``register_type`` from, so the classes a handler names
    (looked up in its module) are registered for it. Only data classes: no
    other object becomes loadable from a checkpoint.
    """
    found: list[type] = []
    for spec in executor.handler_specs():
        fn = getattr(spec.fn, "__func__", spec.fn)
        code = getattr(fn, "__code__", None)
        namespace = getattr(fn, "__globals__", {})
        codes = [code] if code is not None else []
        while codes:
            current = codes.pop()
            codes.extend(c for c in current.co_consts if hasattr(c, "co_names"))
            for name in current.co_names:
                value = namespace.get(name)
                if isinstance(value, type) and _is_data_class(value) and value not in found:
                    found.append(value)
    return found


def _is_data_class(value: Any) -> bool:
    if not isinstance(value, type):
        return False
    return (
        dataclasses.is_dataclass(value)
        or issubclass(value, enum.Enum)
        or isinstance(getattr(value, "model_fields", None), dict)
    )


def builtin_step(node_id: str, kind: str) -> Made:
    """A built-in step: ``output`` or ``template``."""
    return Made(OutputStep(node_id) if kind == "output" else TemplateStep(node_id))
