"""Call limits in a definition: ``call_limits:`` with CEL keys, and nodes naming them."""

from __future__ import annotations

import asyncio

import pytest
import steps

import treadle
from treadle.errors import DefinitionError


async def test_a_definitions_limit_holds_its_nodes_calls_with_a_cel_key(write):
    steps.AT_ONCE.update(now=0, most=0)
    path = write(
        """
        name: limited
        start: call
        call_limits:
          api:
            concurrency: 1
            rate: 100/s
            key: message.tenant
            priority: "message.tenant == 'vip' ? 5 : 0"
        nodes:
          call:
            executor: steps:slow_call
            limits: [api]
        """
    )
    workflow = treadle.load(path)
    assert workflow.limits.by_executor == {"call": ("api",)}
    results = await asyncio.gather(*(workflow.run({"tenant": t}) for t in ("a", "b", "vip", "a")))
    assert [r.outputs for r in results] == [["a"], ["b"], ["vip"], ["a"]]
    assert steps.AT_ONCE["most"] == 1


def test_a_node_naming_an_undeclared_limit_and_a_bad_key_are_reported_at_their_places(write):
    path = write(
        """
        name: limited
        start: call
        call_limits:
          api:
            concurrency: 1
            key: "message.tenant +"
        nodes:
          call:
            executor: steps:echo
            limits: [apj]
        """
    )
    with pytest.raises(DefinitionError) as raised:
        treadle.load(path)
    text = str(raised.value)
    assert "flow.yaml:6:10: CEL syntax error in 'message.tenant +'" in text  # the key's place
    assert "flow.yaml:8:3: executor 'call' names limit 'apj'" in text  # the node's


async def test_a_definitions_token_budget_takes_an_estimate_in_cel_and_refuses_one_too_big(write):
    path = write(
        """
        name: budgeted
        start: call
        call_limits:
          llm:
            tokens: 1k/min
            estimate: "size(message.prompt) * 10"
        nodes:
          call:
            executor: steps:keep
            limits: [llm]
        """
    )
    workflow = treadle.load(path)
    (limit,) = workflow.limits.declared.values()
    assert (limit.budget.tokens, limit.budget.per) == (1000, 60.0)
    assert (await workflow.run({"prompt": "short"})).outputs == [{"prompt": "short"}]
    with pytest.raises(treadle.errors.WorkflowRunError) as raised:
        await workflow.run({"prompt": "x" * 200})  # 2,000 tokens: never within 1k/min
    assert "limit 'llm' can never admit this call" in str(raised.value.__cause__)

    too_big = write(
        """
        name: budgeted
        start: call
        call_limits:
          llm:
            tokens: 1k/min
            estimate: 5000
        nodes:
          call:
            executor: steps:keep
            limits: [llm]
        """
    )
    with pytest.raises(DefinitionError) as refused:
        treadle.load(too_big)
    assert "no call could ever start: its estimate of 5000 tokens" in str(refused.value)
