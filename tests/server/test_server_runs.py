"""The JSON API over runs on a real SQLite file: start, list, get, steer, fork, delete.

On SQLite the server runs the runs it starts (and wakes the file's timers)
in tasks its lifespan owns: a start answers 201 once the run is stored,
and the run then goes on in the background.
"""

from __future__ import annotations

import re
from datetime import datetime
from time import time as time_now
from typing import Any

import pytest
from sse import messages

from gates import file_appears, reached
from server.conftest import serving


async def test_workflows_are_listed_with_their_input_schemas_and_graphs(api):
    listed = (await api.get("/api/workflows")).json()["workflows"]
    assert [w["name"] for w in listed] == ["approval", "chat", "counting", "failing"]
    approval = (await api.get("/api/workflows/approval")).json()
    assert approval["start"] == "draft"
    assert approval["input_schema"]["required"] == ["topic", "words"]
    assert approval["graph"] == {
        "nodes": [
            {"id": "draft", "rank": 0, "kind": "start"},
            {"id": "approve", "rank": 1, "kind": "executor"},
        ],
        "edges": [{"source": "draft", "target": "approve", "kind": "plain"}],
        "start": "draft",
    }
    counting = (await api.get("/api/workflows/counting")).json()["graph"]
    assert counting["edges"] == [{"source": "count", "target": "count", "kind": "plain"}]
    missing = await api.get("/api/workflows/nope")
    assert missing.status_code == 404
    assert "serves: approval, chat, counting, failing" in missing.json()["error"]["message"]


async def test_a_started_run_goes_on_in_the_background_and_its_page_shows_it(api):
    started = await api.start("approval", {"topic": "otters", "words": 30}, run_id="r1")
    assert started["run_id"] == "r1"
    assert started["workflow"] == "approval"
    assert started["checkpoint_id"] is not None  # stored before the answer
    detail = await api.wait_for("r1", {"awaiting_input"})
    assert detail["state"] == {"topic": "otters"}
    (request,) = detail["pending_requests"]
    assert request["executor_id"] == "approve"
    assert request["payload"] == {"text": "30 words about otters"}
    assert request["answer_schema"]["properties"]["approved"] == {
        "title": "Approved",
        "type": "boolean",
    }
    assert detail["graph"]["start"] == "draft"
    assert detail["traceback"] is None

    by_prefix = await api.get("/api/runs/r")
    assert by_prefix.json()["run"]["run_id"] == "r1"
    again = await api.post(
        "/api/runs",
        json={"workflow": "approval", "input": {"topic": "x", "words": 1}, "run_id": "r1"},
    )
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "RunExistsError"


async def test_an_input_that_does_not_fit_is_refused_naming_each_field(api):
    response = await api.post(
        "/api/runs", json={"workflow": "approval", "input": {"topic": 3}, "run_id": "bad"}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "InvalidInputError"
    locs = {field["loc"] for field in error["fields"]}
    assert {"topic", "words"} <= locs
    assert (await api.get("/api/runs/bad")).status_code == 404  # nothing was stored
    for body, status in (
        ({"input": 1}, 400),  # no workflow
        ({"workflow": "nope", "input": 1}, 404),
        ({"workflow": "approval", "input": None, "run_id": "a/b"}, 400),
        ({"workflow": "approval", "input": None, "run_id": ""}, 400),
        # a schedule's tick's id is the schedule's (tests/workflow/test_schedule_run_ids.py)
        ({"workflow": "approval", "input": None, "run_id": "nightly@20260501T000000Z"}, 400),
        ({"workflow": 7, "input": None}, 400),
    ):
        refused = await api.post("/api/runs", json=body)
        assert refused.status_code == status, (body, refused.text)
    assert await api.store.list_runs() == []


async def test_an_input_is_checked_as_strictly_as_an_answer(api):
    """A numeric string is not a number, and a misspelt key is named, not dropped."""
    for given, loc, words in (
        ({"topic": "t", "words": "12"}, "words", "Input should be a valid integer"),
        ({"topic": "t", "words": 12, "wrods": 1}, "wrods", "did you mean 'words'"),
    ):
        response = await api.post(
            "/api/runs", json={"workflow": "approval", "input": given, "run_id": "lax"}
        )
        assert response.status_code == 422, response.text
        fields = response.json()["error"]["fields"]
        assert [f["loc"] for f in fields] == [loc], fields
        assert words in fields[0]["message"]
    assert await api.store.list_runs() == []  # nothing was stored


async def test_a_failed_run_shows_its_error_and_full_traceback(api):
    await api.start("failing", "the reason", run_id="f1")
    detail = await api.wait_for("f1", {"failed"})
    assert "Boom: exploded: the reason" in detail["run"]["error"]
    traceback = detail["traceback"]
    assert traceback.startswith("Traceback (most recent call last):")
    assert "server_app.py" in traceback
    assert "raise Boom" in traceback


async def test_runs_are_listed_newest_first_a_page_at_a_time_with_filters(api):
    for number in range(5):
        await api.start("failing", f"n{number}", run_id=f"f{number}")
    await api.start("approval", {"topic": "t", "words": 1}, run_id="a0")
    for run_id in ("f0", "f1", "f2", "f3", "f4"):
        await api.wait_for(run_id, {"failed"})
    await api.wait_for("a0", {"awaiting_input"})

    seen, cursor = [], None
    while True:
        query = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/api/runs", params=query)).json()
        assert len(page["runs"]) <= 2
        seen += [run["run_id"] for run in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a0", "f4", "f3", "f2", "f1", "f0"]

    failed = (await api.get("/api/runs", params={"status": "failed", "limit": 50})).json()
    assert [run["run_id"] for run in failed["runs"]] == ["f4", "f3", "f2", "f1", "f0"]
    assert failed["next_cursor"] is None
    of_approval = (await api.get("/api/runs", params={"workflow": "approval"})).json()
    assert [run["run_id"] for run in of_approval["runs"]] == ["a0"]
    for params in (
        {"status": "nope"},
        {"limit": 0},
        {"limit": "x"},
        {"limit": "1_0"},  # int() reads these three as numbers: two spellings of one value
        {"limit": "+5"},
        {"limit": "\u0663"},  # an Arabic-Indic 3
        {"cursor": "!!"},
        {"sort": "x"},
    ):
        assert (await api.get("/api/runs", params=params)).status_code == 400, params


async def test_cancel_pause_unpause_and_resume(api):
    await api.start("approval", {"topic": "t", "words": 1}, run_id="p1")
    await api.wait_for("p1", {"awaiting_input"})
    paused = await api.post("/api/runs/p1/pause")
    assert paused.status_code == 200
    assert (paused.json()["outcome"], paused.json()["run"]["status"]) == ("paused", "paused")
    unpaused = await api.post("/api/runs/p1/unpause")
    assert unpaused.json()["was_paused"] is True
    assert unpaused.json()["run"]["status"] == "awaiting_input"
    again = await api.post("/api/runs/p1/pause")
    assert again.json()["run"]["status"] == "paused"
    resumed = await api.post("/api/runs/p1/resume")  # resume unpauses, and goes on here
    assert resumed.status_code == 202, resumed.text
    await api.wait_for("p1", {"awaiting_input"})

    cancelled = await api.post("/api/runs/p1/cancel")
    assert cancelled.json()["run"]["status"] == "cancelled"
    for verb in ("cancel", "pause", "unpause"):
        refused = await api.post(f"/api/runs/p1/{verb}")
        assert refused.status_code == 409, refused.text
    assert (await api.post("/api/runs/nope/cancel")).status_code == 404


async def test_history_fork_with_a_state_patch_and_delete(api):
    await api.start("approval", {"topic": "otters", "words": 3}, run_id="h1")
    await api.wait_for("h1", {"awaiting_input"})
    history = (await api.get("/api/runs/h1/history")).json()
    assert [c["superstep"] for c in history["checkpoints"]] == [0, 1, 2]
    assert history["forks"] == []
    ids = [c["checkpoint_id"] for c in history["checkpoints"]]
    at = ids[2]
    # Ids start with the time they were made: the prefix naming one runs past it.
    size = next(n for n in range(8, 33) if [i for i in ids if i.startswith(at[:n])] == [at])
    forked = await api.post(
        "/api/runs/h1/fork",
        json={"checkpoint_id": at[:size], "state_patch": {"topic": "badgers"}, "run_id": "h2"},
    )
    assert forked.status_code == 201, forked.text
    assert forked.json()["run"]["parent_run_id"] == "h1"
    assert forked.json()["run"]["parent_checkpoint_id"] == at
    detail = (await api.get("/api/runs/h2")).json()
    assert detail["state"] == {"topic": "badgers"}
    assert [f["run_id"] for f in (await api.get("/api/runs/h1/history")).json()["forks"]] == ["h2"]

    for body in ({}, {"checkpoint_id": "zzzz"}, {"checkpoint_id": at, "state_patch": [1]}):
        assert (await api.post("/api/runs/h1/fork", json=body)).status_code == 400, body

    refused = await api.delete("/api/runs/h1")  # its fork needs what it stored
    assert refused.status_code == 409, refused.text
    assert (await api.delete("/api/runs/h2")).status_code == 204
    assert (await api.delete("/api/runs/h1")).status_code == 204
    assert (await api.get("/api/runs/h1")).status_code == 404
    assert (await api.delete("/api/runs/h1")).status_code == 404


async def test_a_session_takes_messages(api):
    await api.start("chat", "hello", run_id="c1")
    await api.wait_for("c1", {"awaiting_input"})
    sent = await api.post("/api/runs/c1/messages", json={"message": "one"})
    assert sent.status_code == 202, sent.text
    await api.wait_for("c1", {"awaiting_input"})
    await api.post("/api/runs/c1/messages", json={"message": "bye"})
    detail = await api.wait_for("c1", {"completed"})
    assert detail["outputs"] == [["hello", "one"]]
    assert (await api.post("/api/runs/c1/messages", json={})).status_code == 400


async def test_stopping_the_server_leaves_its_runs_resumable(tmp_path):
    url = str(tmp_path / "runs.sqlite")
    gate = tmp_path / "gate"
    async with serving(url) as api:
        await api.start("counting", {"to": 3, "gate": str(gate), "hold_at": 1}, run_id="k1")
        await file_appears(reached(gate), seconds=20)
    # Stopped mid-superstep: the run is as last committed, not cancelled.
    gate.touch()
    async with serving(url) as api:  # the next server (its timer service) takes it over
        detail = await api.wait_for("k1", {"completed"})
        assert detail["outputs"] == [3]


async def test_resume_refuses_a_null_checkpoint_id_naming_the_field(api):
    """Omitting ``checkpoint_id`` means the latest (docs/server.md, OpenAPI); null is refused."""
    await api.start("approval", {"topic": "otters", "words": 30}, run_id="nul")
    await api.wait_for("nul", {"awaiting_input"})
    refused = await api.post("/api/runs/nul/resume", json={"checkpoint_id": None})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["fields"] == [
        {"loc": "checkpoint_id", "message": "must be a non-empty string of at most 1024 characters"}
    ]
    schema = (await api.get("/openapi.json")).json()["components"]["schemas"]["Resume"]
    assert schema["properties"]["checkpoint_id"]["type"] == "string"  # null is not documented
    detail = await api.wait_for("nul", {"awaiting_input"})
    assert detail["run"]["owner"] is None  # nothing was taken over


async def test_who_started_a_run_is_an_object_in_its_run(api):
    await api.start("approval", {"topic": "otters", "words": 30}, run_id="who")
    run = (await api.get("/api/runs/who")).json()["run"]
    assert run["started_by"]["kind"] == "token"
    assert run["started_by"]["door"] == "api"
    assert (await api.get("/api/runs")).json()["runs"][0]["started_by"] == run["started_by"]


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        (
            "/api/runs/nul2/fork",
            {"checkpoint_id": "CHECKPOINT", "state_patch": None},
            "state_patch",
        ),
        ("/api/bulk", {"action": "cancel", "where": "status == 'x'", "rate": None}, "rate"),
        ("/api/bulk", {"action": "cancel", "where": "status == 'x'", "dry_run": None}, "dry_run"),
        ("/api/webhooks/dead/resend", {"message_ids": None, "all": True}, "message_ids"),
        ("/api/runs/nul2/requests/REQUEST/links", {"for": "ann", "groups": None}, "groups"),
        ("/api/runs/nul2/requests/REQUEST/links", {"for": "ann", "expires_in": None}, "expires_in"),
    ],
)
async def test_a_null_for_an_optional_field_is_refused_naming_it_and_changes_nothing(
    api, route, body, field
):
    # Left out, an optional field means none; a null was read as left out for these (a
    # fork was made, a bulk action run) though the docs promise it is refused by name.
    await api.start("approval", {"topic": "otters", "words": 30}, run_id="nul2")
    detail = await api.wait_for("nul2", {"awaiting_input"})
    (request,) = detail["pending_requests"]
    route = route.replace("REQUEST", request["request_id"])
    body = {k: detail["run"]["checkpoint_id"] if v == "CHECKPOINT" else v for k, v in body.items()}
    before = (await api.get("/api/runs")).json()["runs"]
    refused = await api.post(route, json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["fields"][0]["loc"] == field
    assert (await api.get("/api/runs")).json()["runs"] == before


_ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$")


def _times_of(value: Any, names: set[str]) -> list[Any]:
    """Every value of a key in ``names``, however deep in ``value``."""
    if isinstance(value, dict):
        return [v for k, v in value.items() if k in names] + [
            t for v in value.values() for t in _times_of(v, names)
        ]
    if isinstance(value, list):
        return [t for v in value for t in _times_of(v, names)]
    return []


async def test_every_time_the_api_gives_is_iso_8601_with_its_offset(api):
    await api.start("approval", {"topic": "otters", "words": 3}, run_id="t1")
    detail = await api.wait_for("t1", {"awaiting_input"})
    history = (await api.get("/api/runs/t1/history")).json()
    listed = (await api.get("/api/runs")).json()
    requests = (await api.get("/api/requests")).json()
    await api.start("failing", "ended", run_id="t2")
    await api.wait_for("t2", {"failed"})
    streamed = await api.get("/api/runs/t2/events")  # an ended run's stream ends
    lines = streamed.text.splitlines()
    events = [m.data for m in messages([*lines, ""])]
    names = {"created_at", "updated_at", "wake_at", "deadline_at", "lease_until", "at"}
    names |= {"pause_requested"}
    found = _times_of([detail["run"], history, listed, requests, events], names)
    given = [t for t in found if t is not None]
    assert len(given) >= 8, found
    for time in given:
        assert isinstance(time, str), f"{time!r} is not ISO 8601"
        assert _ISO.match(time), time
        assert datetime.fromisoformat(time).utcoffset() is not None
    created = datetime.fromisoformat(detail["run"]["created_at"])
    assert abs(created.timestamp() - time_now()) < 3600  # the same instant, not a shifted one
