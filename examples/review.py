"""The README's first command-line example: a writer's draft a reviewer approves.

Run it from the project root as the README prints it::

    treadle run examples/review.py --input '{"topic": "otters", "words": 300}' --run-id report-1
"""

from dataclasses import dataclass

from treadle import WorkflowBuilder, WorkflowContext, executor


@dataclass(frozen=True)
class Verdict:
    """The reviewer's answer."""

    ok: bool
    note: str = ""


@dataclass(frozen=True)
class Brief:
    """What to write about, and how long."""

    topic: str
    words: int


@executor
async def write(brief: Brief, ctx: WorkflowContext[str]) -> None:
    """Draft the text (here: say what it would be)."""
    ctx.state.set("topic", brief.topic)
    ctx.send_message(f"{brief.words} words about {brief.topic}")


@executor
async def approve(text: str, ctx: WorkflowContext) -> None:
    """Ask a person to approve the draft; the run rests until they answer."""
    verdict = await ctx.request({"text": text}, Verdict)
    ctx.yield_output({"text": text, "approved": verdict.ok, "note": verdict.note})


review = (
    WorkflowBuilder(start=write, name="review")
    .add_edge(write, approve)
    .register_type(Verdict)
    .build()
)
