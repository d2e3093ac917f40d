"""Start policies through the HTTP API: ``POST /api/runs`` with a deduplication id or a policy.

On SQLite the server decides each start through its store and drives what
is admitted; what waits its turn is queued for its timer service.
"""

from __future__ import annotations

BRIEF = {"topic": "otters", "words": 30}


async def test_a_second_start_with_one_deduplication_id_joins_the_first_run(api):
    body = {"workflow": "approval", "input": BRIEF, "deduplication_id": "ticket-9"}
    first = await api.post("/api/runs", json=body)
    again = await api.post("/api/runs", json=body)
    assert (first.status_code, first.json()["joined"]) == (201, False)
    assert (again.status_code, again.json()["joined"]) == (200, True)
    run_id = first.json()["run"]["run_id"]
    assert again.json()["run"]["run_id"] == run_id
    assert again.headers["Location"] == f"/api/runs/{run_id}"
    runs = (await api.get("/api/runs")).json()["runs"]
    assert [run["run_id"] for run in runs] == [run_id]


async def test_a_singleton_start_queues_or_is_refused_naming_the_run_holding_the_key(api):
    policy = {"singleton": True, "key": "acme"}
    body = {"workflow": "approval", "input": BRIEF, "start_policy": policy}
    first = (await api.post("/api/runs", json=body)).json()["run"]
    await api.wait_for(first["run_id"], {"awaiting_input"})
    queued = await api.post("/api/runs", json=body)
    assert queued.status_code == 201
    assert queued.json()["run"]["status"] == "queued"
    refusing = {**body, "start_policy": {**policy, "when_busy": "refuse"}}
    refused = await api.post("/api/runs", json=refusing)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["type"] == "StartRefusedError"
    assert first["run_id"] in error["message"]
    # The first ends: the server's timer service starts the queued one.
    (request,) = (await api.get(f"/api/runs/{first['run_id']}")).json()["pending_requests"]
    path = f"/api/runs/{first['run_id']}/requests/{request['request_id']}"
    answered = await api.post(path, json={"answer": {"approved": False, "note": "no"}})
    assert answered.status_code == 202, answered.text  # accepted: the server goes on with it
    await api.wait_for(first["run_id"], {"completed"})
    await api.wait_for(queued.json()["run"]["run_id"], {"awaiting_input"})


async def test_a_bad_start_policy_is_refused_naming_the_field(api):
    cases = [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1"),
        ({"when_busy": "drop", "singleton": True}, "when_busy must be 'queue' or 'refuse'"),
        ({"singleton": "yes"}, "singleton must be true or false"),
        ({"key": 7, "singleton": True}, "key must be a string"),
        ({"burst": 3}, "unknown fields burst"),
    ]
    for policy, message in cases:
        body = {"workflow": "approval", "input": BRIEF, "start_policy": policy}
        response = await api.post("/api/runs", json=body)
        assert response.status_code == 400, (policy, response.text)
        assert message in response.json()["error"]["message"], policy
    assert (await api.get("/api/runs")).json()["runs"] == []
