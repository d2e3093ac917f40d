"""An answer nested far deeper than JSON allows, in a program that raised its recursion limit.

Some programs raise ``sys.setrecursionlimit`` (deep recursive code of their
own). The check of an answer asked the C JSON encoder whether it holds
anything no JSON text can carry; that encoder recurses on the C stack as
deep as the limit lets it, and a value nested 100,000 deep killed the
process with SIGSEGV. Run in a process of its own, so a crash fails the test
rather than ending the run of the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from dataclasses import dataclass
    from treadle import WorkflowBuilder, WorkflowContext, executor
    from treadle.errors import RequestError
    from treadle.stores import MemoryStore

    @dataclass
    class Note:
        ok: bool
        d: list

    @executor(id="ask")
    async def ask(text: str, ctx: WorkflowContext) -> None:
        ctx.yield_output(await ctx.request({"text": text}, Note))

    async def main():
        sys.setrecursionlimit(1_000_000)
        deep = []
        for _ in range(100_000):
            deep = [deep]
        workflow = WorkflowBuilder(ask, name="ask").register_type(Note).build()
        store = MemoryStore()
        (request,) = (await workflow.run("x", run_id="r", store=store)).pending_requests
        try:
            await workflow.respond("r", {request.request_id: {"ok": True, "d": deep}}, store=store)
        except RequestError as error:
            print("refused:", str(error)[:200])

    asyncio.run(main())
    """
)


def test_a_deep_answer_is_refused_not_a_crash_where_the_recursion_limit_was_raised():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("refused:"), done.stdout
