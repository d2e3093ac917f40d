"""A session whose every turn asks for an approval of its message (``asking``).

``asking`` takes a message as a turn: it asks ``{"text": message}`` for a
``bool``, yields ``"<message> approved"`` or ``"<message> refused"`` and
hands back to itself, whose ``Listen`` waits for the session's next
message; the message ``"stop"`` ends the session instead (the run
completes with its turn). Tests of input policies meeting a turn that rests on a request
build it under the policy they need (:func:`asking_session`).
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import InputPolicy, WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Listen:
    """What a turn hands back to the session: wait for the next message."""


@executor(id="asking")
async def asking(message: str | Listen, ctx: WorkflowContext) -> None:
    if isinstance(message, Listen):
        ctx.send_message(await ctx.wait_for_input(), target="asking")
        return
    ok = await ctx.request({"text": message}, bool)
    ctx.yield_output(f"{message} {'approved' if ok else 'refused'}")
    if message != "stop":
        ctx.send_message(Listen(), target="asking")


def asking_session(policy: InputPolicy, name: str = "asking"):
    """The session of ``asking`` under ``policy``, named ``name``."""
    return WorkflowBuilder(asking, name=name, input_policy=policy).add_edge(asking, asking).build()
