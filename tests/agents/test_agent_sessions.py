"""Conversations in state, sessions waiting for the user's next message, usage summed per run."""

from __future__ import annotations

import itertools
import operator
import sqlite3
from dataclasses import dataclass

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from scripted import chunks

from treadle import RunStatus, WorkflowBuilder, WorkflowContext, executor
from treadle.agents import AgentExecutor, AgentOptions, add_usage
from treadle.errors import WorkflowValidationError
from treadle.stores import SqliteStore


def echo_model() -> FunctionModel:
    """Replies ``"<n>: <the user's last words>"``, n counting the replies so far."""

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        n = sum(isinstance(m, ModelResponse) for m in messages)
        said = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        for chunk in chunks(f"{n}: {said[-1]}"):
            yield chunk

    return FunctionModel(stream_function=stream)


def session_workflow(**kwargs):
    agent = AgentExecutor(Agent(echo_model(), name="chat"), session=True, **kwargs)
    return WorkflowBuilder(agent, name="chat").add_edge(agent, agent)


async def test_a_session_replies_then_waits_for_each_next_message_until_none(tmp_path):
    workflow = session_workflow().build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        result = await workflow.run("hello", store=store, run_id="c1")
        assert (result.status, result.outputs) == (RunStatus.AWAITING_INPUT, ["0: hello"])
        result = await workflow.send_message("c1", "still there?", store=store)
        assert (result.status, result.outputs) == (
            RunStatus.AWAITING_INPUT,
            ["0: hello", "1: still there?"],
        )
        result = await workflow.send_message("c1", None, store=store)  # the user is done
    finally:
        await store.close()
    assert result.status is RunStatus.COMPLETED
    assert len(result.state["conversation"]) == 4  # two prompts, two replies
    assert result.state["usage"]["requests"] == 2


@dataclass(frozen=True)
class Question:
    topic: str
    words: int


async def test_typed_input_is_rendered_to_a_prompt_and_session_messages_are_converted(tmp_path):
    workflow = session_workflow(
        input_type=Question,
        options=AgentOptions(prompt=lambda q: f"{q.words} words on {q.topic}"),
    ).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        await workflow.run(Question("otters", 50), store=store, run_id="q1")
        result = await workflow.send_message("q1", {"topic": "voles", "words": 9}, store=store)
    finally:
        await store.close()
    assert result.outputs == ["0: 50 words on otters", "1: 9 words on voles"]


def test_a_session_agent_without_its_edge_to_itself_is_refused_at_build():
    # It waits for the next message along that edge: without it, the run failed after its
    # first turn had run (and been paid for), naming the edge to add.
    chat = AgentExecutor(Agent(echo_model(), name="chat"), session=True)
    with pytest.raises(WorkflowValidationError, match=r"add builder\.add_edge\('chat', 'chat'\)"):
        WorkflowBuilder(chat).build()
    WorkflowBuilder(chat).add_edge(chat, chat).build()


async def test_a_session_that_hears_nothing_before_its_timeout_ends(tmp_path):
    from treadle.testing import FakeClock  # noqa: PLC0415

    clock = FakeClock(start=1000.0)
    agent = AgentExecutor(
        Agent(echo_model(), name="chat"), session=True, options=AgentOptions(session_timeout=60)
    )
    workflow = WorkflowBuilder(agent, clock=clock).add_edge(agent, agent).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        waiting = await workflow.run("hello", store=store, run_id="t1")
        assert waiting.status is RunStatus.AWAITING_INPUT
        await clock.advance(61)
        ended = await workflow.resume("t1", store=store)
    finally:
        await store.close()
    assert (ended.status, ended.outputs) == (RunStatus.COMPLETED, ["0: hello"])


async def test_agents_of_one_superstep_append_to_one_declared_conversation_and_usage():
    ann = AgentExecutor(Agent(echo_model(), name="ann"))
    bob = AgentExecutor(Agent(echo_model(), name="bob"))

    @executor
    async def both(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(text)

    workflow = (
        WorkflowBuilder(both)
        .add_fan_out(both, [ann, bob])
        .add_state("conversation", default=[], reducer=operator.add)
        .add_state("usage", default={}, reducer=add_usage)
        .build()
    )
    result = await workflow.run("hi")
    assert result.outputs == ["0: hi", "0: hi"]
    prompts = [m for m in result.state["conversation"] if m["kind"] == "request"]
    assert len(prompts) == 2  # both turns, merged at one barrier in rank order
    assert result.state["usage"]["requests"] == 2


def stored_bytes(path) -> int:
    """What a store holds for its runs' checkpoints: frames plus pieces."""
    with sqlite3.connect(path) as db:
        frames = db.execute("SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM treadle_checkpoints")
        pieces = db.execute("SELECT COALESCE(SUM(LENGTH(blob)), 0) FROM treadle_pieces")
        return int(frames.fetchone()[0]) + int(pieces.fetchone()[0])


# Each turn reads back a longer conversation: 100 turns by default, the 200 under soak.
# A quarter at each end is compared: storing the whole conversation per turn would grow
# the last quarter's turns several times the first's.
@pytest.mark.parametrize("turns", [100, pytest.param(200, marks=pytest.mark.soak)])
async def test_a_long_conversation_grows_its_checkpoints_by_about_the_same_per_turn(
    tmp_path, turns
):
    """A turn stores what it added, not the conversation again (issue 17, must show 5)."""
    workflow = (
        session_workflow()
        .add_state("conversation", default=[], reducer=operator.add)
        .add_state("usage", default={}, reducer=add_usage)
        .build()
    )
    path = tmp_path / "runs.sqlite"
    store = SqliteStore(path)
    sizes = []
    try:
        await workflow.run("turn 0", store=store, run_id="long")
        sizes.append(stored_bytes(path))
        for turn in range(1, turns):
            result = await workflow.send_message("long", f"turn {turn}", store=store)
            sizes.append(stored_bytes(path))
    finally:
        await store.close()
    assert len(result.state["conversation"]) == 2 * turns
    growth = [b - a for a, b in itertools.pairwise(sizes)]
    quarter = turns // 4
    first, last = sum(growth[:quarter]), sum(growth[-quarter:])
    print(f"bytes per turn: first {quarter} {first / quarter:.0f}, last {last / quarter:.0f}")
    assert last / first < 2, (first, last)
