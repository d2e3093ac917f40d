"""A large run's JSON is encoded off the event loop while the server answers others.

``GET /api/runs/{id}`` of a run of 4 MB encoded its JSON on the event loop
(about 0.3 s), every other client waiting. The test holds the large
body's encoding (its first piece waits until another request has been
answered) and asserts the order: it proves the encoding runs off the
loop's thread and the loop serves meanwhile. That the encoding itself
lets the loop's thread in (``json`` and pydantic hold the GIL for as long
as one call encodes, hence pieces) is ``test_json_pieces.py``'s to show.
"""

from __future__ import annotations

import asyncio
import json
import threading

from server.conftest import serving
from treadle._server import _json

ROWS = 20_000  # about 1 MB of JSON


async def test_the_loop_answers_others_while_a_large_run_is_encoded(sqlite_url, monkeypatch):
    encoding = threading.Event()  # the large body's encoding is under way (and held)
    answered = threading.Event()  # the small request was answered meanwhile
    threads: list[int] = []
    plain = _json.plain

    def held_plain(value):
        if not encoding.is_set() and "BIG-" in json.dumps(value, default=repr):
            threads.append(threading.get_ident())
            encoding.set()
            answered.wait(5)  # the loop is free to answer others, or (encoded on it) is not
        return plain(value)

    async with serving(sqlite_url, apps=("large_app",)) as api:
        run = await api.start("large", ROWS)
        await api.wait_for(run["run_id"], {"completed"})
        monkeypatch.setattr(_json, "plain", held_plain)
        loop = threading.get_ident()
        order: list[str] = []

        async def large() -> None:
            detail = await api.get(f"/api/runs/{run['run_id']}")
            assert detail.status_code == 200, detail.text
            assert len(detail.json()["state"]["rows"]) == ROWS
            order.append("large")

        async def small() -> None:
            await asyncio.to_thread(encoding.wait, 5)
            me = await api.get("/api/me")
            assert me.status_code == 200, me.text
            order.append("small")
            answered.set()

        await asyncio.gather(large(), small())
    assert threads, "the large run's body was never encoded"
    assert order == ["small", "large"], (
        f"the event loop served nobody while a large run's body was encoded: {order}"
    )
    assert threads[0] != loop, "the large run's body was encoded on the event loop's thread"
