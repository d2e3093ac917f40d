"""Who may answer, over HTTP (issue 29): each caller's inbox, and 403 naming who may.

Three named tokens: maria (approver), bob (viewer), ann (operator, who
starts the runs). One run's request names maria, one needs four eyes, one
names no one (any approver). ``GET /api/requests`` lists for each caller
exactly the requests the door would take its answer to, and an answer from
anyone else is refused with 403 naming who may, nothing changed.
"""

from __future__ import annotations

from server.conftest import serving
from treadle._stores._tokens import token_hash

RULES = {
    "for-maria": {"approvers": ["maria"]},
    "four-eyes": {"four_eyes": True},
    "anyone": {},
}
TOKENS = {"maria": "approver", "bob": "viewer", "ann": "operator"}


def _as(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer tdl_{name}-secret-0123456789"}


async def test_each_callers_inbox_holds_what_it_may_answer_and_others_get_403(sqlite_url):
    async with serving(sqlite_url, apps=("inbox_app",)) as api:
        for name, role in TOKENS.items():
            secret = _as(name)["Authorization"].removeprefix("Bearer ")
            await api.store.add_token(name, role, token_hash(secret), created_by="test")
        for run_id, rules in RULES.items():
            body = {"workflow": "inbox", "input": rules, "run_id": run_id}
            started = await api.post("/api/runs", json=body, headers=_as("ann"))
            assert started.status_code == 201, started.text
            await api.wait_for(run_id, {"awaiting_input"})

        async def inbox(name: str) -> dict[str, dict]:
            listed = await api.get("/api/requests", headers=_as(name))
            assert listed.status_code == 200, listed.text
            return {r["run_id"]: r for r in listed.json()["requests"]}

        marias = await inbox("maria")
        assert sorted(marias) == ["anyone", "for-maria", "four-eyes"]
        assert (marias["for-maria"]["approvers"], marias["for-maria"]["four_eyes"]) == (
            ["maria"],
            False,
        )
        assert marias["four-eyes"]["four_eyes"] is True
        assert sorted(await inbox("ann")) == ["anyone"]  # not named; started the four-eyes run
        assert await inbox("bob") == {}  # a viewer answers nothing

        def answer_path(run_id: str) -> str:
            return f"/api/runs/{run_id}/requests/{marias[run_id]['request_id']}"

        answer = {"answer": {"approve": True}}
        refused = await api.post(answer_path("for-maria"), json=answer, headers=_as("ann"))
        assert refused.status_code == 403, refused.text
        assert "only maria may" in refused.text
        refused = await api.post(answer_path("four-eyes"), json=answer, headers=_as("ann"))
        assert refused.status_code == 403, refused.text
        assert "four eyes" in refused.text
        refused = await api.post(answer_path("anyone"), json=answer, headers=_as("bob"))
        assert refused.status_code == 403, refused.text
        for run_id in RULES:  # nothing changed
            assert (await api.wait_for(run_id, {"awaiting_input"}))["pending_requests"]

        taken = await api.post(answer_path("for-maria"), json=answer, headers=_as("maria"))
        assert taken.status_code == 202, taken.text
        done = await api.wait_for("for-maria", {"completed"})
        assert done["outputs"] == [True]
        assert sorted(await inbox("maria")) == ["anyone", "four-eyes"]
