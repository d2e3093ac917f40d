"""A workflow whose run holds a large state: what a read of a large run encodes."""

from __future__ import annotations

from treadle import WorkflowBuilder, WorkflowContext, executor


@executor
async def grow(rows: int, ctx: WorkflowContext) -> None:
    ctx.state.set(
        "rows", [{"id": f"BIG-{i}", "name": "x" * 20, "values": [i, i / 2]} for i in range(rows)]
    )
    ctx.yield_output(rows)


large = WorkflowBuilder(start=grow, name="large").build()
