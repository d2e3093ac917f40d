"""The agent executor: an agent's turns as invocations of an ordinary executor.

Each message an :class:`AgentExecutor` handles is one turn of its agent
(``_steps.py`` makes the turn's model requests and tool calls durable).
What the turn produced goes where any executor's output goes: along its
edges, or to the run's outputs. A turn that ends in a handoff sends an
:class:`AgentHandoff` to the target instead (``ctx.handoff``, so the
builder's ``add_handoff`` declares who may hand off to whom, and
``require_approval=True`` makes a human approve it). A session agent
replies, then waits for the user's next message in a new invocation.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import pydantic_core

from treadle._agents._adapter import (
    AgentAdapter,
    AgentTurn,
    HandoffTarget,
    ToolArgsChecker,
    ToolLister,
)
from treadle._agents._state import conversation, record_turn
from treadle._agents._steps import ContextSteps
from treadle._agents._values import (
    AgentHandoff,
    AgentOptions,
    NextMessage,
    ToolApproval,
    ToolDecision,
    tool_names,
)
from treadle._engine._delivery import HandoffRefused
from treadle._exceptions import RequestTimeoutError, RoutingError
from treadle._graph._edges import HandoffEdge
from treadle._graph._executor import Executor, HandlerSpec
from treadle._graph._typing import promotions, runtime_classes
from treadle._tasks import group_leaves
from treadle._values._actors import check_approvers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from treadle._agents._adapter import TurnResult
    from treadle._engine._context import WorkflowContext
    from treadle._graph._policies import RetryPolicy


class AgentExecutor(Executor):
    """An agent as a step of a workflow: each message it handles is one turn.

    Each model request and each tool call of a turn is journaled the moment
    it returns: after a crash the resumed turn replays them and calls
    neither again (a call in flight at the crash runs again, with the same
    :func:`~treadle.agents.idempotency_key`). The reply's pieces are
    published as :class:`~treadle.events.AgentDelta` events as they stream.
    The conversation and the token usage live in the run's state.

    It handles ``input_type`` messages (rendered to a prompt), an
    :class:`AgentHandoff` (the conversation handed to it by another agent)
    and a ``HandoffRefused`` (a human refused its handoff). Timeouts,
    retries and cancellation are an executor's: a retried turn replays what
    it journaled.

    Args:
        agent: A pydantic-ai ``Agent``, or any :class:`AgentAdapter`.
        id: Its id in the workflow (default: the agent's name); other
            agents hand off to it by this name.
        input_type: The class of the messages it takes as prompts.
        approve_tools: Tools whose every call first asks the run's
            requests for a :class:`ToolDecision` (a ``handoff_to_<id>``
            tool may be one).
        session: After each reply (an output of the run), wait for the
            user's next message (``send_message``) and take another turn;
            ``None`` ends the session. Needs the edge
            ``add_edge(agent, agent)`` that carries the wait.
        options: Where the conversation and usage are kept, how input
            becomes a prompt, how long a session waits.
        retry: Retry policy of its turns.
        timeout: Seconds a turn may take.
        approvers: Who may decide its tool approvals: user names,
            ``role:R`` or ``group:G`` (empty: anyone with the approver role).
        four_eyes: Whether the run's starter may not decide them (``None``:
            as the workflow says).
        limits: The call limits each turn waits for (``CallLimit`` names,
            e.g. the model provider's; see ``docs/flow-control.md``): a turn
            holds a slot of each while it runs, and gives them back when it
            replies, fails or waits for an approval.
    """

    def __init__(
        self,
        agent: Any,
        *,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        input_type: type = str,
        approve_tools: Iterable[str] = (),
        session: bool = False,
        options: AgentOptions | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        approvers: Iterable[str] = (),
        four_eyes: bool | None = None,
        limits: Iterable[str] = (),
    ) -> None:
        adapter = agent if isinstance(agent, AgentAdapter) else _pydantic_ai(agent)
        name = id if id is not None else adapter.name
        if not name:
            msg = f"{agent!r} has no name: give the agent one, or the executor an id="
            raise ValueError(msg)
        super().__init__(name, shareable=True, retry=retry, timeout=timeout, limits=tuple(limits))
        if not isinstance(input_type, type):
            msg = f"input_type must be a class, got {input_type!r}"
            raise TypeError(msg)
        self.adapter: AgentAdapter = adapter
        self.input_type = input_type
        self.approve_tools = tool_names(approve_tools)
        _check_tools_known(name, adapter, self.approve_tools)
        self.approvers = check_approvers(approvers)
        self.four_eyes = four_eyes
        self.session = bool(session)
        self.options = options if options is not None else AgentOptions()
        self.description = adapter.description
        self._specs = self._handler_table()
        self._own_cache: dict[type, HandlerSpec] = {}

    def needed_edges(self) -> tuple[str, ...]:
        """A session agent's edge to itself, along which it waits for the next message."""
        return (self.id,) if self.session else ()

    def _handler_table(self) -> tuple[HandlerSpec, ...]:
        outputs = self.adapter.output_types
        if self.session:
            sends: tuple[type, ...] | None = (NextMessage,)  # replies are outputs of the run
        else:
            sends = outputs
        kept = (ToolApproval, ToolDecision, AgentHandoff, NextMessage, *(outputs or ()))
        table = [
            _spec("turn", self._on_input, self.input_type, sends, kept),
            _spec("handoff", self._on_handoff, AgentHandoff, sends),
            _spec("handoff_refused", self._on_refused, HandoffRefused, sends),
        ]
        if self.session:
            table.append(_spec("next_message", self._on_next_message, NextMessage, sends))
        return tuple(table)

    def answer_problems(self, question: Any, answer: Any) -> list[str]:
        """An edit whose arguments do not fit the tool's schema, each field as ``args.<field>``.

        Checked where the answer arrives, so a wrong edit is refused before
        it is kept, rather than reaching the model as a failed call.
        """
        if not (
            isinstance(question, ToolApproval)
            and isinstance(answer, ToolDecision)
            and answer.action == "edit"
            and answer.args is not None
            and isinstance(self.adapter, ToolArgsChecker)
        ):
            return []
        problems = self.adapter.tool_args_problems(question.tool, answer.args)
        return [f"args.{problem}" for problem in problems]

    # -- the executor's handlers, by message type ------------------------------------
    def handler_specs(self) -> tuple[HandlerSpec, ...]:
        """Its handlers: a prompt, a handoff, a refused handoff (and a session's wait)."""
        return self._specs

    def find_handler(self, message_type: type) -> HandlerSpec | None:
        """The handler for a message class: the first its MRO finds (then numeric promotions)."""
        spec = self._own_cache.get(message_type)
        if spec is None:
            for klass in (*message_type.__mro__, *promotions(message_type)):
                spec = next((s for s in self._specs if klass in s.accepts), None)
                if spec is not None:
                    break
            if spec is None:
                return None
            self._own_cache[message_type] = spec
        return spec

    async def _on_input(self, message: Any, ctx: WorkflowContext[Any]) -> None:
        await self._take_turn(ctx, self._prompt(message))

    async def _on_handoff(self, handoff: AgentHandoff, ctx: WorkflowContext[Any]) -> None:
        # The conversation it is handed is in the state; with none there, the reason is all.
        prompt = None if conversation(ctx, self.options) else (handoff.reason or "")
        await self._take_turn(ctx, prompt)

    async def _on_refused(self, refused: HandoffRefused, ctx: WorkflowContext[Any]) -> None:
        await self._take_turn(ctx, f"Handing the conversation to {refused.target} was refused.")

    async def _on_next_message(self, note: NextMessage, ctx: WorkflowContext[Any]) -> None:
        del note
        try:
            message = await ctx.wait_for_input(timeout=self.options.session_timeout)
        except RequestTimeoutError:
            return  # the user went away: the session ends
        if message is None:
            return  # the user ended the session
        if isinstance(message, list) and not issubclass(self.input_type, list):
            # A debounced burst (InputPolicy.debounce): one turn on its messages, in order.
            prompt = "\n".join(self._prompt(self._as_input(each)) for each in message)
            await self._take_turn(ctx, prompt)
            return
        await self._take_turn(ctx, self._prompt(self._as_input(message)))

    # -- a turn --------------------------------------------------------------------
    async def _take_turn(self, ctx: WorkflowContext[Any], prompt: str | None) -> None:
        turn = AgentTurn(
            agent=self.id,
            prompt=prompt,
            history=conversation(ctx, self.options),
            handoffs=self._handoff_targets(ctx),
            approve_tools=self.approve_tools,
            conversation_id=ctx.run_id,
            turn_id=ctx.idempotency_key,
        )
        try:
            result = await self.adapter.run_turn(turn, ContextSteps(ctx, self.id))
        except BaseExceptionGroup as group:  # a task group of the library's wrapped a wait
            flow = _control_flow(group)
            if flow is None:
                raise
            raise flow from None
        record_turn(ctx, self.options, result)
        _count_tokens(ctx, result)
        usage = result.usage
        ctx.report_tokens(usage.get("input_tokens", 0) + usage.get("output_tokens", 0))
        self._hand_on(ctx, result)

    def _hand_on(self, ctx: WorkflowContext[Any], result: TurnResult) -> None:
        """Hand the turn's outcome on: a handoff, a session's reply, or an output."""
        if result.handoff_to is not None:
            handoff = AgentHandoff(self.id, result.handoff_reason)
            ctx.handoff(result.handoff_to, handoff, reason=result.handoff_reason)
        elif self.session:
            ctx.yield_output(result.output)
            try:
                ctx.send_message(NextMessage(self.id), target=self.id)
            except RoutingError as error:
                msg = (
                    f"session agent {self.id!r} waits for the next message along its edge to "
                    f"itself: add builder.add_edge({self.id!r}, {self.id!r})"
                )
                raise RoutingError(msg) from error
        elif ctx.has_edges():
            ctx.send_message(result.output)
        else:
            ctx.yield_output(result.output)

    def _handoff_targets(self, ctx: WorkflowContext[Any]) -> tuple[HandoffTarget, ...]:
        """The agents the workflow lets this one hand off to (``add_handoff``), in order."""
        found: dict[str, HandoffTarget] = {}
        for edge in ctx.graph_edges():
            if not isinstance(edge, HandoffEdge) or edge.source != self.id:
                continue
            for target in edge.targets:
                prototype = ctx.prototype(target)
                if target in found or prototype.find_handler(AgentHandoff) is None:
                    continue
                described = getattr(prototype, "description", None)
                found[target] = HandoffTarget(
                    target, described if isinstance(described, str) else None
                )
        return tuple(found.values())

    def _prompt(self, message: Any) -> str:
        render = self.options.prompt
        if render is not None:
            return render(message)
        if isinstance(message, str):
            return message
        return pydantic_core.to_json(message).decode()

    def _as_input(self, message: Any) -> Any:
        """A session's next message as ``input_type`` (JSON from a CLI or the API is converted)."""
        if isinstance(message, self.input_type):
            return message
        from pydantic import TypeAdapter  # noqa: PLC0415 - only for a converted message

        return TypeAdapter(self.input_type).validate_python(message)


def _spec(
    name: str,
    fn: Callable[..., Any],
    accepts: type,
    sends: tuple[type, ...] | None,
    kept: tuple[type, ...] = (),
) -> HandlerSpec:
    return HandlerSpec(
        name=name,
        fn=fn,
        accepts=runtime_classes(accepts),
        sends=sends,
        is_async=inspect.iscoroutinefunction(fn),
        bound=False,
        annotations=(accepts, *(sends or ()), *kept),
    )


def _count_tokens(ctx: WorkflowContext[Any], result: TurnResult) -> None:
    """Report the turn's tokens to the run's metrics (if it has any), by the model that answered."""
    metrics = ctx.metrics
    if metrics is None:
        return
    usage = result.usage
    metrics.agent_tokens(
        _model_of(result.messages), usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    )


def _model_of(messages: list[Any]) -> str:
    """The model that gave the turn's last response (``unknown`` if the messages do not say)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("kind") == "response":
            name = message.get("model_name")
            if name:
                return str(name)
    return "unknown"


def _control_flow(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The suspension (or cancellation) a group carries, if it carries one."""
    return next((e for e in group_leaves(group) if not isinstance(e, Exception)), None)


def _pydantic_ai(agent: Any) -> AgentAdapter:
    """The pydantic-ai adapter of ``agent`` (pydantic-ai is imported only then)."""
    from treadle._agents._pydantic_ai import PydanticAIAdapter  # noqa: PLC0415 - the extra

    return PydanticAIAdapter(agent)


def _check_tools_known(name: str, adapter: AgentAdapter, approve_tools: frozenset[str]) -> None:
    """Refuse ``approve_tools`` naming a tool the agent does not have, where its tools are known.

    Raises:
        ValueError: a name matches none of the agent's tools (naming them).
    """
    known = adapter.tool_names() if isinstance(adapter, ToolLister) else None
    # A handoff's tool is the workflow's (add_handoff), made as the turn runs: not the agent's.
    own = {tool for tool in approve_tools if not tool.startswith(HandoffTarget.PREFIX)}
    unknown = sorted(own - known) if known is not None else []
    if unknown:
        has = ", ".join(sorted(known or ())) or "none"
        msg = (
            f"agent {name!r} has no tool {', '.join(map(repr, unknown))} to ask approval for "
            f"(its tools: {has}): a misspelt name would let the real tool run unapproved"
        )
        raise ValueError(msg)
