"""GET /api/runs gives each run's outcome and filters on it (?outcome=)."""

from __future__ import annotations

from server.conftest import serving


async def test_runs_list_each_outcome_and_filter_on_it(sqlite_url):
    async with serving(sqlite_url, apps=("outcome_app",)) as api:
        for run_id, euros in (("cheap", 30), ("dear", 1200)):
            await api.start("expense", {"who": "ann", "euros": euros}, run_id=run_id)
            await api.wait_for(run_id, {"completed"})
        everything = (await api.get("/api/runs")).json()["runs"]
        assert {r["run_id"]: r["outcome"] for r in everything} == {
            "cheap": "approved",
            "dear": "rejected",
        }
        response = await api.get("/api/runs", params={"outcome": "rejected"})
        assert response.status_code == 200, response.text
        (dear,) = response.json()["runs"]
        assert dear["run_id"] == "dear"
        assert dear["outcome_summary"] == "1200 EUR for ann is over the 1000 EUR limit"
        detail = (await api.get("/api/runs/dear")).json()
        assert (detail["run"]["status"], detail["run"]["outcome"]) == ("completed", "rejected")
        none = await api.get("/api/runs", params={"outcome": "withdrawn", "status": "completed"})
        assert none.json()["runs"] == []
