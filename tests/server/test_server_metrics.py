"""``GET /metrics`` on `treadle serve` over SQLite, where the server drives the runs itself.

The runs it starts, answers and resumes are counted by the server's own
process (supersteps, invocations, run endings), and the store's gauges
follow what the store says at each scrape. The route is behind the access
rules: no token, 401 (every role's answer is in test_server_roles.py).
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


async def _scrape(api) -> dict[tuple[str, frozenset], float]:
    response = await api.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[sample.name, frozenset(sample.labels.items())] = sample.value
    return found


def _total(found, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and wanted <= ls)


async def test_the_server_counts_the_runs_it_drives_and_reads_the_stores_gauges(api):
    started = await api.start("approval", {"topic": "tides", "words": 5})
    await api.wait_for(started["run_id"], {"awaiting_input"})
    found = await _scrape(api)
    assert _total(found, "treadle_requests_open", workflow="approval") == 1
    assert _total(found, "treadle_runs", workflow="approval", status="awaiting_input") == 1
    assert _total(found, "treadle_supersteps_total", workflow="approval") >= 1
    assert _total(found, "treadle_invocations_total", outcome="suspended") == 1

    (request,) = (await api.get("/api/requests")).json()["requests"]
    answered = await api.post(
        f"/api/runs/{started['run_id']}/requests/{request['request_id']}",
        json={"answer": {"approved": True, "note": "fine"}},
    )
    assert answered.status_code == 202, answered.text
    await api.wait_for(started["run_id"], {"completed"})
    failed = await api.start("failing", "now")
    await api.wait_for(failed["run_id"], {"failed"})

    found = await _scrape(api)
    assert _total(found, "treadle_requests_open") == 0
    assert _total(found, "treadle_runs_ended_total", workflow="approval", status="completed") == 1
    assert _total(found, "treadle_runs_ended_total", workflow="failing", status="failed") == 1
    assert _total(found, "treadle_runs", workflow="approval", status="completed") == 1
    assert _total(found, "treadle_runs", workflow="failing", status="failed") == 1
    assert _total(found, "treadle_commit_duration_seconds_count") > 0


async def test_metrics_need_a_token(api):
    anonymous = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api.app), base_url="http://testserver"
    )
    async with anonymous:
        assert (await anonymous.get("/metrics")).status_code == 401
