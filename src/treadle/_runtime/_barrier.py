"""What a run is opened with, and what each of its barriers commits.

``RunOptions`` fixes a run's limits and scheduling when it starts;
``BarrierState`` is the immutable value a barrier hands to durability (the
content of a checkpoint); ``EventSink`` and ``Checkpointing`` are the two
small ports the loop talks through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from treadle._runtime._clock import Clock, SystemClock
from treadle._runtime._waits import WaitBook

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from treadle._durable._checkpointer import Durability
    from treadle._runtime._delivery import Envelope, FanInBuffer
    from treadle._runtime._events import WorkflowEvent
    from treadle._runtime._policies import RetryPolicy
    from treadle._runtime._result import RunStatus
    from treadle._runtime._spawn import SpawnRecord
    from treadle._runtime._tracing import Tracing


class EventSink(Protocol):
    """Where a run's events go.

    ``live`` sinks get events the moment they are raised, from any thread's
    point of view via the loop; other sinks get each superstep's events at
    its barrier, in canonical order. ``backpressure``, when set, is awaited
    before each invocation and barrier so a slow consumer slows the run.
    """

    live: bool
    backpressure: Callable[[], Awaitable[None]] | None

    def publish(self, event: WorkflowEvent) -> None:
        """Take one event (and number it)."""


class Checkpointing(Protocol):
    """What the loop needs from durability: save barriers, record statuses."""

    last_checkpoint_id: str | None

    async def save(self, barrier: BarrierState, snapshots: Mapping[str, Any]) -> str:
        """Persist one committed barrier; return its checkpoint id."""
        ...

    async def record_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Persist a status that commits no superstep."""
        ...

    async def flush(self) -> None:
        """Wait until every barrier handed to :meth:`save` is durable."""
        ...


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Per-run limits and scheduling, fixed when the run starts."""

    max_supersteps: int = 1000
    max_node_iterations: int | None = None
    max_concurrency: int | None = None
    deterministic: bool = False
    retry: RetryPolicy | None = None
    clock: Clock = field(default_factory=SystemClock)
    timeout: float | None = None
    sleep_through_timers: bool = False
    durability: Durability = "sync"
    tracing: Tracing[Any] | None = None

    def __post_init__(self) -> None:
        if self.max_supersteps < 1:
            msg = f"max_supersteps must be at least 1, got {self.max_supersteps}"
            raise ValueError(msg)
        if self.max_node_iterations is not None and self.max_node_iterations < 1:
            msg = f"max_node_iterations must be at least 1, got {self.max_node_iterations}"
            raise ValueError(msg)
        if self.max_concurrency is not None and self.max_concurrency < 1:
            msg = f"max_concurrency must be at least 1, got {self.max_concurrency}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class BarrierState:
    """Everything one barrier committed: the content of a checkpoint.

    All fields are values the loop never mutates after the barrier, so this
    object may be kept, compared or persisted while the run goes on.
    """

    run_id: str
    superstep: int
    status: RunStatus
    pending: Mapping[str, tuple[Envelope, ...]]
    fan_in_buffers: tuple[FanInBuffer, ...]
    state: Mapping[str, Any]
    iterations: Mapping[str, int]
    outputs: tuple[Any, ...]
    waits: WaitBook = field(default_factory=WaitBook)
    deadline_at: float | None = None
    spawned: tuple[SpawnRecord, ...] = ()

    @property
    def wake_at(self) -> float | None:
        """When this barrier's earliest durable timer falls due."""
        return self.waits.next_wake_at()
