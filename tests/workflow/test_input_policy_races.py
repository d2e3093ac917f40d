"""Each input policy with three senders racing, each a process of its own, one through HTTP.

A session (``session_app.py``'s chat) rests after its first turn. Three
processes wait for one go signal, then each sends a message: two through
``Workflow.send_message``, one through the server's HTTP API (its app, in
that process). The first message the store orders starts a turn, held at
a file gate until every sender that does not drive the run has returned;
the others meet that turn running. Whatever the timing, the store's order
(the run's ``message_sent`` records, written in the transaction of each
delivery) decides what happened, once: each check below holds the run's
turns and outputs against that order. On one SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
from pathlib import Path

import pytest
from session_app import session

import forked
from gates import reached
from postgres import drop_schemas_now, fresh_schema, postgres_dsn
from treadle import RunStatus, Runtime
from treadle._workflow._pausing import stored_result
from treadle.stores import PostgresStore, SqliteStore

HERE = Path(__file__).parent
SCRIPT = HERE / "session_app.py"
DEADLINE = 120.0

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]  # processes racing on 2 cores


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    """(store spec for the scripts, their environment, a store for the test to read with)."""
    if request.param == "sqlite":
        path = tmp_path / "runs.sqlite"
        yield str(path), None, lambda: SqliteStore(path)
        return
    dsn, schema = postgres_dsn(), fresh_schema()
    yield dsn, {**os.environ, "SESSION_SCHEMA": schema}, lambda: PostgresStore(dsn, schema=schema)
    drop_schemas_now([schema])


def start(command: list[str], env: dict[str, str] | None, errors: Path) -> forked.Forked:
    """The sender in a process of its own, forked with treadle imported; stderr to ``errors``."""
    return forked.start(
        "session_app:cli",
        env={**(os.environ if env is None else env), "PYTHONPATH": str(HERE)},
        cwd=HERE,
        argv=[str(SCRIPT), *command],
        stderr=errors,
    )


def race(senders: list[list[str]], env, go: Path, gate: Path) -> list[dict]:
    """Start the senders, let them go at once, open ``gate`` once each has sent or was refused.

    A turn holds at the gate until then, driven by a sender that took the
    run's lease or by the timer service: every message meets it running.
    """
    logs = [go.with_name(f"sender-{n}.err") for n in range(len(senders))]
    with contextlib.ExitStack() as running:  # each killed if still running (a failed check)
        children = [
            running.enter_context(start(command, env, log))
            for command, log in zip(senders, logs, strict=True)
        ]
        for child in children:
            line = child.stdout.readline()
            assert "ready" in line, (line, [log.read_text() for log in logs])
        go.touch()
        said = []
        for child in children:  # each says it sent, or was refused, before anything waits
            said.append(child.stdout.readline())
            assert "sent" in said[-1] or "error" in said[-1], (
                said[-1],
                [log.read_text() for log in logs],
            )
        deadline = time.monotonic() + DEADLINE
        while not (gate.exists() or reached(gate).exists()):  # a turn holds at the gate
            assert time.monotonic() < deadline, "no turn reached the gate"
            time.sleep(0.02)
        gate.touch()
        ended = forked.communicate_all(children, timeout=DEADLINE)
    outcomes = []
    for (code, out, _), first, log in zip(ended, said, logs, strict=True):
        assert code == 0, log.read_text()
        outcomes.append(json.loads((first + out).strip().splitlines()[-1]))
    return outcomes


async def race_on(
    policy: str,
    backend,
    tmp_path,
    *,
    open_gate: bool = False,
    ends: bool = False,
    cancel: bool = False,
):
    """Race three senders on a resting session under ``policy``.

    ``ends``: the session completes after the first turn the senders start.
    ``cancel``: a fourth process, ``d``, cancels the run as the operator ``olga`` while
    the first turn holds at the gate.
    Returns (outcomes, order, final run, store, the run's story for a failed check).
    """
    spec, env, open_store = backend
    gate, go = tmp_path / "gate", tmp_path / "go"
    if open_gate:
        gate.touch()
    workflow = session(policy)
    store = open_store()
    try:
        state = {"gate": str(gate), "ends": ends}
        rested = await workflow.run("m0", run_id="s1", state=state, store=store)
        assert rested.status is RunStatus.AWAITING_INPUT
        senders = [
            ["send", spec, policy, "s1", str(go), "a"],
            ["http", spec, policy, "s1", str(go), "b"],
            ["send", spec, policy, "s1", str(go), "c"],
        ]
        if cancel:
            senders.append(["cancel", spec, policy, "s1", str(go), "olga", str(gate)])
        # A timer service races too (as a worker would on PostgreSQL, where the server
        # leaves its runs to workers): it takes up a run left with a message to take.
        async with Runtime(store, [workflow], poll_interval=0.05):
            told = await asyncio.to_thread(race, senders, env, go, gate)
            outcomes = dict(zip("abcd", told, strict=False))
            rest = "cancelled" if cancel else "completed" if ends else "awaiting_input"
            final = await settled(workflow, store, rest)
        events = await store.read_events("s1")
        order = [event.data["message"] for event in events if event.kind == "message_sent"]
        return outcomes, order, final, store, story(events, final)
    except BaseException:
        await store.close()
        raise


async def settled(workflow, store, status: str = "awaiting_input"):
    """The run once it rests (or ends) with nothing left in its inbox (its drivers let go)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        row = await store.get_run("s1")
        if row.owner is None and row.status == status and not await store.inbox("s1"):
            return await stored_result(workflow, store, "s1")
        assert time.monotonic() < deadline, f"the session never settled: {row}"
        await asyncio.sleep(0.05)


def story(events, final) -> str:
    """The run's log as a failed check shows it: who sent what, turns, branches, outputs."""
    routine = ("superstep_started", "superstep_completed", "executor_invoked", "executor_completed")
    lines = [f"outputs {final.outputs}, state {final.state}"]
    for event in events:
        if event.kind not in routine:
            lines.append(f"{event.seq} s{event.superstep} {event.kind} {event.data}")
    return "\n".join(lines)


def turns_after_m0(final) -> list[str]:
    assert final.state["turns"][0] == "m0"
    return final.state["turns"][1:]


async def test_reject_lets_exactly_one_racing_sender_in_and_refuses_the_others(backend, tmp_path):
    outcomes, order, final, store, happened = await race_on("reject", backend, tmp_path)
    await store.close()
    winners = [m for m, told in outcomes.items() if "ok" in told]
    refused = {m: told["error"] for m, told in outcomes.items() if "error" in told}
    assert len(winners) == 1, outcomes
    assert set(refused.values()) == {"SessionBusyError"}, outcomes
    assert order == winners, happened  # nothing of the refused was delivered
    assert turns_after_m0(final) == winners, happened
    assert final.outputs == ["done m0", f"done {winners[0]}"], happened


async def test_enqueue_takes_every_racing_message_once_in_the_stores_order(backend, tmp_path):
    outcomes, order, final, store, happened = await race_on("enqueue", backend, tmp_path)
    await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    assert sorted(order) == ["a", "b", "c"]
    assert turns_after_m0(final) == order, happened  # one turn each, in the store's order
    assert final.outputs == ["done m0", *(f"done {m}" for m in order)], happened
    spans = final.state["spans"]
    for before, after in itertools.pairwise(order):  # each began after the one before ended
        assert spans[before][1] < spans[after][0], spans


async def test_what_a_session_ends_without_taking_is_refused_on_the_record_never_left(
    backend, tmp_path
):
    # The turn the first message starts is the session's last: the run completes with the
    # other two accepted under enqueue, never to be taken. Each sender was told its message
    # was taken in; the commit that ends the run refuses the two, on the record, by the
    # process ending it, so nothing accepted is left unapplied and unrefused.
    outcomes, order, final, store, happened = await race_on("enqueue", backend, tmp_path, ends=True)
    try:
        refused = [e for e in await store.read_audit("s1") if e.action == "inbox_refused"]
        left = await store.inbox("s1")
    finally:
        await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    assert sorted(order) == ["a", "b", "c"], happened
    assert final.status is RunStatus.COMPLETED, happened
    assert final.outputs == ["done m0", f"done {order[0]}"], happened  # the first one's turn
    assert turns_after_m0(final) == order[:1], happened
    assert len(refused) == 2, happened  # the other two, each once
    assert {e.detail["reason"] for e in refused} == {"the run completed before taking it"}
    assert {e.detail["kind"] for e in refused} == {"message:enqueue"}
    assert left == []


async def test_a_cancel_racing_the_senders_refuses_what_they_sent_on_the_record(backend, tmp_path):
    # Three senders race; the first message the store orders starts a turn, which holds
    # while an operator cancels the session under its driver. The turn took the first
    # message in a commit before the cancel; each later one the store took in was left
    # unapplied and is refused on the record in the operator's name, in the cancel's own
    # transaction (it used to be marked taken, with nothing saying so). One sent after
    # the cancel was refused to its sender, and nothing of it was delivered.
    outcomes, order, final, store, happened = await race_on(
        "enqueue", backend, tmp_path, cancel=True
    )
    try:
        audit = await store.read_audit("s1")
        left = await store.inbox("s1")
        last = await store.load_checkpoint("s1")
    finally:
        await store.close()
    assert outcomes["d"] == {"ok": "cancelled"}, outcomes
    assert final.status is RunStatus.CANCELLED, happened
    # The turns its last checkpoint holds: each taken in the commit that took its message.
    turns = session("enqueue").codec.decode(last, run_id="s1").state["turns"]
    assert turns == ["m0", order[0]], happened
    refused = [e for e in audit if e.action == "inbox_refused"]
    assert len(refused) == len(order) - 1, happened  # every other one delivered, once
    assert {(e.actor["name"], e.door, e.detail["reason"]) for e in refused} <= {
        ("olga", "python", "the run was cancelled before taking it")
    }, happened
    for sender in "abc":
        if sender not in order:  # refused to its sender: never delivered
            assert outcomes[sender]["error"] == "RequestError", (outcomes, happened)
    assert left == []


async def test_merge_delivers_the_later_racing_messages_into_the_turn_the_first_started(
    backend, tmp_path
):
    outcomes, order, final, store, happened = await race_on("merge", backend, tmp_path)
    await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    turns = turns_after_m0(final)
    assert sorted(turns) == sorted(order), happened  # each handled once
    assert sorted(final.outputs[1:]) == sorted(f"done {m}" for m in order), happened
    # The first started a turn, held at the gate until the others were sent: they were
    # merged into it, each handled before that turn ended, never waiting for a rest.
    spans = final.state["spans"]
    first, *merged = order
    assert all(spans[m][0] <= spans[first][1] for m in merged), spans


async def test_interrupt_leaves_the_last_racing_message_in_the_stores_order_to_finish(
    backend, tmp_path
):
    outcomes, order, final, store, happened = await race_on("interrupt", backend, tmp_path)
    await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    # Every turn but the last was dropped at a superstep boundary: only the last finished.
    assert final.outputs == ["done m0", f"done {order[-1]}"], happened
    turns = turns_after_m0(final)
    assert turns[-1] == order[-1], happened
    assert turns == [m for m in order if m in turns], happened  # each at most once, in order


async def test_rollback_leaves_the_session_as_if_only_the_last_racing_message_came(
    backend, tmp_path
):
    outcomes, order, final, store, happened = await race_on("rollback", backend, tmp_path)
    checkpoints = await store.list_checkpoints("s1")
    await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    assert final.outputs == ["done m0", f"done {order[-1]}"], happened
    assert turns_after_m0(final) == [order[-1]], happened  # the abandoned turns left nothing
    assert len(checkpoints) > len({c.parent_checkpoint_id for c in checkpoints})  # branched


async def test_debounce_coalesces_racing_messages_and_delivers_each_once_in_order(
    backend, tmp_path
):
    outcomes, order, final, store, happened = await race_on(
        "debounce", backend, tmp_path, open_gate=True
    )
    await store.close()
    assert all("ok" in told for told in outcomes.values()), outcomes
    bursts = turns_after_m0(final)
    # Sent together, they land inside one 3-second window (a slow machine may split them):
    # each message is delivered once, in the store's order, bursts joined by "+".
    assert "+".join(bursts).split("+") == order, happened
