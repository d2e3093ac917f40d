"""A run's ephemeral events (token deltas) reach the event stream live, never the log."""

from __future__ import annotations

from sse import messages

from server.conftest import ServeProcess

WORDS = ["tides", "turn", "twice"]


def test_token_deltas_stream_live_without_ids_between_the_logged_events(tmp_path):
    gate = tmp_path / "gate"
    serve = ServeProcess(
        tmp_path, f"sqlite:///{tmp_path / 'runs.sqlite'}", "--app", "live_app", LIVE_GATE=str(gate)
    ).start()
    try:
        serve.ready()
        with serve.client() as client:
            started = client.post(
                "/api/runs", json={"workflow": "talk", "input": WORDS}, headers=serve.auth
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            seen = []
            url = f"/api/runs/{run_id}/events"
            with client.stream("GET", url, headers=serve.auth) as stream:
                for message in messages(stream.iter_lines()):
                    seen.append(message)
                    if message.id == 1:  # the stream is under way: the first token may come
                        gate.touch()
                    if message.event == "token":
                        assert message.id is None  # not in the log: nothing to resume from
                        assert message.data["seq"] is None
                        gate.touch()  # the next token comes only once this one was seen here
                    if message.event == "end":
                        break
            tokens = [m.data["data"]["text"] for m in seen if m.event == "token"]
            assert tokens == WORDS
            ids = [m.id for m in seen if m.id is not None]
            assert ids == list(range(1, len(ids) + 1))
            # Read again once the run has ended: the log alone, with no token in it.
            with client.stream("GET", url, headers=serve.auth) as stream:
                again = [m for m in messages(stream.iter_lines()) if m.event != "end"]
            assert [m.id for m in again] == ids
            assert "token" not in {m.event for m in again}
            output = [m.data["data"]["value"] for m in again if m.event == "output"]
            assert output == ["tides turn twice"]
    finally:
        serve.stop()
