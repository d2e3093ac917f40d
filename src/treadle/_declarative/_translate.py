"""A checked definition made into an ordinary ``Workflow``, through ``WorkflowBuilder``.

Every node becomes an executor (``_steps.py``), every edge the builder call
of its kind, every state key an ``add_state``; then ``build()`` runs the
builder's own checks (types along edges, handlers of error routes,
reachability), and each problem it finds is reported at the place in the
definition it comes from. Nothing raises on the way: each mistake is
reported through ``report`` and the rest carries on, so one load lists them
all.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._declarative import _schema as schema
from treadle._declarative._conditions import CelCondition, CelSelector, compile_expression
from treadle._declarative._limits import declared_limits
from treadle._declarative._nodes import (
    INPUTS_KEY,
    NODES_KEY,
    DeclaredNode,
    Wrapping,
    condition_scope,
    merge_nodes,
)
from treadle._declarative._search import add_search_fields, start_policy_of
from treadle._declarative._steps import (
    Made,
    agent_step,
    builtin_step,
    executor_step,
    import_object,
    named_types,
)
from treadle._declarative._templates import compile_value, lookups
from treadle._engine._subworkflow import SubWorkflow
from treadle._exceptions import WorkflowValidationError
from treadle._graph._edges import Case, Default
from treadle._graph._policies import ExponentialBackoff, RetryPolicy
from treadle._values._actors import check_approvers
from treadle._workflow._builder import WorkflowBuilder

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from pathlib import Path

    from treadle._declarative._conditions import Expression
    from treadle._declarative._reader import Path as Where
    from treadle._declarative._templates import Compiled
    from treadle._graph._executor import Executor
    from treadle._workflow._workflow import Workflow


@dataclass(frozen=True, slots=True)
class Sources:
    """Where the names a definition uses are found.

    Attributes:
        agents: Agents (or agent executors) by name, for ``agent:`` nodes.
        workflows: Built workflows by name, for ``workflow:`` nodes that
            name no file.
        directory: The definition's folder: sub-workflow files are relative
            to it, and its modules importable.
        load_file: Loads a sub-workflow's definition file (raising
            ``DefinitionError`` with that file's problems).
    """

    agents: Mapping[str, Any]
    workflows: Mapping[str, Workflow]
    directory: Path | None
    load_file: Callable[[Path], Workflow]


def retry_policy(retry: schema.Retry | None) -> RetryPolicy | None:
    """The ``RetryPolicy`` a definition's ``retry`` describes."""
    if retry is None:
        return None
    backoff = ExponentialBackoff(
        initial=retry.initial,
        maximum=max(retry.maximum, retry.initial),
        multiplier=retry.multiplier,
        jitter=retry.jitter,
    )
    return RetryPolicy(max_attempts=retry.max_attempts, backoff=backoff)


def limited(node: Executor, limits: tuple[str, ...]) -> Executor:
    """``node``, running under the call limits its definition names (``limits:``)."""
    if limits:
        node.limits = limits
    return node


class Translation:
    """One definition's translation: the builder, and what each problem maps back to."""

    def __init__(
        self,
        definition: schema.Definition,
        node_ids: frozenset[str],
        sources: Sources,
        report: Callable[[Where, str], None],
    ) -> None:
        self.definition = definition
        self.node_ids = node_ids  # every id written, valid or not: edges to them are no mistake
        self.sources = sources
        self.report = report
        self.expressions: dict[Where, Expression] = {}
        self.edge_places: list[tuple[str, Where]] = []  # (builder's "where", edge's path)
        self.added: set[str] = set()
        self.mistakes = 0

    def problem(self, where: Where, message: str) -> None:
        self.mistakes += 1
        self.report(where, message)

    # -- the whole definition ---------------------------------------------------------
    def workflow(self) -> Workflow | None:
        """The built workflow, or ``None`` when some problem was reported."""
        d = self.definition
        if d.start not in d.nodes and d.start not in self.node_ids:
            self.problem(("start",), f"the start node {d.start!r} is not among the nodes")
        self._compile_edges()
        recorded = self._recorded_nodes()
        builder = WorkflowBuilder(
            d.start,
            name=d.name,
            version=d.version,
            max_supersteps=d.limits.max_supersteps,
            max_node_iterations=d.limits.max_node_iterations,
            max_concurrency=d.limits.max_concurrency,
            deterministic=d.limits.deterministic,
            retry=retry_policy(d.retry),
            four_eyes=d.four_eyes,
            limits=declared_limits(d.call_limits, self.problem),
            start_policy=start_policy_of(d.start_policy, self.problem, self._declared()),
        )
        self._add_state(builder, bool(recorded))
        add_search_fields(builder, d.search, self.problem, self._declared())
        self._add_types(builder)
        order = [d.start] if d.start in d.nodes else []
        order += [n for n in d.nodes if n != d.start]
        for node_id in order:
            self._add_node(builder, node_id, d.nodes[node_id], node_id in recorded)
        for index, edge in enumerate(d.edges):
            self._add_edge(builder, index, edge)
        try:
            workflow = builder.build()
        except WorkflowValidationError as error:
            # A node refused above (or a start not among the nodes) is said once, where it
            # is written; the builder's "unknown executor id" for it would say it again.
            said = {f"unknown executor id {n!r}" for n in {*self.node_ids, d.start}}
            for text in error.problems:
                if self.mistakes and ("unreachable" in text or text.endswith(tuple(said))):
                    continue  # an edge that was refused above left it unreached
                self._builder_problem(text)
            return None
        return workflow if not self.mistakes else None

    def _builder_problem(self, text: str) -> None:
        for where, path in self.edge_places:
            if text.startswith(f"{where}: "):
                self.problem(path, text.removeprefix(f"{where}: "))
                return
        match = re.match(r"executor '([^']+)'", text)
        if match and match.group(1) in self.definition.nodes:
            self.problem(("nodes", match.group(1)), text)
            return
        self.problem((), text)

    # -- state ------------------------------------------------------------------------
    def _add_state(self, builder: WorkflowBuilder, recorded: bool) -> None:
        d = self.definition
        for key, spec in d.state.items():
            reducer = None
            if spec.reducer is not None:
                try:
                    reducer = import_object(spec.reducer, self.sources.directory)
                except LookupError as error:
                    self.problem(("state", key, "reducer"), str(error))
                    continue
                if not callable(reducer):
                    self.problem(("state", key, "reducer"), f"{spec.reducer!r} is not callable")
                    continue
            builder.add_state(key, default=spec.default, reducer=reducer)
        if d.inputs:
            builder.add_state(INPUTS_KEY, default=None)
        if recorded:
            builder.add_state(NODES_KEY, default={}, reducer=merge_nodes)

    def _add_types(self, builder: WorkflowBuilder) -> None:
        for index, path in enumerate(self.definition.types):
            try:
                found = import_object(path, self.sources.directory)
            except LookupError as error:
                self.problem(("types", index), str(error))
                continue
            if not isinstance(found, type):
                self.problem(("types", index), f"{path!r} is a {type(found).__name__}, not a class")
                continue
            builder.register_type(found)

    # -- expressions ------------------------------------------------------------------
    def _names(self) -> list[str]:
        names = ["message"]
        if self.definition.state:
            names.append("state")
        if self.definition.inputs:
            names.append("inputs")
        return names

    def _declared(self) -> dict[str, Collection[str]]:
        """The fields of ``state`` and ``inputs`` an expression may read: those declared.

        As in a template: a state key is one the definition declares; inputs
        are checked only where they are declared (else the input is anything).
        """
        d = self.definition
        return {"state": d.state.keys(), **({"inputs": d.inputs.keys()} if d.inputs else {})}

    def _compile(self, where: Where, source: str, extra: tuple[str, ...] = ()) -> None:
        try:
            self.expressions[where] = compile_expression(
                source, [*self._names(), *extra], self._declared()
            )
        except ValueError as error:
            self.problem(where, str(error))

    def _compile_edges(self) -> None:
        for index, edge in enumerate(self.definition.edges):
            if isinstance(edge, schema.DirectEdge) and edge.when is not None:
                self._compile(("edges", index, "when"), edge.when)
            elif isinstance(edge, schema.FanOutEdge) and edge.select is not None:
                self._compile(("edges", index, "select"), edge.select, ("targets",))
            elif isinstance(edge, schema.SwitchEdge):
                for i, case in enumerate(edge.switch):
                    if isinstance(case, schema.Case):
                        self._compile(("edges", index, "switch", i, "when"), case.when)

    def _conditioned(self, node_id: str) -> bool:
        """Whether a condition or selector sits on an edge leaving ``node_id``."""
        for where in self.expressions:
            edge = self.definition.edges[int(where[1])]
            if getattr(edge, "source", None) == node_id:
                return True
        return False

    def _recorded_nodes(self) -> set[str]:
        """Nodes whose output some ``{{nodes.<id>.output}}`` reads."""
        found: set[str] = set()
        for node in self.definition.nodes.values():
            for lookup in lookups(compile_value(node.input, [])):
                if lookup.root == "nodes" and lookup.keys:
                    found.add(lookup.keys[0])
        return found

    # -- nodes ------------------------------------------------------------------------
    def _made(self, node_id: str, node: schema.Node) -> Made | None:
        where: Where = ("nodes", node_id)
        kind = node.kind()
        if kind is None:
            self.problem(where, "a node names exactly one of executor, agent, workflow or step")
            return None
        if kind != "agent" and (node.session is not None or node.approve_tools is not None):
            self.problem(where, "session and approve_tools are for agent nodes only")
        try:
            if kind == "executor":
                return executor_step(node_id, node.executor or "", self.sources.directory)
            if kind == "agent":
                return agent_step(node_id, node, self.sources.agents, self.sources.directory)
            if kind == "step":
                return builtin_step(node_id, node.step or "output")
        except LookupError as error:
            self.problem((*where, kind), str(error.args[0]))
            return None
        return self._subworkflow(node_id, node.workflow or "")

    def _subworkflow(self, node_id: str, name: str) -> Made | None:
        where: Where = ("nodes", node_id, "workflow")
        if name.endswith((".yaml", ".yml", ".json")):
            directory = self.sources.directory
            path = (directory / name) if directory is not None else None
            if path is None or not path.is_file():
                self.problem(where, f"no definition file {name!r} next to this one")
                return None
            try:
                inner = self.sources.load_file(path)
            except Exception as error:  # noqa: BLE001 - its file's problems, reported here
                problems = getattr(error, "problems", None) or (str(error),)
                for text in problems:
                    self.problem(where, f"in the sub-workflow: {text}")
                return None
        elif name in self.sources.workflows:
            inner = self.sources.workflows[name]
        else:
            known = ", ".join(sorted(self.sources.workflows)) or "none"
            self.problem(where, f"unknown workflow {name!r} (a file, or one of: {known})")
            return None
        return Made(SubWorkflow(inner, id=node_id))

    def _wrapping(self, node_id: str, node: schema.Node, recorded: bool) -> Wrapping | None:
        problems: list[str] = []
        compiled = compile_value(node.input, problems)
        for text in problems:
            self.problem(("nodes", node_id, "input"), text)
        for lookup in lookups(compiled):
            message = self._lookup_problem(lookup.root, lookup.keys)
            if message is not None:
                self.problem(("nodes", node_id, "input"), f"{{{{{lookup}}}}}: {message}")
        wrapping = Wrapping(
            input=compiled,
            has_input="input" in node.model_fields_set,
            input_source=node.input,
            inputs=dict(self.definition.inputs)
            if self.definition.inputs and node_id == self.definition.start
            else None,
            record_output=recorded,
            state_keys=tuple(self.definition.state),
            retry=retry_policy(node.retry),
            timeout=node.timeout,
            conditioned=self._conditioned(node_id),
            approvers=self._approvers(node_id, node),
            four_eyes=node.four_eyes,
            outcome=self._template(node_id, "outcome", node.outcome),
            outcome_summary=self._template(node_id, "outcome_summary", node.outcome_summary),
            outcome_source=(node.outcome, node.outcome_summary),
        )
        needed = (
            wrapping.has_input
            or wrapping.inputs is not None
            or recorded
            or wrapping.retry is not None
            or wrapping.timeout is not None
            or wrapping.conditioned
            or bool(wrapping.approvers)
            or wrapping.four_eyes is not None
            or wrapping.outcome is not None
        )
        return wrapping if needed else None

    def _template(self, node_id: str, field: str, value: str | None) -> Compiled:
        """A node's text field that may hold templates, compiled; each problem named."""
        if value is None:
            return None
        problems: list[str] = []
        compiled = compile_value(value, problems)
        for text in problems:
            self.problem(("nodes", node_id, field), text)
        for lookup in lookups(compiled):
            message = self._lookup_problem(lookup.root, lookup.keys)
            if message is not None:
                self.problem(("nodes", node_id, field), f"{{{{{lookup}}}}}: {message}")
        return compiled

    def _approvers(self, node_id: str, node: schema.Node) -> tuple[str, ...]:
        """The node's ``approvers``, each one checked (a problem names an entry matching no one)."""
        try:
            return check_approvers(node.approvers or ())
        except (TypeError, ValueError) as error:
            self.problem(("nodes", node_id, "approvers"), str(error))
            return ()

    def _lookup_problem(self, root: str, keys: tuple[str, ...]) -> str | None:
        d = self.definition
        if root == "inputs":
            if not keys:
                return None
            return None if keys[0] in d.inputs else f"no input {keys[0]!r} is declared"
        if root == "state":
            if not keys:
                return None
            return None if keys[0] in d.state else f"no state key {keys[0]!r} is declared"
        if root == "nodes":
            if not keys or keys[0] not in self.node_ids:
                return f"no node {keys[0] if keys else ''!r}"
            if len(keys) < 2 or keys[1] != "output":  # noqa: PLR2004 - nodes.<id>.output
                return "write nodes.<id>.output"
        return None

    def _add_node(
        self, builder: WorkflowBuilder, node_id: str, node: schema.Node, recorded: bool
    ) -> None:
        made = self._made(node_id, node)
        wrapping = self._wrapping(node_id, node, recorded)
        if made is None:
            return
        self.added.add(node_id)
        builder.register_type(*named_types(made.executor))
        limits = tuple(node.limits or ())
        if wrapping is None:
            if not limits:
                builder.add_executor(made.factory if made.factory is not None else made.executor)
            elif made.factory is not None:
                made_factory = made.factory
                builder.add_executor(lambda: limited(made_factory(), limits))
            else:
                # A copy: the executor an import path names may serve other workflows.
                builder.add_executor(limited(copy.copy(made.executor), limits))
            return
        factory = made.factory
        if factory is not None:
            chosen = wrapping

            def wrapped() -> Executor:
                return limited(DeclaredNode(factory(), node_id, chosen), limits)

            builder.add_executor(wrapped)
        else:
            builder.add_executor(limited(DeclaredNode(made.executor, node_id, wrapping), limits))

    # -- edges ------------------------------------------------------------------------
    def _known(self, at: Where, edge: Any) -> bool:
        """Whether every node ``edge`` names was added; unknown ones reported at their place."""
        named: list[tuple[str, Where]] = []
        for key in ("from", "to", "on_error", "fan_out", "fan_in", "handoff", "switch"):
            value = getattr(edge, "source" if key == "from" else key, None)
            if isinstance(value, str):
                named.append((value, (*at, key)))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    target = item if isinstance(item, str) else getattr(item, "to", None)
                    field = "default" if isinstance(item, schema.DefaultCase) else "to"
                    target = target or getattr(item, "default", None)
                    if isinstance(target, str):
                        path = (*at, key, i) if isinstance(item, str) else (*at, key, i, field)
                        named.append((target, path))
        fine = True
        for node_id, where in named:
            if node_id not in self.node_ids:
                self.problem(where, f"unknown node {node_id!r}")
                fine = False
            elif node_id not in self.added:
                fine = False  # its own problem is reported at the node
        return fine

    def _condition(self, where: Where, node: str) -> CelCondition | None:
        expression = self.expressions.get(where)
        return CelCondition(expression, condition_scope, node) if expression is not None else None

    def _add_edge(self, builder: WorkflowBuilder, index: int, edge: Any) -> None:
        at: Where = ("edges", index)
        if isinstance(edge, schema.DirectEdge):
            if self._known(at, edge):
                builder.add_edge(edge.source, edge.to, self._condition((*at, "when"), edge.source))
                self.edge_places.append((f"add_edge({edge.source!r} -> {edge.to!r})", at))
        elif isinstance(edge, schema.FanOutEdge):
            if self._known(at, edge):
                expression = self.expressions.get((*at, "select"))
                selector = (
                    CelSelector(expression, condition_scope, edge.source) if expression else None
                )
                builder.add_fan_out(edge.source, edge.fan_out, selector)
                self.edge_places.append((f"add_fan_out({edge.source!r} -> {edge.fan_out!r})", at))
        elif isinstance(edge, schema.FanInEdge):
            if self._known(at, edge):
                builder.add_fan_in(edge.fan_in, edge.to)
                self.edge_places.append((f"add_fan_in({edge.fan_in!r} -> {edge.to!r})", at))
        elif isinstance(edge, schema.SwitchEdge):
            if self._known(at, edge):
                cases: list[Case | Default] = []
                for i, case in enumerate(edge.switch):
                    if isinstance(case, schema.Case):
                        condition = self._condition((*at, "switch", i, "when"), edge.source)
                        if condition is not None:
                            cases.append(Case(condition, case.to))
                    else:
                        cases.append(Default(case.default))
                builder.add_switch(edge.source, cases)
                self.edge_places.append((f"add_switch({edge.source!r})", at))
        elif isinstance(edge, schema.HandoffEdge):
            if self._known(at, edge):
                builder.add_handoff(
                    edge.source, edge.handoff, require_approval=edge.require_approval
                )
                self.edge_places.append((f"add_handoff({edge.source!r} -> {edge.handoff!r})", at))
        elif isinstance(edge, schema.ErrorEdge) and self._known(at, edge):
            builder.add_error_edge(edge.source, edge.on_error)
            self.edge_places.append((f"add_error_edge({edge.source!r} -> {edge.on_error!r})", at))
