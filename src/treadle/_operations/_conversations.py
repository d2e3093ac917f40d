"""A run's agent conversations, read a message at a time, for every front end.

An agent keeps its conversation in the run's state (``AgentOptions.
conversation_key``), in its library's JSON form: complete, and far too long
to read as one line. ``GET /api/runs/{id}`` and ``treadle show`` both show
it as a transcript (:func:`treadle._agents._transcript.transcript`), found
from the workflow's agents rather than guessed from a value's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._agents._executor import AgentExecutor
from treadle._agents._transcript import transcript

if TYPE_CHECKING:
    from collections.abc import Mapping

    from treadle._workflow._workflow import Workflow


def conversations(workflow: Workflow, state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The conversations of the workflow's agents in a run's state, each as a transcript.

    ``[{"key", "agents", "messages"}]``: the state key an agent keeps its
    conversation under (agents that share a key share a conversation), the
    agents that write it, and its messages in short (:func:`transcript`).
    """
    keys: dict[str, list[str]] = {}
    for executor_id in workflow.executor_ids:
        prototype = workflow.prototype(executor_id)
        if isinstance(prototype, AgentExecutor):
            keys.setdefault(prototype.options.conversation_key, []).append(executor_id)
    return [
        {"key": key, "agents": agents, "messages": transcript(state[key])}
        for key, agents in keys.items()
        if state.get(key)
    ]
