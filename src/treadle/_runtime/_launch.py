"""Opening a run: fresh from an input, or continued from a checkpoint.

Every entry point (``run``, ``stream``, ``resume``, their sync adapters)
opens runs through :func:`open_run`, given one frozen :class:`Launch`, so
claiming executor instances, wiring the checkpointer and creating the run in
the store happen in one place and in one order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._durable._checkpointer import Checkpointer
from treadle._durable._graph_description import encode_description
from treadle._runtime._loop import RunLoop
from treadle._runtime._result import RunStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from treadle._durable._checkpoint import RestoredRun
    from treadle._durable._store import Store
    from treadle._runtime._barrier import EventSink
    from treadle._runtime._workflow import Workflow

_NO_INPUT: Any = object()


@dataclass(frozen=True, slots=True)
class Launch:
    """What one run is opened with.

    Attributes:
        message: The input (ignored when ``restored`` is given).
        restored: A decoded checkpoint to continue from.
        run_id: The run's id; a fresh UUID for new runs when omitted.
        state: Initial shared state over the declared defaults.
        overrides: Per-run options (``max_supersteps``, ...), ``None`` = default.
        store: Where to checkpoint (``None``: the workflow's store, if any).
        keep_last: Checkpoints kept per run (``None``: the store's setting).
        answers: Request id → answer, applied to a restored run before it
            steps (``respond``).
        inputs: (message, target executor or None) pairs delivered to
            invocations waiting for session input (``send_message``).
    """

    message: Any = _NO_INPUT
    restored: RestoredRun | None = None
    run_id: str | None = None
    state: Mapping[str, Any] | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    store: Store | None = None
    keep_last: int | None = None
    answers: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[tuple[Any, str | None], ...] = ()


async def open_run(
    workflow: Workflow, launch: Launch, sink: EventSink | None
) -> tuple[RunLoop, Callable[[], None]]:
    """A loop ready to step, and the callable that releases its executors."""
    options = workflow.options(launch.overrides)
    restored = launch.restored
    if restored is None and launch.message is _NO_INPUT:
        msg = "a new run needs an input message"
        raise TypeError(msg)
    run_id = launch.run_id or (restored.run_id if restored else None) or uuid.uuid4().hex
    pool, release = workflow.claim(run_id)
    try:
        store = launch.store if launch.store is not None else workflow.store
        checkpointer = None
        if store is not None:
            checkpointer = Checkpointer(
                store,
                workflow.codec,
                workflow.fingerprint,
                parent_checkpoint_id=restored.checkpoint_id if restored else None,
                keep_last=launch.keep_last,
                durability=options.durability,
            )
        loop = RunLoop(workflow, run_id, options, sink, pool, launch.state, checkpointer)
        if restored is not None:
            loop.restore(restored)
            for request_id, answer in launch.answers.items():
                loop.answer(request_id, answer)
            for message, target in launch.inputs:
                loop.send_input(message, target)
            if checkpointer is not None and loop.status is RunStatus.RUNNING:
                await checkpointer.record_status(run_id, loop.status.value)
        else:
            loop.start(launch.message)
            if checkpointer is not None:
                await checkpointer.create(
                    workflow.name,
                    encode_description(workflow.description),
                    loop.barrier_state(),
                    pool.snapshots(),
                )
    except BaseException:
        release()
        raise
    return loop, release
