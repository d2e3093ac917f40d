"""The values an agent step trades with the rest of a workflow.

Approvals (:class:`ToolApproval` asked, :class:`ToolDecision` answered),
the message a handoff delivers (:class:`AgentHandoff`), and the settings of
an agent executor (:class:`AgentOptions`). All are frozen dataclasses of
plain fields, so checkpoints store them, the CLI and the HTTP API answer
them as JSON, and the server derives an answer form from their schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable  # noqa: TC003 - field types, read at run time
from dataclasses import dataclass
from typing import Any, Literal

DecisionAction = Literal["approve", "edit", "refuse"]


@dataclass(frozen=True, slots=True)
class ToolApproval:
    """What an agent asks before calling a tool listed in ``approve_tools``.

    The payload of the request (``ctx.request``) the run waits on; answer it
    with a :class:`ToolDecision` (or its JSON, ``{"action": "approve"}``).

    Attributes:
        agent: The id of the agent executor that wants to call the tool.
        tool: The tool's name.
        args: The arguments the model chose, as JSON data.
        call_id: The model's id for this call (unique within the turn).
    """

    agent: str
    tool: str
    args: dict[str, Any]
    call_id: str


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """The answer to a :class:`ToolApproval`: approve, edit the arguments, or refuse.

    As JSON: ``{"action": "approve"}``, ``{"action": "edit", "args": {...}}``
    or ``{"action": "refuse", "reason": "..."}``. ``action`` has no
    default: a decision is always made by someone (``{}`` is refused,
    naming it, and a form shows no choice made). Edited arguments are
    checked against the tool's argument schema when the answer arrives,
    before it is kept: an edit that does not fit is refused, naming each
    field at fault, and the request still waits. A refusal never calls the
    tool: the model is told it was refused, with the reason, and carries on.

    Attributes:
        action: What to do with the call (required).
        args: The arguments to call the tool with instead (``"edit"`` only).
        reason: Why it was refused (``"refuse"`` only); the model sees it.
    """

    action: DecisionAction
    args: dict[str, Any] | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        """Refuse a decision whose fields contradict its action."""
        if self.action not in ("approve", "edit", "refuse"):
            msg = f"a tool decision's action is approve, edit or refuse, not {self.action!r}"
            raise ValueError(msg)
        if (self.action == "edit") != (self.args is not None):
            msg = "a tool decision gives args exactly when its action is 'edit'"
            raise ValueError(msg)
        if self.reason is not None and self.action != "refuse":
            msg = "only a refusal gives a reason"
            raise ValueError(msg)

    @classmethod
    def approve(cls) -> ToolDecision:
        """Call the tool with the model's arguments."""
        return cls("approve")

    @classmethod
    def edit(cls, args: dict[str, Any]) -> ToolDecision:
        """Call the tool with ``args`` instead of the model's."""
        return cls("edit", args=dict(args))

    @classmethod
    def refuse(cls, reason: str | None = None) -> ToolDecision:
        """Do not call the tool; the model is told so, with ``reason``."""
        return cls("refuse", reason=reason)


@dataclass(frozen=True, slots=True)
class AgentHandoff:
    """The message an agent executor receives when another hands it the conversation.

    Sent by the ``handoff_to_<id>`` tool the model of ``source`` called. The
    conversation itself is in the run's state; the receiving agent goes on
    from it with no new prompt.

    Attributes:
        source: The id of the agent executor that handed off.
        reason: Why, in the words of the model that handed off.
    """

    source: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class NextMessage:
    """A session agent's note to itself: wait for the user's next message.

    Sent along the agent's edge to itself after each reply of a session;
    handling it waits with ``ctx.wait_for_input()``.
    """

    agent: str


def tool_names(names: Iterable[str]) -> frozenset[str]:
    """``approve_tools`` as a set of names; ``TypeError`` for anything else."""
    if isinstance(names, str):
        msg = f"approve_tools takes tool names, not one string: {names!r}"
        raise TypeError(msg)
    found = frozenset(names)
    bad = [name for name in found if not isinstance(name, str) or not name]
    if bad:
        msg = f"approve_tools takes tool names, got {bad!r}"
        raise TypeError(msg)
    return found


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How an :class:`AgentExecutor` keeps its conversation and renders its input.

    Attributes:
        conversation_key: The state key holding the conversation (a list of
            messages in the agent library's JSON form). Agents that share a
            key share a conversation: a handoff carries it along. Declare it
            with ``add_state(key, default=[], reducer=operator.add)`` so
            agents running in one superstep may all append to it;
            undeclared, it works for one agent at a time.
        usage_key: The state key holding the run's token usage, summed over
            every turn of every agent writing it (``requests``,
            ``input_tokens``, ``output_tokens``, ``tool_calls``). Declare it
            with ``reducer=treadle.agents.add_usage`` for concurrent agents.
        prompt: Renders a typed input message as the turn's prompt. Default:
            a ``str`` as it is, anything else as JSON.
        session_timeout: Seconds a session waits for the user's next message
            before it ends (``None``: for ever).
    """

    conversation_key: str = "conversation"
    usage_key: str = "usage"
    prompt: Callable[[Any], str] | None = None
    session_timeout: float | None = None

    def __post_init__(self) -> None:
        """Refuse empty state keys and a timeout that is not a positive number."""
        for name in ("conversation_key", "usage_key"):
            key = getattr(self, name)
            if not isinstance(key, str) or not key:
                msg = f"{name} must be a non-empty string, got {key!r}"
                raise ValueError(msg)
        if self.prompt is not None and not callable(self.prompt):
            msg = f"prompt must be callable, got {self.prompt!r}"
            raise TypeError(msg)
        timeout = self.session_timeout
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            msg = f"session_timeout must be a positive number of seconds, got {timeout!r}"
            raise ValueError(msg)


USAGE_FIELDS = ("requests", "input_tokens", "output_tokens", "tool_calls")


def add_usage(total: dict[str, int] | None, more: dict[str, int]) -> dict[str, int]:
    """Sum two usage records (a state reducer: ``add_state("usage", reducer=add_usage)``)."""
    base = total or {}
    return {name: int(base.get(name, 0)) + int(more.get(name, 0)) for name in USAGE_FIELDS}
