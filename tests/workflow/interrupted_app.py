"""A caller that stops waiting on a sync adapter: ``python interrupted_app.py ADAPTER``.

ADAPTER ``run_sync``: a run of a loop that never ends by itself, interrupted after
0.3 s by a real SIGINT (Ctrl-C). ``stream_sync``: the same run streamed, the
consumer leaving its ``for`` after three supersteps without closing the
stream. Either way it then waits 0.5 s and prints, as JSON, how many
handler calls there were when the caller stopped and after the wait.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import sys
import threading
import time

from treadle import ExecutionMode, WorkflowBuilder, WorkflowContext, executor
from treadle.events import SuperstepCompleted

calls = [0]


@executor
async def tick(n: int, ctx: WorkflowContext[int]) -> None:
    calls[0] += 1  # stands for a side effect: an e-mail, a charge
    await asyncio.sleep(0.005)
    ctx.send_message(n + 1)


workflow = WorkflowBuilder(start=tick, max_supersteps=1_000_000).add_edge(tick, tick).build()


def stopped_by_ctrl_c() -> str:
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        workflow.run_sync(0)
    except KeyboardInterrupt:
        return "interrupted"
    return "finished"


def left_early() -> str:
    for event in workflow.stream_sync(0, mode=ExecutionMode.LOCKSTEP):
        if isinstance(event, SuperstepCompleted) and event.superstep == 3:
            break
    gc.collect()
    return "left"


if __name__ == "__main__":
    how = stopped_by_ctrl_c() if sys.argv[1] == "run_sync" else left_early()
    at_stop = calls[0]
    time.sleep(0.5)
    print(json.dumps({"how": how, "at_stop": at_stop, "later": calls[0]}))
