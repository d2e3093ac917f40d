"""Agent turns report their tokens by model to the run's metrics (docs/observing.md).

Two turns of a pydantic-ai agent on a function model: the tokens Prometheus
is shown, by model and kind, equal the usage the run keeps in its state.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from pydantic_ai import Agent
from pydantic_ai.models.function import AgentInfo, FunctionModel

from treadle import RunOptions, WorkflowBuilder
from treadle._operations._prometheus import PrometheusMetrics
from treadle.agents import AgentExecutor
from treadle.stores import SqliteStore


def _model() -> FunctionModel:
    async def stream(messages, info: AgentInfo):
        yield "sure, "
        yield "done"

    return FunctionModel(stream_function=stream, model_name="echo-1")


async def test_agent_tokens_are_counted_by_model_as_the_run_keeps_its_usage(tmp_path):
    agent = AgentExecutor(Agent(_model(), name="chat"), session=True)
    workflow = WorkflowBuilder(agent, name="chat").add_edge(agent, agent).build()
    store = SqliteStore(tmp_path / "runs.sqlite")
    exposed = PrometheusMetrics(store)
    options = RunOptions(metrics=exposed.metrics)
    try:
        await workflow.run("hello", store=store, run_id="c1", options=options)
        await workflow.send_message("c1", "again", store=store, options=options)
        result = await workflow.send_message("c1", None, store=store, options=options)
        text = (await exposed.scrape()).decode()
    finally:
        exposed.close()
        await store.close()
    tokens = {
        (s.labels["model"], s.labels["kind"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "treadle_agent_tokens"
        for s in family.samples
    }
    usage = result.state["usage"]
    assert usage["input_tokens"] > 0
    assert tokens == {
        ("echo-1", "input"): usage["input_tokens"],
        ("echo-1", "output"): usage["output_tokens"],
    }
