"""One webhook sender's claims, as a process of its own: ``outbox_claimer.py STORE OWNER``.

``STORE`` is a SQLite path or a PostgreSQL DSN (``TREADLE_SCHEMA`` names
the schema). It prints ``ready``, waits for a line on stdin (so two of
them start claiming at once), then claims the outbox's due messages two at
a time under ``OWNER``'s lease, "delivers" each (a short pause) and marks
it sent, until nothing was due for a while; last it prints, as JSON, each
message it held: ``[message_id, run_id, seq, claimed_at, sending_at]``
(after its claim returned, before its ``message_sent`` was called).
"""

import asyncio
import json
import sys
import time

from treadle._operations._inputs import open_store
from treadle._operations._webhooks import outbox_of


async def main(url: str, owner: str) -> None:
    store = open_store(url, create=False)
    try:
        outbox = outbox_of(store)
        await outbox.endpoints()  # opened before the start, so both start claiming at once
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        held: list[list[object]] = []
        idle = 0
        while idle < 10:
            claimed = await outbox.claim_messages(owner, time.time(), 30.0, 2)
            claimed_at = time.time()
            if not claimed:
                idle += 1
                await asyncio.sleep(0.05)
                continue
            idle = 0
            for message in claimed:
                await asyncio.sleep(0.005)
                held.append([message.message_id, message.run_id, message.seq, claimed_at, 0.0])
                held[-1][4] = time.time()
                await outbox.message_sent(message.message_id, owner)
        print(json.dumps(held), flush=True)
    finally:
        await store.close()


def cli() -> None:
    """The command line, run as a script or in a process forked for a test (``tests/forked.py``)."""
    asyncio.run(main(sys.argv[1], sys.argv[2]))


if __name__ == "__main__":
    cli()
