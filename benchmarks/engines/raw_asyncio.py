"""The floor: the least a superstep runtime can do, hand-written on asyncio.

A dict of inboxes; each superstep runs every node that has messages in one
``asyncio.TaskGroup``; what nodes send is delivered in the next superstep. Fan-in
targets buffer until every source has sent, then get one list. Every ratio in
RESULTS.md is computed against these figures.

The durable floors use one SQLite connection on the event loop's thread (WAL,
``synchronous=FULL``), one fsync'd transaction per write: ``ckpt_chain`` (and
``ckpt_chain_background``, the same figure) inserts a 300-byte blob per superstep;
``idle_runs`` inserts one timer row per parked run, then selects the due rows and
completes each with one update; ``many_durable_runs`` inserts a 300-byte blob per
superstep of each of the 1,000 concurrent runs, each insert its own fsync'd transaction
(no group commit); ``growing_state`` inserts the superstep's 1 KB item as one row of a
table, so the durable list grows by one row per step instead of being rewritten.
"""

import asyncio
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _workload import (
    CHAIN_NODES,
    CKPT_BLOB_BYTES,
    CKPT_NODES,
    DURABLE_RUN_STEPS,
    DURABLE_RUNS,
    FANOUT_WIDTH,
    IDLE_SLEEP_S,
    LOOP_ITERATIONS,
    MANY_RUNS,
    MANY_RUNS_CHAIN,
    Growing,
    Parking,
    RunFn,
    calls,
    expect,
    item,
    scratch_path,
    stamps,
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


NOTES = {
    "ckpt_chain_background": "the same fsync'd insert per step as `ckpt_chain`",
    "ckpt_chain_batched": "an insert per step, committed (fsync) every 16th step",
    "idle_runs": "one fsync'd insert per parked run; waking: one select of the due rows, "
    "then per run the handler and one fsync'd update",
    "many_durable_runs": "one fsync'd insert per superstep of every run, issued from the "
    "1,000 runs' tasks through one connection (no group commit)",
    "growing_state": "appends the superstep's 1 KB item as one fsync'd row: the durable list "
    "grows by a row per step instead of being rewritten",
}


def _durable_connection(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _checkpointed_chain(filename: str, commit_every: int) -> RunFn:
    """`chain` inserting a checkpoint per superstep, committed (fsync) every nth and at the end."""
    conn = _durable_connection(scratch_path(filename))
    conn.execute("CREATE TABLE checkpoints (run INTEGER, superstep INTEGER, blob BLOB)")
    blob = os.urandom(CKPT_BLOB_BYTES)
    run_no = 0

    def checkpoint(superstep: int) -> None:
        if not conn.in_transaction:
            conn.execute("BEGIN")
        conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (run_no, superstep, blob))
        if superstep % commit_every == 0 or superstep == CKPT_NODES:
            conn.execute("COMMIT")

    graph = _chain_graph(CKPT_NODES, on_barrier=checkpoint)

    async def run() -> list[Any]:
        nonlocal run_no
        run_no += 1
        return await graph.run("n0", 0)

    return run


async def ckpt_chain() -> RunFn:
    """`chain` plus one fsync'd SQLite transaction per superstep: the durability floor."""
    return _checkpointed_chain("floor.sqlite", commit_every=1)


ckpt_chain_background = ckpt_chain  # the floor has one durable mode: commit, then go on

BATCH = 16  # treadle's durability="batched" loss window, in supersteps


async def ckpt_chain_batched() -> RunFn:
    """`chain` inserting a checkpoint per superstep, committed (fsync) every 16th and at the end."""
    return _checkpointed_chain("floor-batched.sqlite", commit_every=BATCH)


async def idle_runs() -> Parking:
    """A durable timer table: insert a row to park, select the due rows and update to wake."""
    path = scratch_path("floor-idle.sqlite")
    conn = _durable_connection(path)
    conn.execute(
        "CREATE TABLE timers (id INTEGER PRIMARY KEY, wake_at REAL, status TEXT, blob BLOB)"
    )
    conn.execute("CREATE INDEX due ON timers (wake_at) WHERE status = 'waiting'")
    blob = os.urandom(CKPT_BLOB_BYTES)
    now = 0.0

    def handler(i: int, woken: bool) -> int | None:
        calls.n += 1
        return i if woken else None  # first call: sleep; second call: the output

    async def park(i: int) -> None:
        handler(i, woken=False)
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO timers VALUES (?, ?, 'waiting', ?)", (i, now + IDLE_SLEEP_S, blob)
        )
        conn.execute("COMMIT")

    async def wake_all(n: int) -> int:
        nonlocal now
        now += IDLE_SLEEP_S
        due = conn.execute(
            "SELECT id FROM timers WHERE status = 'waiting' AND wake_at <= ? ORDER BY wake_at",
            (now,),
        ).fetchall()
        completed = 0
        for (i,) in due:
            output = handler(i, woken=True)
            conn.execute("BEGIN")
            conn.execute(
                "UPDATE timers SET status = 'completed', blob = ? WHERE id = ?", (output, i)
            )
            conn.execute("COMMIT")
            completed += 1
        return completed

    async def stored_completed() -> int:
        return conn.execute("SELECT COUNT(*) FROM timers WHERE status = 'completed'").fetchone()[0]

    return Parking(park, wake_all, path, stored_completed=stored_completed)


async def many_durable_runs() -> RunFn:
    """1,000 concurrent 5-node chains, one fsync'd insert (its own transaction) per superstep."""
    conn = _durable_connection(scratch_path("floor-many.sqlite"))
    conn.execute("CREATE TABLE checkpoints (run INTEGER, superstep INTEGER, blob BLOB)")
    blob = os.urandom(CKPT_BLOB_BYTES)
    nodes = _chain_graph(DURABLE_RUN_STEPS).nodes
    runs = 0

    def checkpoint(run: int, superstep: int) -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (run, superstep, blob))
        conn.execute("COMMIT")

    def graph(run: int) -> Graph:
        return Graph(nodes, on_barrier=lambda superstep: checkpoint(run, superstep))

    async def run() -> list[Any]:
        nonlocal runs
        first, runs = runs, runs + DURABLE_RUNS
        return await asyncio.gather(*(graph(r).run("n0", 0) for r in range(first, runs)))

    return run


async def growing_state() -> Growing:
    """One node looping on itself; every barrier inserts that superstep's item as a row."""
    path = scratch_path("floor-growing.sqlite")
    conn = _durable_connection(path)
    conn.execute("CREATE TABLE log (superstep INTEGER PRIMARY KEY, item TEXT)")
    pending: list[str] = []

    async def run(n: int) -> int:
        async def grow(i: int, send: Send) -> None:
            calls.n += 1
            stamps.append(time.perf_counter())
            pending.append(item(i))
            send("grow" if i < n else "$out", i + 1)

        def checkpoint(superstep: int) -> None:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO log VALUES (?, ?)", (superstep, pending.pop()))
            conn.execute("COMMIT")

        await Graph({"grow": grow}, on_barrier=checkpoint).run("grow", 1)
        return conn.execute("SELECT COUNT(*) FROM log").fetchone()[0]

    return Growing(run, path)
