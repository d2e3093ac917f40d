"""pydantic-ai behind the agent adapter port: :class:`PydanticAIAdapter`.

A turn is one ``agent.run`` with a per-turn capability, :class:`_Journal`,
that hooks the run at the three places durability needs:

* ``get_wrapper_model``: every model request goes through
  :class:`_JournaledModel`, which asks the turn's steps for the response;
  only when the journal lacks it does it call the real model, streaming the
  reply so each piece is published as it arrives, and saves the final
  ``ModelResponse`` as JSON. Replayed responses carry the same tool call
  ids, so the tool calls they ask for find their journaled results.
* ``before_tool_validate``: a tool listed in ``approve_tools`` waits for a
  decision before its arguments are even validated; edited arguments were
  checked against the tool's schema when the answer arrived
  (:meth:`PydanticAIAdapter.tool_args_problems`), and pydantic-ai checks
  them again as it would the model's; a refusal is a ``ToolFailed`` the
  model reads.
* ``wrap_tool_execute``: every tool call is a journaled step (its result, or
  the retry or failure it ended in); a ``handoff_to_<id>`` call ends the
  turn with the conversation so far.

pydantic-ai does not see treadle's control flow: a durable wait raises a
``BaseException`` that passes through ``agent.run`` untouched.
"""

from __future__ import annotations

import functools
import json
import math
import types
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union, get_origin

import pydantic_core
from pydantic import TypeAdapter
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ModelHTTPError,
    ModelRetry,
    SkipToolExecution,
    ToolFailed,
    ToolFailedError,
    ToolRetryError,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturn,
    ToolReturnPart,
    tool_return_ta,
)
from pydantic_ai.models import CompletedStreamedResponse, Model, StreamedResponse
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.toolsets import FunctionToolset

from treadle._agents._adapter import AgentTurn, HandoffTarget, TurnResult, TurnSteps
from treadle._agents._values import ToolApproval
from treadle._exceptions import ProviderBusyError
from treadle._graph._typing import runtime_classes
from treadle._values._strict import fit_schema

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from pydantic_ai.capabilities import RawToolArgs, ValidatedToolArgs, WrapToolExecuteHandler
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.usage import RunUsage

_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_TOOL_RETURN: TypeAdapter[ToolReturn[Any]] = TypeAdapter(ToolReturn[Any])
_UNIONS = (Union, types.UnionType)


class PydanticAIAdapter:
    """A pydantic-ai ``Agent`` as the agent of an :class:`~treadle.agents.AgentExecutor`.

    ``AgentExecutor(agent)`` makes one of these from a pydantic-ai agent
    itself; make it yourself to pass ``deps`` or to turn streaming off.

    Args:
        agent: The pydantic-ai agent. Its model, tools, instructions and
            output type are used as they are.
        deps: The ``deps`` every turn runs with (its tools' ``ctx.deps``).
        stream: Stream each model reply, publishing its pieces as
            ``AgentDelta`` events as they arrive (default). A
            ``FunctionModel`` given only a non-streaming ``function`` is
            never streamed.
    """

    def __init__(self, agent: Agent[Any, Any], *, deps: Any = None, stream: bool = True) -> None:
        if not isinstance(agent, Agent):
            msg = f"PydanticAIAdapter takes a pydantic_ai.Agent, got {agent!r}"
            raise TypeError(msg)
        self.agent = agent
        self.deps = deps
        self.stream = stream

    def __repr__(self) -> str:
        return f"PydanticAIAdapter({self.agent.name!r})"

    @property
    def name(self) -> str | None:
        """The agent's name."""
        return self.agent.name

    @property
    def description(self) -> str | None:
        """The agent's description, if it has one."""
        return self.agent.description

    @property
    def output_types(self) -> tuple[type, ...] | None:
        """The classes of the agent's output when its ``output_type`` is a class or a union."""
        spec: Any = self.agent.output_type
        if isinstance(spec, type) or get_origin(spec) in _UNIONS:
            return runtime_classes(spec)
        return None

    def tool_names(self) -> frozenset[str] | None:
        """The agent's function tools; ``None`` if it has other toolsets (an MCP server's)."""
        names: set[str] = set()
        for toolset in self.agent.toolsets:
            if not isinstance(toolset, FunctionToolset):
                return None
            names.update(toolset.tools)
        return frozenset(names)

    def tool_args_problems(self, tool: str, args: dict[str, Any]) -> list[str]:
        """What is wrong with ``args`` for the agent's function tool ``tool``, checked strictly.

        By the rule every answer passes (``docs/values.md``): nothing is
        coerced, a key the tool does not take is named. ``[]`` for a tool
        of another kind of toolset: pydantic-ai checks those when called.
        """
        for toolset in self.agent.toolsets:
            found = toolset.tools.get(tool) if isinstance(toolset, FunctionToolset) else None
            if found is not None:
                schema = found.function_schema
                _, problems = fit_schema(
                    args,
                    dict(schema.json_schema),
                    functools.partial(schema.validator.validate_json, strict=True),
                )
                return problems
        return []

    async def run_turn(self, turn: AgentTurn, steps: TurnSteps) -> TurnResult:
        """Run ``agent.run`` once, its model requests and tool calls journaled by ``steps``."""
        history = ModelMessagesTypeAdapter.validate_python(list(turn.history))
        journal = _Journal(steps=steps, turn=turn, stream=self.stream)
        toolsets = [_handoff_toolset(turn.handoffs)] if turn.handoffs else None
        try:
            result = await self.agent.run(
                turn.prompt,
                message_history=history or None,
                deps=self.deps,
                run_id=turn.turn_id,
                conversation_id=turn.conversation_id,
                capabilities=[journal],
                toolsets=toolsets,
                infer_name=False,
            )
        except _HandedOff as handoff:
            added = [*handoff.messages[len(history) :], _closing(handoff)]
            return TurnResult(
                None, _plain(added), _usage(handoff.usage), handoff.target, handoff.reason
            )
        except ModelHTTPError as error:
            if error.status_code != TOO_MANY_REQUESTS:
                raise
            raise _busy(error) from error
        return TurnResult(result.output, _plain(result.new_messages()), _usage(result.usage))


TOO_MANY_REQUESTS = 429
BUSY_WAIT = 1.0
"""Seconds a 429 without ``Retry-After`` slows the step's limits down."""

LONGEST_BUSY_WAIT = 300.0
"""The most seconds one 429 slows the step's limits down, whatever its ``Retry-After``.

The header is the provider's word, not the user's: a value of days (a quota
reset, a broken proxy, a hostile endpoint) would stop every call under the
limit, in every process, for that long. Past this the call goes again and
may be turned away again; after 10 such answers in a row
(``treadle._engine._invoke.BUSY_TRIES``) the step fails as for any other
error. (pydantic-ai's own retrying transport waits five minutes at most too.)
"""


def _busy(error: ModelHTTPError) -> ProviderBusyError:
    """The provider's 429 as treadle's: its limits slow down for its ``Retry-After``."""
    retry_after = getattr(error, "retry_after", None)  # read from the headers by pydantic-ai
    usable = isinstance(retry_after, int | float) and math.isfinite(retry_after)
    asked = max(float(retry_after), 0.0) if usable else BUSY_WAIT  # type: ignore[arg-type]
    message = f"model {error.model_name!r} answered 429"
    if asked > LONGEST_BUSY_WAIT:
        message += f" asking to wait {asked:g} s; waiting {LONGEST_BUSY_WAIT:g} s, the most"
    return ProviderBusyError(min(asked, LONGEST_BUSY_WAIT), message)


class _HandedOff(BaseException):
    """Ends a turn whose model called a ``handoff_to_<id>`` tool (never leaves the adapter)."""

    def __init__(
        self, target: str, reason: str | None, call: ToolCallPart, messages: list[ModelMessage]
    ) -> None:
        super().__init__(target)
        self.target = target
        self.reason = reason
        self.call = call
        self.messages = messages
        self.usage: RunUsage | None = None


@dataclass(eq=False)  # compared and hashed by identity, as one turn's own
class _Journal(AbstractCapability[Any]):
    """The per-turn capability: journaled model requests and tools, approvals, handoffs."""

    steps: TurnSteps
    turn: AgentTurn
    stream: bool
    handoffs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.handoffs = {target.tool_name: target.id for target in self.turn.handoffs}

    def get_wrapper_model(self, model: Model) -> Model | None:
        """Every request of the turn goes through the journal."""
        return _JournaledModel(model, self)

    def streams(self, model: Model) -> bool:
        """Whether to stream ``model``'s replies (a function model may not stream)."""
        inner = model
        while isinstance(inner, WrapperModel):
            inner = inner.wrapped
        return self.stream and not (
            isinstance(inner, FunctionModel) and inner.stream_function is None
        )

    def publish(self, event: ModelResponseStreamEvent) -> None:
        """Publish a streamed piece of a reply as a delta (text or tool call arguments)."""
        steps = self.steps
        if isinstance(event, PartStartEvent):
            part = event.part
            if isinstance(part, TextPart):
                steps.delta("text", part.content, event.index)
            elif isinstance(part, ToolCallPart):
                steps.delta("tool_call", _args_text(part.args), event.index, part.tool_name)
        elif isinstance(event, PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextPartDelta):
                steps.delta("text", delta.content_delta, event.index)
            elif isinstance(delta, ToolCallPartDelta) and isinstance(delta.args_delta, str):
                steps.delta("tool_call", delta.args_delta, event.index, delta.tool_name_delta)

    async def before_tool_validate(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: RawToolArgs,
    ) -> RawToolArgs:
        """Ask for a decision on a call of a tool in ``approve_tools``, before it is validated."""
        del ctx, tool_def
        if call.tool_name not in self.turn.approve_tools:
            return args
        asked = ToolApproval(
            self.turn.agent, call.tool_name, call.args_as_dict(), call.tool_call_id
        )
        decision = await self.steps.approve(asked)
        if decision.action == "refuse":
            reason = f": {decision.reason}" if decision.reason else ""
            msg = f"The call of {call.tool_name} was refused{reason}"
            raise ToolFailed(msg)
        if decision.action == "edit" and decision.args is not None:
            call.args = dict(decision.args)  # the history shows what was called
            call.id = None
            return dict(decision.args)
        return args

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Run the call as a journaled step; a handoff call ends the turn instead."""
        del tool_def
        target = self.handoffs.get(call.tool_name)
        if target is not None:
            reason = args.get("reason")
            handoff = _HandedOff(target, reason if isinstance(reason, str) else None, call, [])
            handoff.messages = list(ctx.messages)
            handoff.usage = ctx.usage
            raise handoff

        ran = False

        async def execute() -> str:
            nonlocal ran
            ran = True
            return await _tool_outcome(handler, args)

        value = _replay_tool(await self.steps.tool_call(call.tool_call_id, execute))
        if ran:
            return value
        # From the journal: pydantic-ai counts a skipped call as made, as it was.
        raise SkipToolExecution(value)


class _JournaledModel(WrapperModel):
    """The model of a turn: each request's response from the journal, or made and saved."""

    def __init__(self, wrapped: Model, journal: _Journal) -> None:
        super().__init__(wrapped)
        self._journal = journal

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """The response, from the journal if this request was made before, else made now."""

        async def call() -> str:
            response = await self._live(messages, model_settings, model_request_parameters)
            return _RESPONSE.dump_json(response).decode()

        # A live response goes through JSON too, so a turn sees the same either way.
        return _RESPONSE.validate_json(await self._journal.steps.model_request(call))

    async def _live(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        wrapped = self.wrapped
        if not self._journal.streams(wrapped):
            return await wrapped.request(messages, model_settings, model_request_parameters)
        async with wrapped.request_stream(
            messages, model_settings, model_request_parameters
        ) as stream:
            async for event in stream:
                self._journal.publish(event)
            return stream.get()

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """A streamed request, for runs that stream: the whole response, then its events.

        The deltas were published as the model streamed (or not at all, when
        replayed); pydantic-ai's own consumers get the events made from it.
        """
        del run_context
        response = await self.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=True
        )


async def _tool_outcome(handler: WrapToolExecuteHandler, args: ValidatedToolArgs) -> str:
    """Call the tool; its result, retry or failure as JSON text (what the journal keeps)."""
    try:
        value = await handler(args)
    except ToolRetryError as retry:
        cause = retry.__cause__
        text = cause.message if isinstance(cause, ModelRetry) else str(retry)
        return json.dumps({"retry": text})
    except ToolFailedError as failed:
        cause = failed.__cause__
        text = cause.message if isinstance(cause, ToolFailed) else str(failed)
        return json.dumps({"failed": text})
    if isinstance(value, ToolReturn):
        return json.dumps({"tool_return": _TOOL_RETURN.dump_python(value, mode="json")})
    return json.dumps({"ok": tool_return_ta.dump_python(value, mode="json")})


def _replay_tool(text: str) -> Any:
    """A tool call's journaled outcome, as the tool's result (or the retry or failure it raised)."""
    outcome = pydantic_core.from_json(text)
    if "retry" in outcome:
        raise ModelRetry(outcome["retry"])
    if "failed" in outcome:
        raise ToolFailed(outcome["failed"])
    if "tool_return" in outcome:
        return _TOOL_RETURN.validate_python(outcome["tool_return"])
    return outcome["ok"]


def _handoff_toolset(targets: tuple[HandoffTarget, ...]) -> FunctionToolset[Any]:
    """One ``handoff_to_<id>(reason)`` tool per target (the journal intercepts their calls)."""

    def handoff(reason: str) -> str:  # never called: the journal ends the turn first
        return reason

    tools = [
        Tool(
            handoff,
            takes_ctx=False,
            name=target.tool_name,
            description=(
                f"Hand the conversation to the {target.id} agent"
                + (f", which handles: {target.description}" if target.description else "")
                + ". Say why in `reason`."
            ),
        )
        for target in targets
    ]
    return FunctionToolset(tools)


def _closing(handoff: _HandedOff) -> ModelRequest:
    """The tool returns that close the handing-off response (every call in it needs one)."""
    parts: list[ToolReturnPart] = []
    last = handoff.messages[-1] if handoff.messages else None
    calls = [p for p in last.parts if isinstance(p, ToolCallPart)] if last is not None else []
    for call in calls or [handoff.call]:
        handed = call.tool_call_id == handoff.call.tool_call_id
        content = (
            f"Handed the conversation to {handoff.target}."
            if handed
            else f"Not run: the conversation was handed to {handoff.target}."
        )
        parts.append(ToolReturnPart(call.tool_name, content, call.tool_call_id))
    return ModelRequest(parts=parts)


def _plain(messages: list[ModelMessage]) -> list[Any]:
    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    return dumped


def _usage(usage: RunUsage | None) -> dict[str, int]:
    if usage is None:
        return {"requests": 0, "input_tokens": 0, "output_tokens": 0, "tool_calls": 0}
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def _args_text(args: object) -> str:
    if args is None:
        return ""
    return args if isinstance(args, str) else pydantic_core.to_json(args).decode()
