"""An agent turn with two tool calls, for a process the tests SIGKILL between them.

``python kill_app.py run|resume|whole STORE SIDE RUN_ID`` runs the run (and
in ``run`` mode hangs in the second tool call, after writing the marker
``SIDE.shipping``, so the test can kill the process with the first call
journaled and the second in flight), resumes it, or runs it uninterrupted.
Every model request, tool call and the idempotency key each tool call
saw are counted in the side SQLite table SIDE. It prints the run's output
and its conversation with the volatile fields (timestamps, ids) dropped.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from pydantic_ai import Agent
from scripted import Call, count, last_tool_return, scripted

from treadle import WorkflowBuilder
from treadle.agents import AgentExecutor, idempotency_key
from treadle.stores import SqliteStore

_VOLATILE = {"timestamp", "run_id", "conversation_id", "provider_response_id"}


def build(side: str, hang: bool):
    model = scripted(
        [Call("charge", {"cents": 4200}, id="charge-1")],
        [Call("ship", {"to": "ann"}, id="ship-1")],
        lambda messages: f"Charged and {last_tool_return(messages)}.",
        on_request=lambda n: count(side, f"model:{n}"),
    )
    agent = Agent(model, name="shop")

    @agent.tool_plain
    def charge(cents: int) -> str:
        count(side, f"charge key {idempotency_key()}")
        return f"charge #{count(side, 'charge')} of {cents}"

    @agent.tool_plain
    async def ship(to: str) -> str:
        count(side, f"ship key {idempotency_key()}")
        calls = count(side, "ship")
        if hang and calls == 1:  # in flight when the process dies
            Path(side + ".shipping").touch()  # noqa: ASYNC240 - a marker, once
            await asyncio.sleep(3600)
        return f"shipped to {to}"

    return WorkflowBuilder(AgentExecutor(agent), name="shop").build()


def steady(value: object) -> object:
    """``value`` without the fields that differ between two runs of the same conversation."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


async def main(mode: str, store_path: str, side: str, run_id: str) -> None:
    store = SqliteStore(store_path)
    try:
        workflow = build(side, hang=mode == "run")
        if mode == "resume":
            result = await workflow.resume(run_id, store=store)
        else:
            result = await workflow.run("Buy and ship it.", store=store, run_id=run_id)
        report = {
            "status": result.status.value,
            "outputs": result.outputs,
            "conversation": steady(result.state["conversation"]),
            "usage": result.state["usage"],
        }
        print(json.dumps(report))
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
