"""``GET /api/runs`` lists what each run's calls wait for, read for the whole page at once."""

from __future__ import annotations

from apps.held_line import HeldLine


async def test_the_run_list_carries_each_runs_waiting_for_from_one_store_read(api):
    line, store = HeldLine(), api.store
    await line.queue(store, {"first": "a", "second": "second", "third": "third"})

    reads: list[list[str]] = []
    line_waits = store.line_waits

    async def counted(run_ids):
        reads.append(sorted(run_ids))
        return await line_waits(run_ids)

    store.line_waits = counted
    try:
        page = await api.get("/api/runs")
    finally:
        del store.line_waits
    assert page.status_code == 200, page.text
    assert reads == [["first", "second", "third"]]  # one read for the page
    rows = {r["run_id"]: r for r in page.json()["runs"]}
    assert rows["first"]["waiting_for"] == []
    assert [w["position"] for w in rows["second"]["waiting_for"]] == [0]
    [wait] = rows["third"]["waiting_for"]
    assert (wait["limit"], wait["key"], wait["position"]) == ("openai", "", 1)
    assert wait["waiting_since"].endswith("+00:00")
    detail = (await api.get("/api/runs/third")).json()
    assert detail["waiting_for"] == rows["third"]["waiting_for"]  # the list says what show says

    await line.finish()
    ended = (await api.get("/api/runs")).json()["runs"]
    assert [r["waiting_for"] for r in ended] == [[], [], []]
