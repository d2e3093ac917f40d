"""``GET /api/runs?where=`` and ``POST /api/bulk`` (issue 34).

The server reads a filter as the CLI does, refuses a bad one (400, naming
its column), and takes a bulk action as its caller: a named operator token's
actions are recorded with it, a viewer is refused (403) before anything is
read, and a dry run counts what the real action then acts on.
"""

from __future__ import annotations

from server.conftest import serving
from treadle._stores._tokens import token_hash

OPS = "tdl_ops-0123456789abcdef"
VIEWER = "tdl_vic-0123456789abcdef"


async def _filled(api):
    tickets = {"t1": ("c1", 10), "t2": ("c2", 2000), "t3": ("c1", 3000)}
    for run_id, (customer, amount) in tickets.items():
        await api.start("tickets", {"customer": customer, "amount": amount}, run_id=run_id)
        await api.wait_for(run_id, {"awaiting_input"})


async def _ids(api, where):
    response = await api.get("/api/runs", params={"where": where})
    assert response.status_code == 200, response.text
    return [run["run_id"] for run in response.json()["runs"]]


async def test_runs_are_listed_by_filter_and_a_bad_one_is_refused(sqlite_url):
    async with serving(sqlite_url, apps=("search_app",)) as api:
        await _filled(api)
        assert await _ids(api, 'fields.customer == "c1"') == ["t3", "t1"]
        assert await _ids(api, 'fields.amount > 100 && fields.stage == "review"') == ["t3", "t2"]
        response = await api.get("/api/runs", params={"where": "fields.amount >> 1"})
        assert response.status_code == 400
        assert "column 16" in response.json()["error"]["message"]
        # A misspelt status matches no run: refused, naming the statuses, not an empty list
        # (a bulk action's dry run of nothing, said as if it were the truth).
        for where in ('status == "awaitng_input"', 'status in ["failed", "stallled"]'):
            for refused in (
                await api.get("/api/runs", params={"where": where}),
                await api.post("/api/bulk", json={"action": "cancel", "where": where}),
            ):
                assert refused.status_code == 400, refused.text
                message = refused.json()["error"]["message"]
                assert "no status is" in message
                assert "awaiting_input, cancelled, completed" in message
        assert await _ids(api, 'status != "queued" && fields.customer == "c1"') == ["t3", "t1"]


async def test_a_bulk_action_is_taken_as_its_caller_and_its_dry_run_counts_it(sqlite_url):
    async with serving(sqlite_url, apps=("search_app",)) as api:
        await api.store.add_token("ops", "operator", token_hash(OPS), created_by="test")
        await api.store.add_token("vic", "viewer", token_hash(VIEWER), created_by="test")
        await _filled(api)
        body = {"action": "cancel", "where": 'fields.customer == "c1"'}
        viewer = {"Authorization": f"Bearer {VIEWER}"}
        refused = await api.post("/api/bulk", json=body, headers=viewer)
        assert refused.status_code == 403
        ops = {"Authorization": f"Bearer {OPS}"}
        counted = await api.post("/api/bulk", json={**body, "dry_run": True}, headers=ops)
        assert counted.json() == {
            "action": "cancel",
            "dry_run": True,
            "matched": 2,
            "acted": 0,
            "skipped": [],
        }
        done = await api.post("/api/bulk", json=body, headers=ops)
        assert done.status_code == 200, done.text
        assert (done.json()["matched"], done.json()["acted"]) == (2, 2)
        assert await _ids(api, 'status == "cancelled"') == ["t3", "t1"]
        entries = await api.store.read_audit()
        cancels = [(e.run_id, e.actor["label"]) for e in entries if e.action == "run_cancelled"]
        assert sorted(cancels) == [("t1", "token:ops"), ("t3", "token:ops")]
        deleting = await api.post(
            "/api/bulk", json={"action": "delete", "where": "true"}, headers=ops
        )
        assert deleting.status_code == 403
        assert "admin" in deleting.json()["error"]["message"]
        bad = await api.post("/api/bulk", json={"action": "explode", "where": "true"})
        assert bad.status_code == 400


async def test_a_bulk_answer_is_given_checked_against_each_request_and_a_slow_rate_refused(
    sqlite_url,
):
    async with serving(sqlite_url, apps=("search_app",)) as api:
        await _filled(api)
        asked = {"action": "respond", "where": 'fields.customer == "c1"', "executor": "approve"}
        # No answer is no decision: nothing is answered with a default.
        missing = await api.post("/api/bulk", json=asked)
        assert missing.status_code == 400
        assert "respond needs the answer it gives" in missing.json()["error"]["message"]
        # An answer of the wrong type is refused per run, as it would be for one run,
        # and leaves each request open.
        wrong = await api.post("/api/bulk", json={**asked, "answer": 42})
        assert wrong.status_code == 200, wrong.text
        assert wrong.json()["acted"] == 0
        assert [s["run_id"] for s in wrong.json()["skipped"]] == ["t3", "t1"]
        assert all(s["reason"].endswith("expects str, got int 42") for s in wrong.json()["skipped"])
        # A rate that would keep the caller waiting for days acts on nothing.
        slow = await api.post("/api/bulk", json={**asked, "answer": "yes", "rate": 1e-6})
        assert slow.status_code == 400
        assert slow.json()["error"]["message"].startswith("rate: 2 runs at 1e-06 a second")
        right = await api.post("/api/bulk", json={**asked, "answer": "yes"})
        assert (right.json()["acted"], right.json()["skipped"]) == (2, [])
        for run_id in ("t1", "t3"):
            await api.wait_for(run_id, {"completed"})


async def test_a_body_that_is_not_json_is_refused_whatever_pythons_reader_accepts(sqlite_url):
    async with serving(sqlite_url, apps=("search_app",)) as api:
        await _filled(api)
        (request,) = (await api.get("/api/runs/t1")).json()["pending_requests"]
        path = f"/api/runs/t1/requests/{request['request_id']}"
        json_type = {"content-type": "application/json"}
        for body, says in (
            (b'{"answer": NaN}', "NaN is not a JSON number"),
            (b'{"answer": -Infinity}', "-Infinity is not a JSON number"),
            (b'{"answer": 1e400}', "the number 1e400 is past what a float holds"),
            (b'{"answer": "no", "answer": "yes"}', "the key 'answer' appears twice"),
            (b'{"answer": "report-\\udcff.txt"}', "holds half a surrogate pair (\\udcff)"),
        ):
            refused = await api.post(path, content=body, headers=json_type)
            assert refused.status_code == 400, body
            assert says in refused.json()["error"]["message"], body
        (still,) = (await api.get("/api/runs/t1")).json()["pending_requests"]
        assert still["request_id"] == request["request_id"]


async def test_a_bulk_action_takes_any_filter_the_run_list_takes(sqlite_url):
    # POST /api/bulk refused a filter over 1,024 characters that GET /api/runs and the CLI
    # took (filters go to 2,000).
    long_filter = " || ".join(f'fields.customer == "customer-{n:04}"' for n in range(30))
    long_filter += ' || fields.customer == "c1"'
    assert 1024 < len(long_filter) <= 2000
    async with serving(sqlite_url, apps=("search_app",)) as api:
        await _filled(api)
        listed = await api.get("/api/runs", params={"where": long_filter})
        assert listed.status_code == 200, listed.text
        counted = await api.post(
            "/api/bulk", json={"action": "cancel", "where": long_filter, "dry_run": True}
        )
        assert counted.status_code == 200, counted.text
        assert counted.json()["matched"] == len(listed.json()["runs"]) == 2
        too_long = await api.post(
            "/api/bulk", json={"action": "cancel", "where": "true || " * 300 + "true"}
        )
        assert too_long.status_code == 400
        assert "at most 2000 characters" in too_long.json()["error"]["message"]
