"""A built workflow written out as a definition: the way back from Python to the format.

What can be written is what a definition can name: executors importable
by ``module:attribute`` (a function decorated with ``@executor``, a
function, an ``Executor`` class), agents (by their name), sub-workflows
(by their definition file, else by name), the built-in steps, reducers
importable by path, and conditions and selectors written in CEL (those of a
loaded definition). A Python lambda as a condition has no such form:
``export`` refuses it, naming it, with every other such part.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from treadle._agents._executor import AgentExecutor
from treadle._declarative._conditions import CelCondition, CelSelector
from treadle._declarative._nodes import (
    INPUTS_KEY,
    NODES_KEY,
    DeclaredNode,
    OutputStep,
    TemplateStep,
)
from treadle._engine._state import MISSING
from treadle._engine._subworkflow import SubWorkflow
from treadle._graph._edges import (
    DirectEdge,
    ErrorEdge,
    FanInEdge,
    FanOutEdge,
    HandoffEdge,
    SwitchEdge,
)
from treadle._graph._function_executor import FunctionExecutor
from treadle._graph._policies import ExponentialBackoff, RetryPolicy

if TYPE_CHECKING:
    from treadle._graph._edges import Edge
    from treadle._graph._executor import Executor
    from treadle._workflow._workflow_graph import WorkflowGraph

_RESERVED = frozenset({INPUTS_KEY, NODES_KEY})
_DEFAULT_BACKOFF = ExponentialBackoff()


def _path_of(value: Any) -> str | None:
    """``module:qualname`` of a function or class, if importing it gives ``value`` back.

    A C module's public twin is tried first (``operator.add`` says it is
    ``_operator``'s).
    """
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not name or "<" in name:
        return None
    for candidate in dict.fromkeys((module.lstrip("_"), module)):
        try:
            found: Any = importlib.import_module(candidate)
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            continue
        if value in (found, getattr(found, "__wrapped__", None)):
            return f"{candidate}:{name}"
    return None


def _retry(policy: RetryPolicy | None, where: str, problems: list[str]) -> dict[str, Any] | None:
    if policy is None:
        return None
    if policy.retry_on != (Exception,):
        problems.append(f"{where}: a retry policy with retry_on has no form in a definition")
    b = policy.backoff
    written = {
        "max_attempts": policy.max_attempts,
        "initial": b.initial,
        "maximum": b.maximum,
        "multiplier": b.multiplier,
        "jitter": b.jitter,
    }
    defaults = {"initial": 1.0, "maximum": 60.0, "multiplier": 2.0, "jitter": 0.1}
    return {k: v for k, v in written.items() if defaults.get(k) != v}


def _step(executor: Executor, node_id: str, problems: list[str]) -> dict[str, Any]:
    """How a definition names the step ``executor`` is."""
    if isinstance(executor, OutputStep):
        return {"step": "output"}
    if isinstance(executor, TemplateStep):
        return {"step": "template"}
    if isinstance(executor, SubWorkflow):
        inner = executor.workflow
        origin = getattr(inner, "origin", None)
        if isinstance(origin, str) and origin.endswith((".yaml", ".yml", ".json")):
            return {"workflow": origin}
        return {"workflow": inner.name}
    if isinstance(executor, AgentExecutor):
        written: dict[str, Any] = {"agent": executor.adapter.name or node_id}
        if executor.session:
            written["session"] = True
        if executor.approve_tools:
            written["approve_tools"] = sorted(executor.approve_tools)
        if executor.approvers:
            written["approvers"] = list(executor.approvers)
        if executor.four_eyes is not None:
            written["four_eyes"] = executor.four_eyes
        return written
    if isinstance(executor, FunctionExecutor):
        path = _path_of(executor.__wrapped__)
        if path is not None:
            return {"executor": path}
    elif (path := _path_of(type(executor))) is not None:
        return {"executor": path}
    problems.append(f"node {node_id!r}: {executor!r} is not importable by module:attribute")
    return {"executor": "?"}


def _node(workflow: WorkflowGraph, node_id: str, problems: list[str]) -> dict[str, Any]:
    prototype = workflow.prototype(node_id)
    if not isinstance(prototype, DeclaredNode):
        written = _step(prototype, node_id, problems)
        retry = _retry(prototype.retry, f"node {node_id!r}", problems)
        if retry is not None and not isinstance(prototype, SubWorkflow):
            written["retry"] = retry
        if prototype.timeout is not None:
            written["timeout"] = prototype.timeout
        return written
    wrapping = prototype.wrapping
    written = _step(prototype.inner, node_id, problems)
    if wrapping.has_input:
        written["input"] = wrapping.input_source
    retry = _retry(wrapping.retry, f"node {node_id!r}", problems)
    if retry is not None:
        written["retry"] = retry
    if wrapping.timeout is not None:
        written["timeout"] = wrapping.timeout
    if wrapping.approvers:
        written["approvers"] = list(wrapping.approvers)
    if wrapping.four_eyes is not None:
        written["four_eyes"] = wrapping.four_eyes
    outcome, summary = wrapping.outcome_source
    if outcome is not None:
        written["outcome"] = outcome
    if summary is not None:
        written["outcome_summary"] = summary
    return written


def _expression(condition: Any, where: str, problems: list[str]) -> str | None:
    if condition is None:
        return None
    if isinstance(condition, CelCondition | CelSelector):
        return condition.source
    problems.append(f"{where}: {condition!r} is Python, not an expression a definition can hold")
    return None


def _edge(edge: Edge, problems: list[str]) -> dict[str, Any]:
    if isinstance(edge, DirectEdge):
        written: dict[str, Any] = {"from": edge.source, "to": edge.target}
        when = _expression(edge.condition, f"edge {edge.source} -> {edge.target}", problems)
        return {**written, "when": when} if when is not None else written
    if isinstance(edge, FanOutEdge):
        written = {"from": edge.source, "fan_out": list(edge.targets)}
        select = _expression(edge.selector, f"fan-out from {edge.source}", problems)
        return {**written, "select": select} if select is not None else written
    if isinstance(edge, FanInEdge):
        return {"fan_in": list(edge.sources), "to": edge.target}
    if isinstance(edge, SwitchEdge):
        cases: list[dict[str, Any]] = [
            {"when": _expression(c, f"switch of {edge.source}", problems), "to": t}
            for c, t in edge.cases
        ]
        if edge.default is not None:
            cases.append({"default": edge.default})
        return {"from": edge.source, "switch": cases}
    if isinstance(edge, HandoffEdge):
        written = {"from": edge.source, "handoff": list(edge.targets)}
        return {**written, "require_approval": True} if edge.require_approval else written
    if isinstance(edge, ErrorEdge):
        return {"from": edge.source, "on_error": edge.target}
    problems.append(f"{edge!r} has no form in a definition")  # pragma: no cover - every kind above
    return {}


def export(workflow: WorkflowGraph) -> dict[str, Any]:
    """``workflow`` as a definition (plain data, ready for YAML or JSON).

    Raises:
        ValueError: Some part has no form in a definition; the message lists every one.
    """
    problems: list[str] = []
    written: dict[str, Any] = {
        "name": workflow.name,
        "version": workflow.version,
        "start": workflow.start_id,
    }
    start = workflow.prototype(workflow.start_id)
    if isinstance(start, DeclaredNode) and start.wrapping.inputs is not None:
        written["inputs"] = dict(start.wrapping.inputs)
    state: dict[str, Any] = {}
    for key, spec in workflow.state_specs.items():
        if key in _RESERVED:
            continue
        entry: dict[str, Any] = {}
        if spec.default is not MISSING and spec.default is not None:
            entry["default"] = spec.default
        if spec.reducer is not None:
            path = _path_of(spec.reducer)
            if path is None:
                problems.append(f"state {key!r}: its reducer is not importable by module:attribute")
            entry["reducer"] = path or "?"
        state[key] = entry
    if state:
        written["state"] = state
    defaults = workflow.defaults
    limits = {
        "max_supersteps": defaults.max_supersteps,
        "max_node_iterations": defaults.max_node_iterations,
        "max_concurrency": defaults.max_concurrency,
        "deterministic": defaults.deterministic,
    }
    usual = {"max_supersteps": 1000, "max_node_iterations": None, "max_concurrency": None}
    chosen = {k: v for k, v in limits.items() if usual.get(k, False) != v}
    if chosen:
        written["limits"] = chosen
    retry = _retry(defaults.retry, "the workflow", problems)
    if retry is not None:
        written["retry"] = retry
    if defaults.four_eyes:
        written["four_eyes"] = True
    written["nodes"] = {nid: _node(workflow, nid, problems) for nid in workflow.executor_ids}
    edges = [_edge(edge, problems) for edge in workflow.edges]
    if edges:
        written["edges"] = edges
    if problems:
        raise ValueError(
            "the workflow cannot be written as a definition:\n  " + "\n  ".join(problems)
        )
    return written


def export_text(workflow: WorkflowGraph) -> str:
    """:func:`export` as YAML text (keys in the order a reader expects)."""
    import yaml  # noqa: PLC0415 - the declarative extra, only when exporting

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002 - definitions refuse aliases
            return True

    text: str = yaml.dump(export(workflow), Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    return text
