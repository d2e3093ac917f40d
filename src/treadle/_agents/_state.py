"""Where a turn's conversation and usage go: the run's shared state.

A turn adds its messages to the conversation key and its usage to the
usage key, committed at the invocation's barrier with everything else it
did (a turn that suspends or fails adds nothing). Declared with a reducer
(``operator.add`` for the conversation, ``add_usage`` for usage), a key
gets only what the turn added, merged at commit, so agents running in one
superstep may all write it; undeclared, it gets the whole new value. Either
way the new conversation list begins with the very message objects of the
old one, so a checkpoint stores only the appended messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._agents._values import add_usage

if TYPE_CHECKING:
    from treadle._agents._adapter import TurnResult
    from treadle._agents._values import AgentOptions
    from treadle._engine._context import WorkflowContext


def conversation(ctx: WorkflowContext[Any], options: AgentOptions) -> list[Any]:
    """The conversation so far, as this invocation sees it."""
    found = ctx.state.get(options.conversation_key)
    return list(found) if found else []


def record_turn(ctx: WorkflowContext[Any], options: AgentOptions, result: TurnResult) -> None:
    """Add the turn's messages and usage to the run's state (at the barrier)."""
    state = ctx.state
    key = options.conversation_key
    if result.messages:
        if ctx.is_reduced(key):
            state.set(key, list(result.messages))
        else:
            state.set(key, [*(state.get(key) or ()), *result.messages])
    key = options.usage_key
    if ctx.is_reduced(key):
        state.set(key, dict(result.usage))
    else:
        state.set(key, add_usage(state.get(key), result.usage))
