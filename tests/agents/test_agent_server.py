"""A refund waiting for approval, answered through the HTTP API (``treadle serve``'s routes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scripted import counted

from server.conftest import serving

if TYPE_CHECKING:
    import pytest


async def test_a_refund_waiting_for_approval_is_answered_through_the_http_api(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    side = tmp_path / "side.sqlite"
    monkeypatch.setenv("REFUND_SIDE", str(side))
    async with serving(str(tmp_path / "runs.sqlite"), apps=("refund_app",)) as api:
        await api.start("desk", "Refund order A1, please.", run_id="web-1")
        detail = await api.wait_for("web-1", {"awaiting_input"})
        (pending,) = detail["pending_requests"]
        assert pending["payload"] == {
            "agent": "billing",
            "tool": "refund",
            "args": {"order": "A1", "cents": 5000},
            "call_id": "refund-1",
        }
        listed = (await api.get("/api/requests")).json()
        (inbox,) = [r for r in listed["requests"] if r["run_id"] == "web-1"]
        schema = inbox["answer_schema"]
        assert schema["properties"]["action"]["enum"] == ["approve", "edit", "refuse"]
        assert counted(side) == {}

        path = f"/api/runs/web-1/requests/{pending['request_id']}"
        wrong = await api.post(path, json={"answer": {"action": "refund it twice"}})
        assert wrong.status_code == 422, wrong.text
        answered = await api.post(path, json={"answer": {"action": "approve"}})
        assert answered.status_code == 202, answered.text
        done = await api.wait_for("web-1", {"completed", "failed"})
        again = await api.post(path, json={"answer": {"action": "approve"}})
        assert again.status_code == 409
    assert done["run"]["status"] == "completed"
    assert done["outputs"] == ["Done: refunded 5000 on A1 (refund #1)"]
    assert counted(side) == {"refund": 1}


async def test_a_bad_edit_is_refused_with_422_and_already_answered_shows_plain_json(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    side = tmp_path / "side.sqlite"
    monkeypatch.setenv("REFUND_SIDE", str(side))
    async with serving(str(tmp_path / "runs.sqlite"), apps=("refund_app",)) as api:
        await api.start("desk", "Refund order A1, please.", run_id="web-2")
        detail = await api.wait_for("web-2", {"awaiting_input"})
        (pending,) = detail["pending_requests"]
        path = f"/api/runs/web-2/requests/{pending['request_id']}"
        bad = {"action": "edit", "args": {"order": "A1", "cents": "lots"}}
        wrong = await api.post(path, json={"answer": bad})
        assert wrong.status_code == 422, wrong.text
        assert [f["loc"] for f in wrong.json()["error"]["fields"]] == ["args.cents"]
        empty = await api.post(path, json={"answer": {}})
        assert empty.status_code == 422, empty.text
        assert [f["loc"] for f in empty.json()["error"]["fields"]] == ["action"]
        fixed = {"action": "edit", "args": {"order": "A1", "cents": 700}}
        answered = await api.post(path, json={"answer": fixed})
        assert answered.status_code == 202, answered.text  # nothing was kept before
        done = await api.wait_for("web-2", {"completed", "failed"})
        again = await api.post(path, json={"answer": {"action": "approve"}})
        assert again.status_code == 409
        message = again.json()["error"]["message"]
        assert '{"action":"edit","args":{"order":"A1","cents":700},"reason":null}' in message
        assert "__t" not in message
    assert done["outputs"] == ["Done: refunded 700 on A1 (refund #1)"]
    assert counted(side) == {"refund": 1}
