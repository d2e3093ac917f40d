"""Handler dispatch: by message type, unions, most specific first, sync handlers."""

import asyncio
import threading
from dataclasses import dataclass

import pytest

from treadle import Executor, WorkflowBuilder, WorkflowContext, executor, handler


@dataclass(frozen=True)
class Animal:
    name: str


@dataclass(frozen=True)
class Dog(Animal):
    pass


@dataclass(frozen=True)
class Puppy(Dog):
    pass


class Classifier(Executor):
    @handler
    async def on_animal(self, msg: Animal, ctx: WorkflowContext) -> None:
        ctx.yield_output(("animal", msg.name))

    @handler
    async def on_dog(self, msg: Dog, ctx: WorkflowContext) -> None:
        ctx.yield_output(("dog", msg.name))

    @handler
    async def on_number(self, msg: int | float, ctx: WorkflowContext) -> None:  # noqa: PYI041
        ctx.yield_output(("number", msg))


async def test_most_specific_handler_wins_by_mro():
    wf = WorkflowBuilder(start=Classifier).build()
    assert (await wf.run(Animal("cat"))).outputs == [("animal", "cat")]
    assert (await wf.run(Dog("rex"))).outputs == [("dog", "rex")]
    # Puppy has no handler of its own: its nearest base with one is Dog.
    assert (await wf.run(Puppy("bit"))).outputs == [("dog", "bit")]


async def test_union_annotation_registers_every_member():
    wf = WorkflowBuilder(start=Classifier).build()
    assert (await wf.run(3)).outputs == [("number", 3)]
    assert (await wf.run(2.5)).outputs == [("number", 2.5)]


async def test_input_without_a_handler_is_refused_naming_the_executor():
    wf = WorkflowBuilder(start=Classifier).build()
    with pytest.raises(TypeError, match=r"'Classifier' has no handler for the input str"):
        await wf.run("text")


def test_handler_without_annotation_is_a_clear_error():
    class Bad(Executor):
        @handler
        async def on(self, msg, ctx: WorkflowContext) -> None:  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(TypeError, match="needs a type annotation on 'msg'"):
        Bad().handler_specs()


def test_executor_options_are_checked():
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        Executor("x", concurrency=0)
    with pytest.raises(ValueError, match="sync_handlers must be"):
        Executor("x", sync_handlers="elsewhere")  # type: ignore[arg-type]


async def test_function_executor_defaults_id_to_function_name_and_accepts_override():
    @executor
    async def shout(text: str, ctx: WorkflowContext[str]) -> None:
        ctx.yield_output(text.upper())

    @executor(id="echo", accepts=object)
    async def anything(msg, ctx):  # type: ignore[no-untyped-def]
        ctx.yield_output(msg)

    assert shout.id == "shout"
    assert anything.id == "echo"
    assert (await WorkflowBuilder(start=shout).build().run("a")).outputs == ["A"]
    assert (await WorkflowBuilder(start=anything).build().run([1])).outputs == [[1]]


async def test_sync_handler_runs_off_the_loop_and_async_siblings_progress_while_it_blocks():
    loop_thread = threading.get_ident()
    unblocked = threading.Event()
    seen: dict[str, object] = {}

    @executor
    async def split(msg: str, ctx: WorkflowContext[str]) -> None:
        ctx.send_message(msg)

    @executor
    def blocking(msg: str, ctx: WorkflowContext) -> None:
        seen["thread"] = threading.get_ident()
        # Blocks until the async sibling of the same superstep has run: if this
        # handler held the event loop, the sibling could never run.
        seen["released"] = unblocked.wait(timeout=10)
        ctx.yield_output("blocking done")

    @executor
    async def lively(msg: str, ctx: WorkflowContext) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        unblocked.set()
        ctx.yield_output("lively done")

    wf = WorkflowBuilder(start=split).add_fan_out(split, [blocking, lively]).build()
    result = await wf.run("go")
    assert seen["thread"] != loop_thread
    assert seen["released"] is True
    assert result.outputs == ["blocking done", "lively done"]  # rank order, not timing


async def test_sync_handlers_can_be_pinned_to_the_loop_thread():
    loop_thread = threading.get_ident()
    seen = []

    class Pinned(Executor):
        def __init__(self) -> None:
            super().__init__("pinned", sync_handlers="loop")

        @handler
        def on(self, msg: int, ctx: WorkflowContext) -> None:
            seen.append(threading.get_ident())
            ctx.yield_output(msg)

    result = await WorkflowBuilder(start=Pinned).build().run(1)
    assert seen == [loop_thread]
    assert result.outputs == [1]


async def test_events_raised_from_a_worker_thread_reach_the_stream():
    @executor
    def worker(msg: int, ctx: WorkflowContext) -> None:
        ctx.report_progress(1, 2, "half")
        ctx.add_event({"from": "thread"})

    wf = WorkflowBuilder(start=worker).build()
    async with wf.stream(0) as events:
        kinds = [type(e).__name__ for e in [e async for e in events]]
    assert "ProgressEvent" in kinds
    assert "CustomEvent" in kinds


async def test_ints_reach_float_handlers_but_an_exact_handler_wins():
    @executor
    async def halve(x: float, ctx: WorkflowContext) -> None:
        ctx.yield_output(x / 2)

    assert (await WorkflowBuilder(start=halve).build().run(3)).outputs == [1.5]

    class Both(Executor):
        @handler
        async def on_float(self, x: float, ctx: WorkflowContext) -> None:
            ctx.yield_output("float")

        @handler
        async def on_int(self, x: int, ctx: WorkflowContext) -> None:
            ctx.yield_output("int")

    wf = WorkflowBuilder(start=Both).build()
    assert (await wf.run(1)).outputs == ["int"]
    assert (await wf.run(1.0)).outputs == ["float"]
