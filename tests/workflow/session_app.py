"""A chat session whose turns take two supersteps, one workflow per input policy, as a script.

    python session_app.py run STORE POLICY RUN_ID GATE
        # start a session on "m0" and drive it until it rests; print how it stopped
    python session_app.py send STORE POLICY RUN_ID GO_FILE MESSAGE [TARGET]
        # wait for GO_FILE, then send MESSAGE (to TARGET, if given); print the outcome
    python session_app.py http STORE POLICY RUN_ID GO_FILE MESSAGE [TARGET]
        # the same through the HTTP API: the server's app, in this process
    python session_app.py cancel STORE POLICY RUN_ID GO_FILE NAME GATE
        # wait for GO_FILE, then for a turn to hold at GATE, then cancel the run
        # as the operator NAME; print the outcome

``chat`` takes a message (a ``str``; a ``list`` of them under debounce) as
the start of a turn: it notes it in the state's ``turns`` and hands it to
``work``, which takes two supersteps (``spans`` keeps the superstep where
each turn began and the one where it ended). The first holds at the file gate
``GATE`` (it writes ``GATE.reached``, then waits for ``GATE``), so a test
knows a turn is running and keeps it running while senders race. The
second yields ``done <message>`` and hands back to ``chat``, whose
``listen`` waits for the session's next message. A ``str`` sent to
``work`` (``merge`` with target ``work``) is a note, kept in ``notes``
and read by the turn's next step. STORE is a SQLite path or a
``postgresql://`` DSN (schema from ``SESSION_SCHEMA``). Each command
prints one JSON line: ``{"ok": ...}`` or ``{"error": type, "message": ...}``;
a sender first prints ``{"sent": MESSAGE}`` once the store took its message.
A run started with the state ``ends`` set completes after its first turn
past ``m0`` instead of listening again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from treadle import InputPolicy, RunOptions, WorkflowBuilder, WorkflowContext, executor
from treadle.errors import TreadleError


@dataclass(frozen=True)
class Listen:
    pass


@dataclass(frozen=True)
class Work:
    text: str
    step: int
    gate: str


def _gate_of(ctx: WorkflowContext) -> str:
    return str(ctx.state.get("gate", ""))


async def _turn(text: str, ctx: WorkflowContext) -> None:
    ctx.state.update("turns", lambda turns: [*turns, text])
    began = ctx.superstep
    ctx.state.update("spans", lambda spans: {**spans, text: [began, None]})
    ctx.send_message(Work(text, 1, _gate_of(ctx)), target="work")


@executor(id="chat")
async def chat(message: str | list | Listen, ctx: WorkflowContext) -> None:
    if isinstance(message, Listen):
        ctx.send_message(await ctx.wait_for_input(), target="chat")
    elif isinstance(message, list):  # a debounced burst, in arrival order
        await _turn("+".join(message), ctx)
    else:
        await _turn(message, ctx)


@executor(id="work")
async def work(message: Work | str, ctx: WorkflowContext) -> None:
    if isinstance(message, str):  # a note merged into the running turn
        ctx.state.update("notes", lambda notes: [*notes, message])
        return
    ctx.state.update("steps", lambda steps: [*steps, f"{message.text}:{message.step}"])
    if message.step == 1:
        if message.gate and message.text != "m0":  # the session's first turn runs through
            gate = Path(message.gate)
            Path(f"{gate}.reached").touch()  # noqa: ASYNC240 - a marker file, once
            while not gate.exists():  # noqa: ASYNC110, ASYNC240 - another process opens it
                await asyncio.sleep(0.01)
        ctx.send_message(Work(message.text, 2, message.gate), target="work")
        return
    ended, text = ctx.superstep, message.text
    ctx.state.update("spans", lambda spans: {**spans, text: [spans[text][0], ended]})
    notes = ctx.state.get("notes", [])
    ctx.yield_output(f"done {message.text}" + (f" with {','.join(notes)}" if notes else ""))
    if ctx.state.get("ends") and message.text != "m0":
        return  # a session that ends after its first turn: the run completes
    ctx.send_message(Listen(), target="chat")


POLICIES = {
    "reject": InputPolicy.REJECT,
    "enqueue": InputPolicy.ENQUEUE,
    "merge": InputPolicy.MERGE,
    "interrupt": InputPolicy.INTERRUPT,
    "rollback": InputPolicy.ROLLBACK,
    "debounce": InputPolicy.debounce(3.0),
}


def session(policy: str):
    """The chat workflow under ``policy`` (a name of ``POLICIES``)."""
    return (
        WorkflowBuilder(chat, name=f"chat-{policy}", input_policy=POLICIES[policy])
        .add_edge(chat, work)
        .add_edge(work, work)
        .add_edge(work, chat)
        .add_edge(chat, chat)
        .add_state("turns", default=[])
        .add_state("steps", default=[])
        .add_state("notes", default=[])
        .add_state("spans", default={})
        .add_state("gate", default="")
        .add_state("ends", default=False)
        .build()
    )


chat_reject = session("reject")
chat_enqueue = session("enqueue")
chat_merge = session("merge")
chat_interrupt = session("interrupt")
chat_rollback = session("rollback")
chat_debounce = session("debounce")


def open_store(spec: str):
    from treadle.stores import PostgresStore, SqliteStore  # noqa: PLC0415 - psycopg when used

    if spec.startswith("postgresql://"):
        return PostgresStore(spec, schema=os.environ["SESSION_SCHEMA"])
    return SqliteStore(spec)


def wait_for_go(go: str) -> None:
    print(json.dumps({"ready": os.getpid()}), flush=True)
    deadline = time.monotonic() + 60
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit("no go signal")
        time.sleep(0.001)


async def send_over_http(spec: str, policy: str, run_id: str, message: str, target) -> object:
    """POST the message to the server's app, run in this process (as tests/server do)."""
    import httpx  # noqa: PLC0415 - the server extra

    from treadle._server._app import create_app  # noqa: PLC0415
    from treadle._server._settings import ServerSettings  # noqa: PLC0415

    if "SESSION_SCHEMA" in os.environ:
        os.environ["TREADLE_SCHEMA"] = os.environ["SESSION_SCHEMA"]
    token = "session-app-token-0123456789"  # noqa: S105 - this script's own
    settings = ServerSettings(
        token=token, apps=(f"session_app:chat_{policy}",), store=spec, poll_interval=0.05
    )
    app = create_app(settings)
    store = open_store(spec)
    body: dict[str, object] = {"message": message}
    if target:
        body["target"] = target
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        _closing(store),
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://server", headers=headers) as client,
    ):
        answer = await client.post(f"/api/runs/{run_id}/messages", json=body)
        if answer.status_code < 400:
            print(json.dumps({"sent": message}), flush=True)
        # The server drives what it took in the background: wait until it lets go.
        for _ in range(6000 if answer.status_code < 400 else 0):
            row = await store.get_run(run_id)
            if row.owner is None or not row.owner.startswith(_host_pid()):
                break
            await asyncio.sleep(0.05)
    if answer.status_code >= 400:
        error = answer.json()["error"]
        raise _HttpRefused(error["type"], error["message"])
    return answer.json()["run"]["status"]


@contextlib.asynccontextmanager
async def _closing(store):
    try:
        yield store
    finally:
        await store.close()


class _HttpRefused(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _host_pid() -> str:
    import socket  # noqa: PLC0415

    return f"{socket.gethostname()}:{os.getpid()}"


async def send_then_drive(workflow, store, run_id: str, message: str, target) -> object:
    """``Workflow.send_message``'s two halves, saying ``sent`` between them.

    The test opens its gate once every sender has sent (or was refused): a
    sender that then drives the run stays, the others return.
    """
    from treadle import Actor  # noqa: PLC0415
    from treadle._workflow import _actions as door  # noqa: PLC0415
    from treadle._workflow._driving import continue_taken  # noqa: PLC0415
    from treadle._workflow._sessions import taken_after_sending  # noqa: PLC0415

    actor = Actor.python()
    held = await door.send(store, run_id, message, actor=actor, workflow=workflow, target=target)
    print(json.dumps({"sent": message}), flush=True)
    taken = await taken_after_sending(workflow, store, run_id, held, wait=False)
    if taken is None:
        return "queued"
    options = RunOptions(record_events=False)
    return (await continue_taken(workflow, taken, store, options)).status.value


async def cancel_as(workflow, store, run_id: str, operator: str, gate: str) -> str:
    """Cancel the run as the operator named once a turn holds at ``gate``; say ``sent``.

    The test opens the gate once every racer has said ``sent`` (or was
    refused): the turn is cancelled under its driver, held.
    """
    from treadle import Actor, Role  # noqa: PLC0415

    while not Path(f"{gate}.reached").exists():  # noqa: ASYNC110, ASYNC240 - another process
        await asyncio.sleep(0.005)
    actor = Actor("user", operator, "python", Role.OPERATOR)
    await workflow.cancel(run_id, store=store, actor=actor)
    print(json.dumps({"sent": "cancel"}), flush=True)
    return "cancelled"


async def main(command: str, spec: str, policy: str, run_id: str, *rest: str) -> None:
    workflow = session(policy)
    store = open_store(spec)
    try:
        if command == "run":
            state = {"gate": rest[0]}
            result = await workflow.run("m0", run_id=run_id, state=state, store=store)
            print(json.dumps({"ok": result.status.value, "outputs": result.outputs}), flush=True)
            return
        await store.list_runs(limit=1)  # the store is open before the race starts
        wait_for_go(rest[0])
        message, target = rest[1], (rest[2] if len(rest) > 2 else None)
        try:
            if command == "cancel":
                outcome = await cancel_as(workflow, store, run_id, message, gate=rest[2])
            elif command == "http":
                outcome = await send_over_http(spec, policy, run_id, message, target)
            else:
                outcome = await send_then_drive(workflow, store, run_id, message, target)
        except TreadleError as error:
            print(json.dumps({"error": type(error).__name__, "message": str(error)}), flush=True)
            return
        except _HttpRefused as refused:
            print(json.dumps({"error": refused.kind, "message": str(refused)}), flush=True)
            return
        print(json.dumps({"ok": outcome}), flush=True)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(*sys.argv[1:]))


if __name__ == "__main__":
    # Through the module's own name, so that the classes stored are named as the tests name them.
    import session_app

    session_app.cli()
