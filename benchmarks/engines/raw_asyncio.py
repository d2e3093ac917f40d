"""The floor: the least a superstep runtime can do, hand-written on asyncio.

A dict of inboxes; each superstep runs every node that has messages in one
``asyncio.TaskGroup``; what nodes send is delivered in the next superstep. Fan-in
targets buffer until every source has sent, then get one list. Every ratio in
RESULTS.md is computed against these figures.
"""

import asyncio
import os
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from _workload import (
    CHAIN_NODES,
    CKPT_BLOB_BYTES,
    CKPT_NODES,
    FANOUT_WIDTH,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    RunFn,
    calls,
    expect,
    scratch_path,
)

Send = Callable[[str, Any], None]
Node = Callable[[Any, Send], Awaitable[None]]


class Graph:
    """Nodes by id, fan-in targets with their source count, an optional barrier hook."""

    def __init__(
        self,
        nodes: dict[str, Node],
        fan_in: dict[str, int] | None = None,
        on_barrier: Callable[[int], None] | None = None,
    ) -> None:
        self.nodes = nodes
        self.fan_in = fan_in or {}
        self.on_barrier = on_barrier

    async def run(self, start: str, message: Any) -> list[Any]:
        outputs: list[Any] = []
        inboxes: dict[str, list[Any]] = {start: [message]}
        buffers: dict[str, list[Any]] = {}
        superstep = 0
        while inboxes:
            superstep += 1
            sent: dict[str, list[Any]] = {}

            def send(target: str, msg: Any, sent: dict[str, list[Any]] = sent) -> None:
                if target == "$out":
                    outputs.append(msg)
                else:
                    sent.setdefault(target, []).append(msg)

            async with asyncio.TaskGroup() as tg:
                for node_id, msgs in inboxes.items():
                    tg.create_task(self._drain(self.nodes[node_id], msgs, send))
            if self.on_barrier is not None:
                self.on_barrier(superstep)
            for target, expected in self.fan_in.items():
                if target in sent:
                    buffer = buffers.setdefault(target, [])
                    buffer.extend(sent.pop(target))
                    if len(buffer) == expected:
                        sent[target] = [buffers.pop(target)]
            inboxes = sent
        return outputs

    @staticmethod
    async def _drain(node: Node, msgs: list[Any], send: Send) -> None:
        for msg in msgs:  # one node handles its messages one at a time
            await node(msg, send)


def _forward(target: str) -> Node:
    async def node(msg: int, send: Send) -> None:
        calls.n += 1
        send(target, msg + 1)

    return node


def _chain_graph(n: int, on_barrier: Callable[[int], None] | None = None) -> Graph:
    nodes = {f"n{i}": _forward(f"n{i + 1}") for i in range(n - 1)}
    nodes[f"n{n - 1}"] = _forward("$out")
    return Graph(nodes, on_barrier=on_barrier)


async def chain() -> RunFn:
    graph = _chain_graph(CHAIN_NODES)
    return lambda: graph.run("n0", 0)


async def fanout() -> RunFn:
    branches = [f"b{i}" for i in range(FANOUT_WIDTH)]

    async def src(msg: int, send: Send) -> None:
        calls.n += 1
        for b in branches:
            send(b, msg)

    async def sink(msgs: list[int], send: Send) -> None:
        calls.n += 1
        expect(len(msgs), FANOUT_WIDTH, "fan-in list length")
        send("$out", len(msgs))

    nodes: dict[str, Node] = {b: _forward("sink") for b in branches}
    nodes |= {"src": src, "sink": sink}
    graph = Graph(nodes, fan_in={"sink": FANOUT_WIDTH})
    return lambda: graph.run("src", 0)


async def loop() -> RunFn:
    async def a(msg: int, send: Send) -> None:
        calls.n += 1
        send("b", msg + 1)

    async def b(msg: int, send: Send) -> None:
        calls.n += 1
        send("a" if msg < LOOP_ITERATIONS else "$out", msg)

    graph = Graph({"a": a, "b": b})
    return lambda: graph.run("a", 0)


async def many_runs() -> RunFn:
    graph = _chain_graph(MANY_RUNS_CHAIN)
    return lambda: asyncio.gather(*(graph.run("n0", 0) for _ in range(MANY_RUNS)))


async def ckpt_chain() -> RunFn:
    """`chain` plus one fsync'd SQLite transaction per superstep: the durability floor."""
    conn = sqlite3.connect(scratch_path("floor.sqlite"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE checkpoints (run INTEGER, superstep INTEGER, blob BLOB)")
    blob = os.urandom(CKPT_BLOB_BYTES)
    run_no = 0

    def checkpoint(superstep: int) -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (run_no, superstep, blob))
        conn.execute("COMMIT")

    graph = _chain_graph(CKPT_NODES, on_barrier=checkpoint)

    async def run() -> list[Any]:
        nonlocal run_no
        run_no += 1
        return await graph.run("n0", 0)

    return run
