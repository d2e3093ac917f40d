"""Running one attempt of an invocation on an executor pool, from the run's side.

The attempt is packed into a :class:`RemoteInvocation` (``_engine/_remote_job.py``):
the handler as code, the message and the state it reads as bytes of the
workflow's serializer. What comes back, the same way, is replayed on the
attempt's own :class:`WorkflowContext` in the order the handler did it:
its sends and handoffs are routed here (edge conditions and selectors run
in the run's process), its writes and outputs buffered here. From then on
the attempt is indistinguishable from a local one: the barrier commits it
with its superstep, in stamp order, or not at all.

Events the handler raises on the worker arrive while it runs, when the
pool can deliver them early, and all of them arrive with its result;
each is numbered, so each is published once, in the order raised.

Failures map to what a local handler's would: the handler's exception is
a :class:`RemoteHandlerError` (named, never unpickled), a lost worker a
``WorkerLostError`` from the pool; both fail the attempt, so retries,
timeouts and the barrier treat them as any other.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from treadle._engine._remote_job import (
    CUSTOM,
    HANDOFF,
    PROGRESS,
    SEND,
    InvocationFacts,
    RemoteInvocation,
    portable,
)
from treadle._engine._state import DELETE, MISSING, SET, SharedState
from treadle._exceptions import RemoteHandlerError, SerializationError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._context import WorkflowContext
    from treadle._engine._invocation import Invocation
    from treadle._graph._executor import HandlerSpec
    from treadle._graph._policies import RetryPolicy
    from treadle._graph._remote import RemotePool
    from treadle._values._serialization import Serializer


async def call_on_pool(
    invocation: Invocation, spec: HandlerSpec, ctx: WorkflowContext[object], pool: RemotePool
) -> None:
    """Run one attempt of ``invocation`` on ``pool``; what it did lands in ``ctx``.

    Raises:
        RemoteHandlerError: the handler raised on the worker.
        SerializationError: a value it takes or makes cannot cross.
        PoolError: the pool could not run it (``WorkerLostError``: its worker died).
    """
    serializer = invocation.env.workflow.serializer
    job = _pack(invocation, spec, ctx, serializer)
    relay = _EventRelay(ctx, serializer)
    data = await pool.run(job, relay.receive)
    result = serializer.loads(data)
    relay.finish(result["events"])
    failure = result["failure"]
    if failure is not None:
        if failure["serialization"]:
            raise SerializationError(failure["message"])
        raise RemoteHandlerError(
            ctx.executor_id, failure["types"], failure["message"], failure["traceback"]
        )
    _replay(ctx, result)


def _pack(
    invocation: Invocation,
    spec: HandlerSpec,
    ctx: WorkflowContext[object],
    serializer: Serializer,
) -> RemoteInvocation:
    """The attempt as a job: code by reference or value, every value as bytes."""
    run = invocation.env
    envelope = invocation.envelope
    handoff = envelope.handoff
    facts = InvocationFacts(
        run_id=run.run_id,
        executor_id=ctx.executor_id,
        superstep=invocation.superstep,
        rank=invocation.rank,
        position=invocation.position,
        idempotency_key=ctx.idempotency_key,
        handoff=(handoff.source, handoff.reason) if handoff is not None else None,
        now=run.clock.now(),
        listening=run.listening,
    )
    specs = run.state_specs
    return RemoteInvocation(
        key=f"{ctx.executor_id}-{os.urandom(8).hex()}",
        executor_id=ctx.executor_id,
        fn=spec.fn,
        serializer=portable(serializer),
        message=serializer.dumps(envelope.payload),
        view=serializer.dumps(state_view(invocation)),
        reducers={key: s.reducer for key, s in specs.items() if s.reducer is not None},
        facts=facts,
    )


def state_view(invocation: Invocation) -> dict[str, Any]:
    """The state as the invocation would read it here, every key resolved.

    The last barrier's values (declared defaults included) plus the writes
    of its executor's earlier invocations this superstep, their update
    functions applied here: reads on the worker then see what reads in the
    run's process would, and no function has to travel.
    """
    env, committed = invocation.env, invocation.point.state
    earlier = invocation.earlier
    reads = SharedState(committed, env.state_specs, earlier)
    keys = dict.fromkeys([*committed, *env.state_specs, *(op[1] for ops in earlier for op in ops)])
    view = {}
    for key in keys:
        value = reads.get(key, MISSING)
        if value is not MISSING:
            view[key] = value
    return view


def _replay(ctx: WorkflowContext[object], result: dict[str, Any]) -> None:
    """Do on the attempt's own context what the handler did on the worker, in order."""
    for send in result["sends"]:
        if send[0] == SEND:
            ctx.send_message(send[1], send[2])
        elif send[0] == HANDOFF:
            ctx.handoff(send[1], send[2], send[3])
    for value in result["outputs"]:
        ctx.yield_output(value)
    if result["writes"]:
        state = ctx.state
        for kind, key, value in result["writes"]:
            if kind == SET:
                state.set(key, value)
            elif kind == DELETE:
                state.delete(key)
    for due, message, target in result["scheduled"]:
        ctx.schedule_message(message, at=due, target=target)


class _EventRelay:
    """Publishes a remote attempt's events on its context, each once, in the order raised.

    Event ``n`` may arrive early (while the handler runs), late (with the
    result) or both; only the next one in order is published, so early
    ones that overtake each other wait for those before them.
    """

    __slots__ = ("_ctx", "_early", "_next", "_serializer")

    def __init__(self, ctx: WorkflowContext[object], serializer: Serializer) -> None:
        self._ctx = ctx
        self._serializer = serializer
        self._next = 0
        self._early: dict[int, list[Any]] = {}

    def receive(self, data: bytes) -> None:
        """An event sent while the handler runs (on the run's loop)."""
        try:
            number, *event = self._serializer.loads(data)
        except SerializationError:  # the result brings it again, and fails loudly then
            return
        if number < self._next:
            return
        self._early[number] = event
        while self._next in self._early:
            self._publish(self._early.pop(self._next))
            self._next += 1

    def finish(self, events: Sequence[bytes]) -> None:
        """Every event of the attempt, with its result: publish those not yet published."""
        for data in events[self._next :]:
            _, *event = self._serializer.loads(data)
            self._publish(event)
        self._next = len(events)
        self._early.clear()

    def _publish(self, event: list[Any]) -> None:
        kind, *fields = event
        if kind == PROGRESS:
            self._ctx.report_progress(*fields)
        elif kind == CUSTOM:
            self._ctx.add_event(*fields)


def retries_remote(policy: RetryPolicy, error: Exception, attempt: int) -> bool:
    """Whether ``policy`` retries ``error`` by the names of a handler's remote exception.

    A policy whose ``retry_on`` names classes retries a remote exception of
    one of them (or of a subclass): matched by qualified name, since the
    exception itself never crosses. A predicate sees the
    :class:`RemoteHandlerError`.
    """
    if not isinstance(error, RemoteHandlerError) or attempt >= policy.max_attempts:
        return False
    retry_on = policy.retry_on
    if not isinstance(retry_on, tuple):
        return False
    names = error.remote_types
    return any(f"{cls.__module__}.{cls.__qualname__}" in names for cls in retry_on)
