"""The workflow ``benchmarks/scaleout.py`` serves with ``treadle worker`` processes.

``spin`` is a self-loop of no-op supersteps: the input ``{"supersteps": S}``
makes a run of exactly ``S`` supersteps (``begin`` is the first, ``step`` the
``S - 1`` others), ending with one output. Each superstep does nothing but
hand a counter on, so what a worker spends on it is orchestration and the
commit of its checkpoint to PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Spin:
    supersteps: int


@dataclass(frozen=True)
class Tick:
    n: int
    total: int


@executor(id="begin")
async def begin(job: Spin, ctx: WorkflowContext[Tick]) -> None:
    if job.supersteps <= 1:
        ctx.yield_output({"supersteps": 1})
        return
    ctx.send_message(Tick(2, job.supersteps))


@executor(id="step")
async def step(tick: Tick, ctx: WorkflowContext[Tick]) -> None:
    if tick.n >= tick.total:
        ctx.yield_output({"supersteps": tick.n})
        return
    ctx.send_message(Tick(tick.n + 1, tick.total))


spin = (
    WorkflowBuilder(begin, name="scaleout-spin", max_supersteps=100_000)
    .add_edge(begin, step)
    .add_edge(step, step)
    .build()
)
