"""An answer link is spent by an answer, and by nothing else.

A link POSTed to a server that could not deliver its answer (here one that
does not serve the run's workflow) was marked used all the same: the
person's only way to answer was gone, and the request still waited. Only
a request that waits no longer spends a link now; any other failure gives
the use back.
"""

from __future__ import annotations

import sqlite3

import httpx

from server.conftest import serving

YES = {"approved": True, "note": "fine"}


async def test_a_link_no_server_could_deliver_stays_usable_and_answers_once(sqlite_url):
    async with serving(sqlite_url) as api:
        started = await api.post(
            "/api/runs",
            json={"workflow": "approval", "input": {"topic": "links", "words": 3}, "run_id": "r1"},
        )
        assert started.status_code == 201, started.text
        detail = await api.wait_for("r1", {"awaiting_input"})
        (request,) = detail["pending_requests"]
        made = await api.post(
            f"/api/runs/r1/requests/{request['request_id']}/links", json={"for": "maria"}
        )
        assert made.status_code == 201, made.text
        path = httpx.URL(made.json()["url"]).path
    async with serving(sqlite_url, apps=("search_app",), headers={}) as elsewhere:
        unserved = await elsewhere.post(path, json={"answer": YES})
        assert unserved.status_code == 404, unserved.text
    async with serving(sqlite_url, headers={}) as api:
        shown = await api.get(path, headers={"Accept": "application/json"})
        assert shown.status_code == 200, shown.text
        answered = await api.post(path, json={"answer": YES})
        assert answered.status_code == 202, answered.text
        again = await api.post(path, json={"answer": YES})
        assert again.status_code == 409, again.text
        assert "used already, by maria" in again.json()["error"]["message"]


async def test_a_body_sent_to_a_link_that_cannot_be_used_is_never_read(sqlite_url):
    # The link is the only credential of /answer/...: a body (up to --max-body, on any
    # number of connections) was read before the link was looked at, by anyone.
    async with serving(sqlite_url, headers={}, max_body=1024) as api:
        refused = await api.post(
            "/answer/not-a-link",
            content=b"x" * 1000,  # not JSON, nor sent as JSON: never looked at
            headers={"content-type": "text/plain"},
        )
    assert refused.status_code != 415, refused.text
    assert "this answer link is not valid" in refused.json()["error"]["message"]


async def test_a_link_lasting_past_any_date_is_refused_and_none_is_stored(sqlite_url):
    async with serving(sqlite_url) as api:
        await api.post(
            "/api/runs",
            json={"workflow": "approval", "input": {"topic": "links", "words": 3}, "run_id": "r1"},
        )
        detail = await api.wait_for("r1", {"awaiting_input"})
        (request,) = detail["pending_requests"]
        path = f"/api/runs/r1/requests/{request['request_id']}/links"
        for lifetime in (b"1e308", b"1" + b"0" * 400, b"0", b"-5"):
            made = await api.post(
                path,
                content=b'{"for": "maria", "expires_in": ' + lifetime + b"}",
                headers={"content-type": "application/json"},
            )
            assert made.status_code == 400, (lifetime[:10], made.text)
            assert made.json()["error"]["message"].startswith("expires_in: seconds, above 0")
    with sqlite3.connect(sqlite_url) as db:
        assert db.execute("SELECT COUNT(*) FROM treadle_links").fetchone() == (0,)
