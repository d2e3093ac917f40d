"""The port between an agent executor and an agent library.

treadle runs agents through :class:`AgentAdapter`: one method,
``run_turn(turn, steps)``, runs one turn of the agent and returns what it
produced. The adapter does the library's work; the :class:`TurnSteps` it is
given make that work durable. So an adapter for another library (its model
calls, its tools) needs only to route:

* each model request through ``steps.model_request`` (the call returns the
  response as JSON text; after a crash the journal returns it instead),
* each tool call through ``steps.tool_call`` (likewise, keyed by the call's
  id, so replayed model responses find their tool results again),
* each call of a tool in ``turn.approve_tools`` through ``steps.approve``
  first,
* each streamed piece of a reply to ``steps.delta``,

and to hand a handoff back in :class:`TurnResult` when the model calls one
of the ``handoff_to_<id>`` tools made from ``turn.handoffs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._agents._values import ToolApproval, ToolDecision

DeltaKind = Literal["text", "tool_call"]


@dataclass(frozen=True, slots=True)
class HandoffTarget:
    """An agent executor this one may hand the conversation to (``add_handoff``).

    Attributes:
        id: The target's executor id; its tool is ``handoff_to_<id>``.
        description: What the target handles, for the tool's description.
    """

    id: str
    description: str | None = None

    PREFIX: ClassVar[str] = "handoff_to_"
    """What the name of every handoff's tool starts with."""

    @property
    def tool_name(self) -> str:
        """The name of the tool the model calls to hand off to this target."""
        return f"{self.PREFIX}{self.id}"


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """One turn for an adapter to run.

    Attributes:
        agent: The agent executor's id.
        prompt: The user's message (``None``: go on from the conversation,
            as after a handoff).
        history: The conversation so far, as the adapter's JSON messages.
        handoffs: The agents the model may hand the conversation to.
        approve_tools: Tools whose calls ask ``steps.approve`` first.
        conversation_id: Stable for the whole run.
        turn_id: Stable for this turn, however often it re-executes.
    """

    agent: str
    prompt: str | None
    history: Sequence[Any]
    handoffs: tuple[HandoffTarget, ...]
    approve_tools: frozenset[str]
    conversation_id: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one turn produced.

    Attributes:
        output: The agent's output (unused when it handed off).
        messages: The messages the turn added to the conversation, as JSON data.
        usage: Token usage of the turn (``requests``, ``input_tokens``,
            ``output_tokens``, ``tool_calls``).
        handoff_to: The id of the agent the model handed the conversation to.
        handoff_reason: The reason the model gave for it.
    """

    output: Any
    messages: list[Any]
    usage: dict[str, int]
    handoff_to: str | None = None
    handoff_reason: str | None = None


class TurnSteps(Protocol):
    """What treadle offers an adapter during a turn: durable steps, approvals, deltas."""

    async def model_request(self, call: Callable[[], Awaitable[str]]) -> str:
        """The next model request's response (JSON text): ``call()``'s, or the journal's.

        Requests are numbered in the order they are made, which a turn
        replays exactly, since every response it saw is replayed.
        """
        ...

    async def tool_call(self, call_id: str, call: Callable[[], Awaitable[str]]) -> str:
        """The outcome of the tool call ``call_id`` (JSON text): ``call()``'s, or the journal's.

        While ``call()`` runs, ``treadle.agents.idempotency_key()`` returns a
        key stable for this call across crashes and retries.
        """
        ...

    async def approve(self, approval: ToolApproval) -> ToolDecision:
        """Ask whoever answers the run's requests; the run waits durably for the answer."""
        ...

    def delta(self, kind: DeltaKind, text: str, part: int, tool: str | None = None) -> None:
        """Publish a piece of the reply being streamed, as an ``AgentDelta`` event."""
        ...


@runtime_checkable
class AgentAdapter(Protocol):
    """An agent library behind an :class:`~treadle.agents.AgentExecutor`.

    ``PydanticAIAdapter`` is the first; see the module docstring of
    ``treadle.agents`` for what another must do.
    """

    @property
    def name(self) -> str | None:
        """The agent's name: the executor's id unless it is given one."""
        ...

    @property
    def description(self) -> str | None:
        """What the agent handles, told to agents that may hand off to it."""
        ...

    @property
    def output_types(self) -> tuple[type, ...] | None:
        """The classes of the agent's outputs (``None``: unknown)."""
        ...

    async def run_turn(self, turn: AgentTurn, steps: TurnSteps) -> TurnResult:
        """Run one turn of the agent, its model requests and tools through ``steps``."""
        ...


@runtime_checkable
class ToolArgsChecker(Protocol):
    """An adapter that can check a tool's arguments before the tool is called (optional).

    With it, an edited call (``ToolDecision.edit``) is checked when the
    answer arrives, before it is kept: an edit that does not fit is refused
    (``InvalidResponseError``, 422, exit 2) and the request still waits.
    Without it, the agent library checks the arguments when the tool runs.
    """

    def tool_args_problems(self, tool: str, args: dict[str, Any]) -> list[str]:
        """What is wrong with ``args`` for ``tool``: ``loc: message`` each (``[]``: they fit)."""
        ...


@runtime_checkable
class ToolLister(Protocol):
    """An adapter that knows an agent's tools before it runs (optional).

    With it, ``approve_tools`` naming a tool the agent does not have is
    refused when the executor is made: a misspelt name would otherwise
    leave the real tool to run without the approval it was meant to wait for.
    """

    def tool_names(self) -> frozenset[str] | None:
        """The agent's tools; ``None`` where some come from toolsets known only as it runs."""
        ...
