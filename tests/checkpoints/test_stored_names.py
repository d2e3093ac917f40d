"""Names written into checkpoints outlive the modules that define the classes."""

from __future__ import annotations

from treadle import HandoffRefused, SpawnResult, WorkflowBuilder, WorkflowContext, executor


@executor
async def step(message: str, ctx: WorkflowContext) -> None:
    ctx.yield_output(message)


def test_the_engines_own_message_types_keep_the_names_earlier_checkpoints_used():
    # Checkpoints written before the source moved name these classes by their
    # old module paths; loading looks those names up, so they must not change.
    registry = WorkflowBuilder(step).build().type_registry
    assert registry.name_of(SpawnResult) == "treadle._runtime._spawn.SpawnResult"
    assert registry.name_of(HandoffRefused) == "treadle._runtime._delivery.HandoffRefused"
    assert registry.class_of("treadle._runtime._spawn.SpawnResult") is SpawnResult
