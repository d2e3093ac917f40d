"""A workflow whose output no checkpoint can hold: a run of it fails at its first barrier."""

from treadle import WorkflowBuilder, WorkflowContext, executor


class Opaque:
    """Not a dataclass, model or enum: the safe serializer refuses it."""


@executor(id="emit")
async def emit(n: int, ctx: WorkflowContext[object]) -> None:
    ctx.yield_output(Opaque())


workflow = WorkflowBuilder(emit, name="unserializable").build()
