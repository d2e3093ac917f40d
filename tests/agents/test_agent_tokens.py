"""Agent steps under a token budget, and a model provider that answers 429.

Scripted models report their usage: the turns started in any window of the
budget used no more tokens than it allows. Then pydantic-ai's own OpenAI
model, pointed at an OpenAI-compatible endpoint this test serves on
127.0.0.1, is turned away with 429 and ``Retry-After``: the step's limit
slows down (a ``limit_slowed`` event), no request reaches the endpoint
before the time it asked for, and every run completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import uvicorn
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from treadle import CallLimit, WorkflowBuilder
from treadle.agents import AgentExecutor
from treadle.events import ExecutorFailed, LimitSlowed
from treadle.stores import SqliteStore

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

BUDGET = 2_000
WINDOW = 1.0
USED = (300, 100)  # input and output tokens of every reply
LAG = 0.25  # seconds from a turn's grant to its request reaching the model, at most (loaded)


def most_in_a_window(requests: list[tuple[float, int]]) -> int:
    """The most tokens used by the requests made inside any window of the budget.

    The budget counts a turn when it is granted; its request reaches the
    model a little later (other runs' turns starting on the same loop, the
    HTTP client's own work): up to ``LAG`` here, so a window is read that
    much shorter.
    """
    ordered = sorted(requests)
    return max(
        sum(u for t, u in ordered[i:] if t < at + WINDOW - LAG) for i, (at, _) in enumerate(ordered)
    )


async def test_scripted_models_reporting_usage_stay_under_the_token_budget():
    requests: list[tuple[float, int]] = []

    async def reply(messages, info) -> ModelResponse:
        requests.append((time.monotonic(), sum(USED)))
        await asyncio.sleep(0.01)
        return ModelResponse(
            parts=[TextPart("done")],
            usage=RequestUsage(input_tokens=USED[0], output_tokens=USED[1]),
        )

    step = AgentExecutor(Agent(FunctionModel(reply), name="helper"), limits=["model"])
    # Each turn reserves 500 and reports 400: five turns fit a window of 2,000.
    limit = CallLimit("model", tokens=f"{BUDGET}/{WINDOW}s", estimate=500)
    workflow = WorkflowBuilder(step, name="helps", limits=[limit]).build()
    await workflow.run("warm up")  # a first turn builds pydantic-ai's schemas: a late start
    await asyncio.sleep(WINDOW)
    requests.clear()
    started = time.monotonic()
    results = await asyncio.gather(*(workflow.run(f"question {n}") for n in range(12)))
    assert [r.outputs for r in results] == [["done"]] * 12
    assert most_in_a_window(requests) <= BUDGET
    assert time.monotonic() - started >= 2 * WINDOW  # 12 turns of 400 need three windows


@dataclass
class Provider:
    """An OpenAI-compatible chat endpoint that turns the first ``busy`` requests away."""

    busy: int
    retry_after: float
    seen: list[tuple[float, int]] = field(default_factory=list)  # (at, status)

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        status = 429 if len([s for _, s in self.seen if s == 429]) < self.busy else 200
        self.seen.append((time.monotonic(), status))
        if status == 429:
            return JSONResponse(
                {"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded"}},
                status_code=429,
                headers={"Retry-After": f"{self.retry_after:.0f}"},
            )
        usage = {
            "prompt_tokens": USED[0],
            "completion_tokens": USED[1],
            "total_tokens": sum(USED),
        }
        common = {"id": "chatcmpl-1", "created": 0, "model": body["model"]}
        if not body.get("stream"):
            return JSONResponse(
                {
                    **common,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "done"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )
        chunks = [
            {
                **common,
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": "done"},
                        "finish_reason": None,
                    }
                ],
            },
            {
                **common,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            },
            {**common, "object": "chat.completion.chunk", "choices": [], "usage": usage},
        ]

        async def events():
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def served(provider: Provider) -> AsyncIterator[OpenAIChatModel]:
    """pydantic-ai's OpenAI model, talking to ``provider`` served on 127.0.0.1."""
    port = free_port()
    app = Starlette(routes=[Route("/v1/chat/completions", provider.chat, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
        await asyncio.sleep(0.01)
    # The OpenAI client's own retries are off: treadle's limit does the waiting.
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=0)
    try:
        with override_allow_model_requests(True):  # the endpoint is this test's, on 127.0.0.1
            yield OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client))
    finally:
        await client.close()
        server.should_exit = True
        await serving


async def test_a_providers_429_slows_the_limit_and_every_run_completes(tmp_path):
    provider = Provider(busy=2, retry_after=1.0)
    store = SqliteStore(tmp_path / "runs.db")
    try:
        async with served(provider) as model:
            step = AgentExecutor(Agent(model, name="desk"), limits=["openai"])
            limit = CallLimit("openai", concurrency=3, tokens=f"{BUDGET}/{WINDOW}s", estimate=500)
            workflow = WorkflowBuilder(step, name="desk", limits=[limit]).build()
            provider.busy += 1  # the warm-up's request is turned away too, and not counted
            await workflow.run("warm up")  # the client's connections and pydantic-ai's schemas
            provider.seen.clear()
            provider.busy -= 1
            await asyncio.sleep(WINDOW)
            results = await asyncio.wait_for(
                asyncio.gather(*(workflow.run(f"ticket {n}", store=store) for n in range(8))),
                timeout=60,
            )
        logged = {r.run_id: [e.kind for e in await store.read_events(r.run_id)] for r in results}
    finally:
        await store.close()
    assert [r.outputs for r in results] == [["done"]] * 8
    slowed = [e for r in results for e in r.events if isinstance(e, LimitSlowed)]
    assert [(e.limit, e.seconds) for e in slowed] == [("openai", 1.0)] * 2
    assert sum(kinds.count("limit_slowed") for kinds in logged.values()) == 2
    # Each 429 paused the limit for its Retry-After: apart from the calls already under
    # way when it came back (at most the concurrency, arriving at once), nothing
    # reached the provider during the pause the last one asked for, in any run.
    last_busy = max(at for at, status in provider.seen if status == 429)
    during = [
        at
        for at, _ in provider.seen
        if last_busy + 0.25 < at < last_busy + provider.retry_after - 0.05
    ]
    assert during == []
    assert len([at for at, _ in provider.seen if last_busy < at <= last_busy + 0.25]) <= 3
    answered = [(at, sum(USED)) for at, status in provider.seen if status == 200]
    assert len(answered) == 8
    assert most_in_a_window(answered) <= BUDGET


async def test_a_retry_after_of_years_slows_the_limit_five_minutes_and_no_more():
    # The header is the provider's to write: a broken or hostile endpoint asking for
    # 31 years must not stop every call under the limit for that long.
    provider = Provider(busy=1, retry_after=1_000_000_000)
    async with served(provider) as model:
        step = AgentExecutor(Agent(model, name="desk"), limits=["openai"])
        workflow = WorkflowBuilder(
            step, name="desk", limits=[CallLimit("openai", concurrency=1)]
        ).build()
        seen: list[object] = []
        async with workflow.stream("ticket") as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, ExecutorFailed):
                    break  # leaving the stream cancels the run, waiting out the pause
    (slowed,) = [e for e in seen if isinstance(e, LimitSlowed)]
    assert (slowed.limit, slowed.seconds) == ("openai", 300.0)
    turned_away = seen[-1]
    assert isinstance(turned_away, ExecutorFailed)
    assert turned_away.retrying
    assert "asking to wait 1e+09 s; waiting 300 s, the most" in str(turned_away.error)
    assert [status for _, status in provider.seen] == [429]
