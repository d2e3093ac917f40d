"""The floor ``benchmarks/server.py`` compares ``treadle serve`` with: the same rows, no treadle.

A bare Starlette application on uvicorn that reads the store's SQLite file
with ``sqlite3`` and answers the same two questions: the newest 1,000 runs
as JSON, and one run's events as Server-Sent Events (sse-starlette). What
is left between it and the server is treadle's own work: access checks,
the store's reads, turning rows into the API's shapes, following the log.
(A log row of 1 KiB or more is stored packed, deflated against a fixed
dictionary: the floor unpacks it with the file format's one decoder,
``treadle._stores._event_packing.events_text``, as any reader of the file must.)

    python benchmarks/server_floor.py STORE_FILE PORT
"""

from __future__ import annotations

import json
import sqlite3
import sys

import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from treadle._stores._event_packing import events_text

STORE = sys.argv[1] if __name__ == "__main__" else ""
_COLUMNS = (
    "run_id, workflow, status, superstep, checkpoint_id, parent_run_id, parent_checkpoint_id,"
    " created_at, updated_at, error, wake_at, deadline_at, owner, lease_until, parked"
)


def _connect() -> sqlite3.Connection:
    connection = sqlite3.connect(STORE)
    connection.row_factory = sqlite3.Row
    return connection


async def runs(request):
    limit = int(request.query_params.get("limit", "50"))
    with _connect() as connection:
        rows = connection.execute(
            f"SELECT {_COLUMNS} FROM treadle_runs ORDER BY created_at DESC LIMIT ?",  # noqa: S608
            (limit,),
        ).fetchall()
    return JSONResponse({"runs": [dict(row) for row in rows]})


async def events(request):
    run_id = request.path_params["run_id"]

    async def stream():
        with _connect() as connection:
            rows = connection.execute(
                "SELECT first_seq, events FROM treadle_events WHERE run_id = ? ORDER BY first_seq",
                (run_id,),
            ).fetchall()
        for row in rows:  # a row per write: its events as a JSON array, numbered from first_seq
            for seq, (superstep, kind, executor_id, at, data) in enumerate(
                json.loads(events_text(row["events"])), row["first_seq"]
            ):
                body = {
                    "seq": seq,
                    "run_id": run_id,
                    "superstep": superstep,
                    "type": kind,
                    "executor_id": executor_id,
                    "at": at,
                    "data": data,
                }
                yield ServerSentEvent(json.dumps(body), id=str(seq), event=kind)
        yield ServerSentEvent("{}", event="end")

    return EventSourceResponse(stream())


app = Starlette(routes=[Route("/api/runs", runs), Route("/api/runs/{run_id}/events", events)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
