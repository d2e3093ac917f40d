"""Build-time validation: every problem reported at once."""

import pytest

from treadle import Case, Default, Executor, WorkflowBuilder, WorkflowContext, executor, handler
from treadle.errors import WorkflowValidationError


@executor
async def start(msg: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(msg)


@executor
async def takes_int(msg: int, ctx: WorkflowContext[int]) -> None:
    ctx.send_message(msg)


@executor
async def takes_str(msg: str, ctx: WorkflowContext[str]) -> None:
    ctx.send_message(msg)


@executor
async def takes_list(msg: list[int], ctx: WorkflowContext) -> None:
    ctx.yield_output(msg)


@executor
async def lonely(msg: int, ctx: WorkflowContext) -> None:
    pass


class NoHandlers(Executor):
    pass


def test_a_valid_graph_builds():
    wf = (
        WorkflowBuilder(start=start)
        .add_fan_out(start, [takes_int, "takes_int2"])
        .add_executor(executor(id="takes_int2")(takes_int.__wrapped__))
        .add_fan_in([takes_int, "takes_int2"], takes_list)
        .build()
    )
    assert wf.executor_ids == ("start", "takes_int", "takes_int2", "takes_list")


def test_five_distinct_mistakes_are_reported_in_one_error():
    other_start = executor(id="start")(takes_int.__wrapped__)
    builder = (
        WorkflowBuilder(start=start)
        .add_edge(start, "nowhere")  # 1. unknown id
        .add_edge(start, other_start)  # 2. duplicate id: another instance named "start"
        .add_edge(start, takes_str)  # 3. start sends int, takes_str accepts str
        .add_fan_in([start, takes_int], takes_int)  # 4. fan-in target does not take a list
        .add_executor(lonely)  # 5. unreachable
    )
    with pytest.raises(WorkflowValidationError) as caught:
        builder.build()
    problems = caught.value.problems
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    assert "unknown executor id 'nowhere'" in text
    assert "duplicate executor id 'start'" in text
    assert "'start' sends int, but 'takes_str' accepts str" in text
    assert "fan-in target 'takes_int' must accept a list" in text
    assert "'lonely' is unreachable" in text
    assert str(caught.value).startswith("workflow is invalid (5 problems):")


def test_structural_mistakes_are_reported():
    builder = (
        WorkflowBuilder(start=start)
        .add_executor(NoHandlers)
        .add_switch(start, [])
        .add_fan_out(start, [])
        .add_chain([start])
        .add_state("k")
        .add_state("k")
        .add_edge(start, takes_int)
        .add_edge(start, takes_int)
        .add_edge(start, 42)  # type: ignore[arg-type]
    )
    with pytest.raises(WorkflowValidationError) as caught:
        builder.build()
    text = "\n".join(caught.value.problems)
    assert "'NoHandlers' has no handlers" in text
    assert "a switch needs at least one Case or Default" in text
    assert "a fan-out needs at least one target" in text
    assert "a chain needs at least two executors" in text
    assert "add_state('k'): the key is declared twice" in text
    assert "duplicate edge 'start' -> 'takes_int'" in text
    assert "42 is not an executor" in text


def test_a_factory_that_fails_is_reported_with_the_rest():
    def broken() -> Executor:
        raise RuntimeError("no database")

    with pytest.raises(WorkflowValidationError, match=r"factory .*broken raised RuntimeError"):
        WorkflowBuilder(start=start).add_edge(start, broken).build()


def test_switch_cases_are_type_checked():
    builder = WorkflowBuilder(start=start).add_switch(
        start, [Case(lambda m: m > 0, takes_int), Default(takes_str)]
    )
    with pytest.raises(WorkflowValidationError, match="'takes_str' accepts str"):
        builder.build()


def test_unparameterized_context_trusts_the_author():
    class Loose(Executor):
        @handler
        async def on(self, msg: int, ctx: WorkflowContext) -> None:
            ctx.send_message(str(msg))

    WorkflowBuilder(start=Loose).add_edge("Loose", takes_str).build()


async def test_an_id_in_angle_brackets_is_an_id_like_any_other():
    # Such ids once stood only for refs already reported, so an unknown one went
    # unreported and the run died on a KeyError.
    @executor(id="<intake>")
    async def intake(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.send_message(n + 1)

    @executor(id="finish")
    async def finish(n: int, ctx: WorkflowContext[int]) -> None:
        ctx.yield_output(n)

    with pytest.raises(WorkflowValidationError) as caught:
        WorkflowBuilder(start="<nothing>").add_edge(intake, finish).add_edge(
            "<gone>", finish
        ).build()
    assert "start: unknown executor id '<nothing>'" in str(caught.value)
    assert "unknown executor id '<gone>'" in str(caught.value)
    workflow = WorkflowBuilder(start=intake).add_edge(intake, finish).build()
    assert (await workflow.run(1)).outputs == [2]
