"""An agent turn's durable steps, made of one invocation's context.

:class:`ContextSteps` is the :class:`~treadle._agents._adapter.TurnSteps`
an adapter gets: every model request and tool call is a saved step of the
invocation (``ctx.saved_step``), checkpointed the moment it returns, so a
turn that runs again (after a crash, a retry, or the answer to an approval)
replays them from the journal instead of paying for them twice. Approvals
are durable requests; deltas are events.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from treadle._agents._events import AgentDelta
from treadle._agents._values import ToolApproval, ToolDecision

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from treadle._agents._adapter import DeltaKind
    from treadle._engine._context import WorkflowContext

_CALL_KEY: ContextVar[str | None] = ContextVar("treadle_agents_call_key", default=None)


def idempotency_key() -> str:
    """The idempotency key of the tool call running now, inside a tool an agent calls.

    ``"<invocation's idempotency key>/<tool call id>"``: the same each time
    this very call runs (a call a crash interrupted runs again, once its
    turn resumes), different for every other call. Pass it to a payment
    provider or any API that deduplicates requests, so the side effect
    happens once.

    Raises:
        RuntimeError: called outside a tool call of an ``AgentExecutor``.
    """
    key = _CALL_KEY.get()
    if key is None:
        msg = "idempotency_key() is known only inside a tool called by an AgentExecutor"
        raise RuntimeError(msg)
    return key


class ContextSteps:
    """The steps of one turn, over the invocation's ``ctx``.

    Model requests are saved as ``model:<n>`` (the n-th of the turn), tool
    calls as ``tool:<call id>``; a call id the model gives again in the
    same turn (some models number their calls afresh in each response) is
    another call all the same, saved as ``tool:<call id>#2`` (#3, ...), in
    the order the calls come, which a re-executed turn replays. Approvals
    are asked one at a time, in the order the calls reach them, so a turn
    that re-executes meets its recorded answers in the order it asked them.
    """

    __slots__ = ("_agent", "_approving", "_calls", "_ctx", "_requests")

    def __init__(self, ctx: WorkflowContext[Any], agent: str) -> None:
        self._ctx = ctx
        self._agent = agent
        self._requests = 0
        self._calls: dict[str, int] = {}  # each call id met in the turn: how many times
        self._approving = asyncio.Lock()

    async def model_request(self, call: Callable[[], Awaitable[str]]) -> str:
        """The response of the turn's next model request, from the journal if it has it."""
        key = f"model:{self._requests}"
        self._requests += 1
        return _text(key, await self._ctx.saved_step(key, call))

    async def tool_call(self, call_id: str, call: Callable[[], Awaitable[str]]) -> str:
        """The outcome of tool call ``call_id``, from the journal if it has it."""
        seen = self._calls[call_id] = self._calls.get(call_id, 0) + 1
        if seen > 1:  # the id of an earlier call of the turn: not that call's outcome
            call_id = f"{call_id}#{seen}"
        key = f"{self._ctx.idempotency_key}/{call_id}"

        async def run() -> str:
            token = _CALL_KEY.set(key)
            try:
                return await call()
            finally:
                _CALL_KEY.reset(token)

        step = f"tool:{call_id}"
        return _text(step, await self._ctx.saved_step(step, run))

    async def approve(self, approval: ToolApproval) -> ToolDecision:
        """Ask for a decision on ``approval``; the run rests until it is answered."""
        async with self._approving:
            return await self._ctx.request(approval, ToolDecision)

    def delta(self, kind: DeltaKind, text: str, part: int, tool: str | None = None) -> None:
        """Publish an ``AgentDelta`` now, if anyone listens to the run."""
        ctx = self._ctx
        if (text or tool) and ctx.listening:
            ctx.emit(
                AgentDelta(
                    run_id=ctx.run_id,
                    superstep=ctx.superstep,
                    executor_id=ctx.executor_id,
                    agent=self._agent,
                    kind=kind,
                    delta=text,
                    part=part,
                    tool=tool,
                )
            )


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        msg = f"saved step {key!r} holds {type(value).__name__}, not the JSON text it saved"
        raise TypeError(msg)
    return value
