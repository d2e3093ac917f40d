"""Webhooks from ``treadle serve`` (issue 29): a server alone delivers, and its dead letters.

A real ``treadle serve`` on a SQLite file, no ``treadle worker`` anywhere:
a run started through the API asks a question, and the server's own
sender delivers ``request.created`` to a real receiver on 127.0.0.1,
signed (checked with the ``standardwebhooks`` reference library). A
receiver that refuses everything turns the messages into dead letters,
which ``GET /api/webhooks/dead`` lists and ``POST
/api/webhooks/dead/resend`` sends again (an admin's routes).
"""

from __future__ import annotations

import json

import pytest

from server.conftest import ServeProcess
from webhook_receiver import Receiver, until, verified

pytestmark = pytest.mark.integration


def add_endpoint(serve: ServeProcess, port: int, *extra: str) -> str:
    shown = serve.cli("webhooks", "add", f"http://127.0.0.1:{port}/hook", *extra)
    return shown.split("signing secret: ", 1)[1].split()[0]


@pytest.fixture
def serve(tmp_path):
    serve = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite")).start()
    serve.ready()
    yield serve
    serve.stop()


def test_a_server_alone_delivers_webhooks(serve):
    receiver = Receiver(failures=0)
    receiver.start()
    try:
        secret = add_endpoint(serve, receiver.port)
        with serve.client(headers=serve.auth) as client:
            started = client.post(
                "/api/runs",
                json={"workflow": "approval", "input": {"topic": "hooks", "words": 3}},
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
        until(lambda: receiver.taken, 20)
    finally:
        receiver.stop()
    (message,) = verified(secret, receiver.taken)
    assert message["type"] == "request.created"
    assert message["data"]["run_id"] == run_id


def test_dead_letters_are_listed_and_resent_over_http(serve):
    receiver = Receiver(failures=10**6)  # refuses every delivery, until told otherwise
    receiver.start()
    try:
        secret = add_endpoint(serve, receiver.port, "--attempts", "2", "--backoff", "0.1")
        with serve.client(headers=serve.auth) as client:
            started = client.post(
                "/api/runs", json={"workflow": "failing", "input": "boom", "run_id": "fails"}
            )
            assert started.status_code == 201, started.text

            def dead() -> list[dict]:
                answer = client.get("/api/webhooks/dead")
                assert answer.status_code == 200, answer.text
                return answer.json()["dead"]

            until(dead, 20)
            (letter,) = dead()
            assert (letter["type"], letter["run_id"], letter["attempts"]) == (
                "run.failed",
                "fails",
                2,
            )
            assert letter["due_at"].endswith("+00:00")
            assert len(receiver.deliveries) == 2
            refused = client.post("/api/webhooks/dead/resend", json={})
            assert refused.status_code == 400, refused.text
            assert "message_ids" in refused.json()["error"]["message"]
            receiver.failures = 0
            resent = client.post(
                "/api/webhooks/dead/resend", json={"message_ids": [letter["message_id"]]}
            )
            assert resent.status_code == 200, resent.text
            assert resent.json() == {"resent": 1}
            until(lambda: receiver.taken, 20)
            assert dead() == []
    finally:
        receiver.stop()
    (message,) = verified(secret, receiver.taken)
    assert message["id"] == letter["webhook_id"]  # the same id as the dead letter's


def test_a_request_created_message_carries_an_answer_link_for_its_person(serve):
    """An endpoint made --for maria gets, with each request.created, a link answering it as her.

    The link is the same on every retry of the message (its first delivery
    is refused here), and answering through it needs nothing else.
    """
    receiver = Receiver(failures=1)
    receiver.start()
    try:
        secret = add_endpoint(
            serve, receiver.port, "--for", "maria", "--base-url", serve.base, "--backoff", "0.1"
        )
        with serve.client(headers=serve.auth) as client:
            started = client.post(
                "/api/runs",
                json={"workflow": "approval", "input": {"topic": "hooks", "words": 3}},
            )
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
        until(lambda: receiver.taken, 20)
        tried = [json.loads(body) for _, body in receiver.deliveries[:2]]
        assert tried[0] == tried[1]  # the refused delivery and its retry: one message, one link
        (message,) = verified(secret, receiver.taken)
        link = message["data"]["answer_link"]
        assert link.startswith(f"{serve.base}/answer/")
        with serve.client() as client:  # no token: the link is the credential
            answered = client.post(link, json={"answer": {"approved": True, "note": "ok"}})
            assert answered.status_code == 202, answered.text
            assert answered.json()["answered_as"] == "maria"
        until(
            lambda: any(json.loads(b)["type"] == "request.answered" for _, b in receiver.taken), 20
        )
    finally:
        receiver.stop()
    answered_message = next(
        m for m in verified(secret, receiver.taken) if m["type"] == "request.answered"
    )
    assert answered_message["data"]["run_id"] == run_id
    assert answered_message["data"]["actor"]["label"] == "link:maria"
