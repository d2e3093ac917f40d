"""The definition format: one set of pydantic models that both validates and is published.

The same models check a definition's shape when it loads and produce the
JSON Schema editors validate against (:func:`definition_schema`, committed
as ``docs/workflow.schema.json``), so the two can never disagree. The
models check shape only; what needs the whole definition (unknown node ids,
templates, expressions, import paths) is checked by ``_checks.py``.

An edge is told apart by the key that names its kind (``switch``,
``fan_out``, ``fan_in``, ``handoff``, ``on_error``; none: a direct edge),
so a mistake in one edge is reported against that kind alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$", max_length=100)]
"""A node id, state key or input name: letters, digits, ``_`` and ``-``, a letter first."""

ImportPath = Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")]
"""``package.module:attribute``."""

Expression = Annotated[str, Field(min_length=1, max_length=2000)]
"""A CEL expression (see ``_conditions.py``)."""

InputType = Literal["str", "int", "float", "bool", "list", "dict", "any"]
"""The types a run input may declare."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Retry(_Model):
    """A retry policy: attempts, and the exponential backoff between them (seconds)."""

    max_attempts: int = Field(default=3, ge=1)
    initial: float = Field(default=1.0, ge=0)
    maximum: float = Field(default=60.0, ge=0)
    multiplier: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.1, ge=0, le=1)


class Limits(_Model):
    """Caps on a run: supersteps, invocations per node, handlers at once."""

    max_supersteps: int = Field(default=1000, ge=1)
    max_node_iterations: int | None = Field(default=None, ge=1)
    max_concurrency: int | None = Field(default=None, ge=1)
    deterministic: bool = False


class CallLimitSpec(_Model):
    """A call limit (docs/flow-control.md): calls at once, calls per time, turns and priority."""

    concurrency: int | None = Field(default=None, ge=1)
    rate: str | None = Field(
        default=None,
        pattern=r"^\s*\d+\s*/\s*\d*\.?\d*\s*[A-Za-z]+\s*$",
        description="Calls started per window: `500/min`, `10/s`, `3/5s`, `1000/hour`.",
    )
    key: Expression | None = Field(
        default=None,
        description="Who a call is for (CEL over message, run_id, workflow, executor): "
        "keys take turns.",
    )
    priority: Expression | None = Field(
        default=None, description="An integer (CEL over the same): higher goes first."
    )
    tokens: str | None = Field(
        default=None,
        pattern=r"^\s*\d[\d_]*\.?\d*\s*[kmKM]?\s*/\s*\d*\.?\d*\s*[A-Za-z]+\s*$",
        description="Tokens used per window: `200k/min`, `1.5m/hour`; needs `estimate`.",
    )
    estimate: int | Expression | None = Field(
        default=None,
        description="Tokens a call reserves when it starts: a number, or CEL over the call.",
    )


class StateSpec(_Model):
    """A state key: its initial value and, by import path, how concurrent writes merge."""

    default: Any = None
    reducer: ImportPath | None = None


class SearchSpec(_Model):
    """A search field (docs/search.md): its kind, and a CEL expression its value comes from.

    Exactly one of ``input`` (over ``inputs``, computed once when the run is
    created) and ``state`` (over ``state``, computed at every commit; ``null``
    unsets the field).
    """

    type: Literal["text", "number", "time", "bool"]
    input: str | None = Field(default=None, max_length=2000)
    state: str | None = Field(default=None, max_length=2000)


class StartPolicySpec(_Model):
    """How starts of the workflow take turns (docs/flow-control.md), decided by the store.

    ``key`` is a CEL expression over ``inputs`` (the run's input) giving what
    "the same" means for ``singleton`` and ``debounce``.
    """

    key: str | None = Field(default=None, max_length=2000)
    singleton: bool = False
    concurrency: int | None = Field(default=None, ge=1)
    when_busy: Literal["queue", "refuse"] = "queue"
    debounce: float | None = Field(default=None, gt=0, description="Seconds.")


class Node(_Model):
    """One step: exactly one of ``executor``, ``agent``, ``workflow`` or ``step``.

    ``input`` (a value that may hold templates) replaces the message the
    node receives by what it resolves to, just before the node runs.
    """

    executor: ImportPath | None = None
    agent: str | None = Field(default=None, min_length=1)
    workflow: str | None = Field(default=None, min_length=1)
    step: Literal["output", "template"] | None = None
    input: Any = None
    retry: Retry | None = None
    timeout: float | None = Field(default=None, gt=0)
    session: bool | None = None
    approve_tools: list[str] | None = None
    approvers: list[str] | None = Field(
        default=None,
        description=(
            "Who may answer the requests this node asks (its tool approvals too): "
            "user names, `role:R` or `group:G`; none: anyone with the approver role."
        ),
    )
    four_eyes: bool | None = Field(
        default=None,
        description="Whether the person who started the run may not answer its requests.",
    )
    limits: list[Identifier] | None = Field(
        default=None,
        description="The call limits (`call_limits`, or the host's) each of its calls waits for.",
    )
    outcome: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "The run's outcome once this node has run (approved, rejected, ...), shown "
            "beside its status; may be a template such as {{message.verdict}}."
        ),
    )
    outcome_summary: str | None = Field(
        default=None,
        min_length=1,
        description="One line saying why, with the outcome; may hold templates.",
    )
    description: str | None = None

    def kind(self) -> str | None:
        """Which of the four kinds of step it is (``None``: not exactly one)."""
        kinds = [k for k in ("executor", "agent", "workflow", "step") if getattr(self, k)]
        return kinds[0] if len(kinds) == 1 else None


class DirectEdge(_Model):
    """``from`` → ``to``; with ``when``, only messages for which it is true."""

    source: Identifier = Field(alias="from")
    to: Identifier
    when: Expression | None = None


class FanOutEdge(_Model):
    """``from`` → every node of ``fan_out``, or those the ``select`` expression lists."""

    source: Identifier = Field(alias="from")
    fan_out: list[Identifier] = Field(min_length=1)
    select: Expression | None = None


class FanInEdge(_Model):
    """Every node of ``fan_in`` → ``to``, which gets one list once all have sent."""

    fan_in: list[Identifier] = Field(min_length=1)
    to: Identifier


class Case(_Model):
    """A switch case: messages for which ``when`` is true go ``to``."""

    when: Expression
    to: Identifier


class DefaultCase(_Model):
    """The switch branch taken when no case matched."""

    default: Identifier


def _case_kind(value: Any) -> str:
    return "default" if isinstance(value, dict) and "default" in value else "case"


SwitchCase = Annotated[
    Annotated[Case, Tag("case")] | Annotated[DefaultCase, Tag("default")],
    Discriminator(_case_kind),
]


class SwitchEdge(_Model):
    """``from`` → the first case whose ``when`` holds, else the ``default``."""

    source: Identifier = Field(alias="from")
    switch: list[SwitchCase] = Field(min_length=1)


class HandoffEdge(_Model):
    """Agents (or executors) ``from`` may hand the conversation to (``ctx.handoff``)."""

    source: Identifier = Field(alias="from")
    handoff: list[Identifier] = Field(min_length=1)
    require_approval: bool = False


class ErrorEdge(_Model):
    """``from``'s failures, once its retries are spent, go to ``on_error``."""

    source: Identifier = Field(alias="from")
    on_error: Identifier


_EDGE_KEYS = ("switch", "fan_out", "fan_in", "handoff", "on_error")


def _edge_kind(value: Any) -> str:
    if isinstance(value, dict):
        return next((key for key in _EDGE_KEYS if key in value), "direct")
    return next((key for key in _EDGE_KEYS if hasattr(value, key)), "direct")


EdgeSpec = Annotated[
    Annotated[DirectEdge, Tag("direct")]
    | Annotated[FanOutEdge, Tag("fan_out")]
    | Annotated[FanInEdge, Tag("fan_in")]
    | Annotated[SwitchEdge, Tag("switch")]
    | Annotated[HandoffEdge, Tag("handoff")]
    | Annotated[ErrorEdge, Tag("on_error")],
    Discriminator(_edge_kind),
]


class Definition(_Model):
    """A whole workflow definition (the root of a YAML or JSON file)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        title="treadle workflow definition",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    name: Identifier
    version: int = Field(default=1, ge=1)
    description: str | None = None
    start: Identifier
    inputs: dict[Identifier, InputType] = Field(default_factory=dict)
    types: list[ImportPath] = Field(
        default_factory=list,
        description=(
            "Classes (dataclasses, pydantic models, enums) the run's checkpoints may hold "
            "that no step names: `package.module:Class`."
        ),
    )
    state: dict[Identifier, StateSpec] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    call_limits: dict[Identifier, CallLimitSpec] = Field(
        default_factory=dict,
        description="Limits its nodes' calls share (docs/flow-control.md), by name.",
    )
    retry: Retry | None = None
    four_eyes: bool = Field(
        default=False,
        description="Whether the person who started a run may not answer its requests.",
    )
    search: dict[Identifier, SearchSpec] = Field(
        default_factory=dict,
        description="Search fields of each run, found by `treadle runs --where` (docs/search.md).",
    )
    start_policy: StartPolicySpec | None = Field(
        default=None,
        description=(
            "How starts take turns: one run per key, the workflow's own concurrency, "
            "debounce (docs/flow-control.md)."
        ),
    )
    nodes: dict[Identifier, Node] = Field(min_length=1)
    edges: list[EdgeSpec] = Field(default_factory=list)


def definition_schema() -> dict[str, Any]:
    """The JSON Schema of a definition (what ``docs/workflow.schema.json`` holds)."""
    return Definition.model_json_schema(by_alias=True)
