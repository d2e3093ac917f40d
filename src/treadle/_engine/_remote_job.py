"""What runs on a pool's worker: one attempt of an invocation, and the context it gets.

A :class:`RemoteInvocation` is the job the engine hands an executor pool.
It travels as code (the handler function, the classes the workflow's
serializer allows, the state keys' reducers), which the pool's transport
pickles the way it pickles any task; every *value* in it travels as bytes
of the workflow's serializer: the message, and a view of the state as the
invocation would read it in the run's own process (the last barrier plus
the executor's earlier writes of this superstep).

On the worker the handler gets a :class:`RemoteContext`, a stand-in for
``WorkflowContext`` that records what the handler does instead of doing
it. What it recorded goes back as serializer bytes too, and the engine
replays it on the attempt's real context (``_engine/_remote.py``), so
routing, stamps and the barrier are exactly those of a local handler.

A handler's exception goes back as text (its classes' names, message and
traceback), never as a pickle; so do the errors of encoding what it did.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from treadle._engine._context_waits import _epoch, _seconds
from treadle._engine._delivery import HandoffContext
from treadle._engine._state import Op, Reducer, SharedState, StateKey
from treadle._exceptions import SerializationError
from treadle._graph._executor import Executor
from treadle._values._serialization import JsonSerializer

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Callable, Mapping, Sequence

    from treadle._values._registry import TypeRegistry
    from treadle._values._serialization import Serializer

SEND: Final = "send"
HANDOFF: Final = "handoff"
PROGRESS: Final = "progress"
CUSTOM: Final = "custom"


@dataclass(frozen=True, slots=True)
class InvocationFacts:
    """What a handler may ask its context about the invocation, fixed when it is sent.

    Attributes:
        run_id: The run.
        executor_id: The executor.
        superstep: The superstep it runs in.
        rank: The executor's rank.
        position: The message's position in the executor's inbox.
        idempotency_key: The invocation's key (the same on every attempt).
        handoff: (source, reason) when the message is a handoff.
        now: The run's clock when the attempt was sent.
        listening: Whether anyone hears the run's events (else none are sent).
    """

    run_id: str
    executor_id: str
    superstep: int
    rank: int
    position: int
    idempotency_key: str
    handoff: tuple[str, str | None] | None
    now: float
    listening: bool


class PortableJson:
    """A ``JsonSerializer`` as it travels: its registry, rebuilt into one on the worker.

    Its encoder and decoder are closures, five times the size of the
    registry they are made from; every job carries one.
    """

    __slots__ = ("registry",)

    def __init__(self, registry: TypeRegistry) -> None:
        self.registry = registry


def portable(serializer: Serializer) -> Serializer | PortableJson:
    """``serializer`` in the form that travels cheapest."""
    if type(serializer) is JsonSerializer:
        return PortableJson(serializer.registry)
    return serializer


@dataclass(frozen=True, slots=True)
class RemoteInvocation:
    """One attempt of one invocation, packed for a pool (a ``RemoteJob``).

    Attributes:
        key: Unique per attempt.
        executor_id: The executor whose handler it runs.
        fn: The handler function, ``(message, ctx)``.
        serializer: The workflow's serializer (or its portable form).
        message: The message, as serializer bytes.
        view: The state the invocation reads, as serializer bytes.
        reducers: The reducers of the state keys that declare one, so reads
            after a ``set`` see what the barrier will make of it.
        facts: What the context says about the invocation.
    """

    key: str
    executor_id: str
    fn: Callable[..., Any]
    serializer: Serializer | PortableJson
    message: bytes
    view: bytes
    reducers: Mapping[str, Reducer]
    facts: InvocationFacts

    def __call__(self, emit: Callable[[bytes], None]) -> bytes:
        """Run the handler here; return what it did, or how it failed, as bytes."""
        serializer = self.serializer
        if isinstance(serializer, PortableJson):
            serializer = JsonSerializer(serializer.registry)
        specs = {key: StateKey(reducer=reducer) for key, reducer in self.reducers.items()}
        ctx = RemoteContext(self.facts, serializer, specs, self.view, emit)
        try:
            message = serializer.loads(self.message)
            self.fn(message, ctx)
            return serializer.dumps(ctx.effects())
        except Exception as error:  # noqa: BLE001 - handed back as text, like every failure
            return _failure(serializer, ctx, error)


def _failure(serializer: Serializer, ctx: RemoteContext, error: Exception) -> bytes:
    """How the attempt failed, as bytes: names and text, never the exception object."""
    failure = {
        "types": [f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__[:-1]],
        "message": str(error),
        "traceback": "".join(traceback.format_exception(error)),
        "serialization": isinstance(error, SerializationError),
    }
    try:
        return serializer.dumps({"failure": failure, "events": ctx.events})
    except SerializationError:  # the events held what broke: the failure alone is text
        return serializer.dumps({"failure": failure, "events": []})


class _RemoteState(SharedState):
    """Shared state on a worker: reads of the view it was sent, buffered writes."""

    __slots__ = ()

    def update(self, key: str, fn: Callable[[Any], Any]) -> None:  # noqa: ARG002 - refused
        """Refused on a pool: the function would have to travel back as a pickle.

        Raises:
            TypeError: always; declare the key with a reducer and ``set`` it.
        """
        msg = (
            f"state.update({key!r}, fn) is not available to a handler on an executor pool: "
            f"fn would have to travel back as a pickle. Declare the key with "
            f"builder.add_state({key!r}, reducer=...) and set it instead"
        )
        raise TypeError(msg)


class RemoteContext:
    """What a handler on a pool's worker gets as ``ctx``: it records, the run replays.

    It offers what a plain ``def`` handler of ``WorkflowContext`` may use
    (the durable waits are ``async`` and need the run itself): sends,
    handoffs, outputs, scheduled messages, state, progress and custom
    events, and the invocation's identity. Events go back at once through
    ``emit`` and again with the result, numbered so none is published twice.
    """

    def __init__(
        self,
        facts: InvocationFacts,
        serializer: Serializer,
        specs: Mapping[str, StateKey],
        view: bytes,
        emit: Callable[[bytes], None],
    ) -> None:
        self._facts = facts
        self._serializer = serializer
        self._specs = specs
        self._view = view  # decoded on first use: most handlers never read state
        self._emit = emit
        self._state: SharedState | None = None
        self.executor_id = facts.executor_id
        self.sends: list[list[Any]] = []
        self.outputs: list[Any] = []
        self.scheduled: list[list[Any]] = []
        self.events: list[bytes] = []

    # -- identity ------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The id of the run this invocation belongs to."""
        return self._facts.run_id

    @property
    def superstep(self) -> int:
        """The superstep this invocation runs in."""
        return self._facts.superstep

    @property
    def rank(self) -> int:
        """The executor's rank: its position in the workflow's definition."""
        return self._facts.rank

    @property
    def position(self) -> int:
        """The message's position in the executor's inbox for this superstep."""
        return self._facts.position

    @property
    def idempotency_key(self) -> str:
        """Stable across retries and re-executions of this same invocation."""
        return self._facts.idempotency_key

    @property
    def handoff_context(self) -> HandoffContext | None:
        """Who handed control to this executor, and why, if the message is a handoff."""
        handoff = self._facts.handoff
        return HandoffContext(*handoff) if handoff is not None else None

    @property
    def replaying(self) -> bool:
        """Never: a handler on a pool has no durable waits to re-execute after."""
        return False

    def now(self) -> float:
        """The run's clock when the attempt was sent.

        Fixed, rather than moved on by this worker's own clock, so a run on
        a ``FakeClock`` stays exact wherever its handlers run.
        """
        return self._facts.now

    # -- what it does ----------------------------------------------------------------
    def send_message(self, message: Any, target: str | Executor | None = None) -> None:
        """Send ``message`` along this executor's edges, routed when the run commits it."""
        target_id = target.id if isinstance(target, Executor) else target
        self.sends.append([SEND, message, target_id])

    def handoff(self, target: str | Executor, payload: Any, reason: str | None = None) -> None:
        """Hand control to ``target``, which receives ``payload`` next superstep."""
        target_id = target.id if isinstance(target, Executor) else target
        self.sends.append([HANDOFF, target_id, payload, reason])

    def yield_output(self, value: Any) -> None:
        """Add ``value`` to the run's outputs when this superstep commits."""
        self.outputs.append(value)

    def schedule_message(
        self,
        message: Any,
        *,
        after: dt.timedelta | float | None = None,
        at: dt.datetime | float | None = None,
        target: str | Executor | None = None,
    ) -> None:
        """Send ``message`` later: due ``after`` from :meth:`now`, or ``at``."""
        if after is not None and at is None:
            due = self.now() + _seconds("after", after, past=True)
        elif at is not None and after is None:
            due = _epoch(at)  # the run's rule for a datetime without a zone, too
        else:
            msg = "schedule_message takes exactly one of after= or at="
            raise TypeError(msg)
        target_id = target.id if isinstance(target, Executor) else target
        self.scheduled.append([due, message, target_id])

    @property
    def state(self) -> SharedState:
        """Shared state: the view it was sent plus this invocation's own writes."""
        if self._state is None:
            self._state = _RemoteState(self._serializer.loads(self._view), self._specs)
        return self._state

    # -- events ---------------------------------------------------------------------
    def add_event(self, data: Any) -> None:
        """Publish ``data`` to whoever streams the run, as a ``CustomEvent``.

        Raises:
            SerializationError: ``data`` cannot cross to the run's process.
        """
        self._raise(CUSTOM, data)

    def report_progress(
        self, current: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Publish a ``ProgressEvent`` (``current`` out of ``total``)."""
        self._raise(PROGRESS, current, total, message)

    def _raise(self, kind: str, *fields: Any) -> None:
        if not self._facts.listening:
            return
        data = self._serializer.dumps([len(self.events), kind, *fields])
        self.events.append(data)
        with contextlib.suppress(Exception):  # live delivery is a courtesy: the result has it
            self._emit(data)

    # -- what needs the run itself ------------------------------------------------------
    def spawn(self, *_: Any, **__: Any) -> str:
        """Not available on a pool: background work belongs to the run's process."""
        raise _unavailable("spawn")

    def request(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool: durable waits suspend the run's own invocation."""
        raise _unavailable("request")

    def wait_for_input(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool (see :meth:`request`)."""
        raise _unavailable("wait_for_input")

    def sleep(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool (see :meth:`request`)."""
        raise _unavailable("sleep")

    def sleep_until(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool (see :meth:`request`)."""
        raise _unavailable("sleep_until")

    def poll_until_complete(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool (see :meth:`request`)."""
        raise _unavailable("poll_until_complete")

    def step(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool: its journal lives with the run."""
        raise _unavailable("step")

    def cancel_scheduled(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool: what is scheduled lives with the run."""
        raise _unavailable("cancel_scheduled")

    def continue_later(self, *_: Any, **__: Any) -> Any:
        """Not available on a pool (see :meth:`request`)."""
        raise _unavailable("continue_later")

    # -- the result -------------------------------------------------------------------
    def effects(self) -> dict[str, Any]:
        """Everything the handler did, as plain data for the serializer."""
        ops: Sequence[Op] = self._state.ops if self._state is not None else ()
        return {
            "sends": self.sends,
            "outputs": self.outputs,
            "writes": [[kind, key, value] for kind, key, value in ops],
            "scheduled": self.scheduled,
            "events": self.events,
            "failure": None,
        }


def _unavailable(name: str) -> TypeError:
    return TypeError(
        f"ctx.{name} is not available to a handler on an executor pool: it needs the run's "
        f"own process; run this executor locally (no pool) to use it"
    )
