"""An answer link is spent by an answer, and by nothing else.

A link POSTed to a server that could not deliver its answer (here one that
does not serve the run's workflow) was marked used all the same: the
person's only way to answer was gone, and the request still waited. Only
a request that waits no longer spends a link now; any other failure gives
the use back.
"""

from __future__ import annotations

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
