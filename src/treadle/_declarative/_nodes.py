"""The executors a definition's nodes become, when they need more than the step itself.

Most nodes are the executor, agent or sub-workflow they name, unchanged. A
node is wrapped in a :class:`DeclaredNode` only when it needs one of:

* an ``input`` template, resolved just before the node runs and handed to
  the step in place of the message it received;
* the run's ``inputs`` (the start node of a definition that declares
  inputs records them in state, checked against their declared types);
* conditions on edges leaving it: they run while the node sends, reading
  ``state`` and ``inputs`` through :data:`_SCOPE`, and an ``async`` step's
  sends are made after it returns, in a worker thread, so a costly
  condition never holds the event loop (and with it a server's every
  request) while it is evaluated;
* its output recorded for ``{{nodes.<id>.output}}``;
* a ``retry`` or ``timeout`` of its own, or ``approvers`` and ``four_eyes``
  for the requests it asks (set on the wrapper, never on an executor object
  that other workflows may share).

The built-in steps are :class:`OutputStep` and :class:`TemplateStep`.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from treadle._declarative._conditions import ExpressionError, plain
from treadle._declarative._templates import resolve
from treadle._graph._executor import Executor, HandlerSpec, handler

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from treadle._declarative._templates import Compiled
    from treadle._graph._policies import RetryPolicy

INPUTS_KEY = "treadle.inputs"
"""The state key holding a run's declared inputs (only when the definition declares some)."""

NODES_KEY = "treadle.nodes"
"""The state key holding the last output of nodes that ``{{nodes.<id>.output}}`` names."""

_INPUT_TYPES: Final[Mapping[str, type | tuple[type, ...]]] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "bool": bool,
    "list": list,
    "dict": dict,
    "any": object,
}


def merge_nodes(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The reducer of :data:`NODES_KEY`: several nodes record in one superstep."""
    return {**(current or {}), **new}


@dataclass(frozen=True, slots=True)
class Wrapping:
    """What a node's wrapper adds to its step (see the module's docstring)."""

    input: Compiled = None
    has_input: bool = False
    input_source: Any = None  # as written, for export
    inputs: Mapping[str, str] | None = None  # declared input types, on the start node
    record_output: bool = False
    state_keys: tuple[str, ...] = ()
    retry: RetryPolicy | None = None
    timeout: float | None = None
    conditioned: bool = False  # conditions on its edges: sends evaluated off the loop
    approvers: tuple[str, ...] = ()  # who may answer its requests (ctx.request's default)
    four_eyes: bool | None = None  # whether the run's starter may not answer them
    outcome: Compiled = None  # the run's outcome once the node has run (may be a template)
    outcome_summary: Compiled = None
    outcome_source: tuple[str | None, str | None] = (None, None)  # as written, for export


class _Scope:
    """The data of the invocation running now, for templates and conditions."""

    __slots__ = ("ctx", "message", "state_keys")

    def __init__(self, ctx: Any, message: Any, state_keys: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.message = message
        self.state_keys = state_keys

    def root(self, name: str) -> Any:
        if name == "message":
            return self.message
        if name == "inputs":
            return self.ctx.state.get(INPUTS_KEY) or {}
        if name == "nodes":
            recorded = self.ctx.state.get(NODES_KEY) or {}
            return {node: {"output": value} for node, value in recorded.items()}
        return {key: self.ctx.state.get(key) for key in self.state_keys}


_SCOPE: ContextVar[_Scope | None] = ContextVar("treadle_declarative_scope", default=None)


def condition_scope(names: frozenset[str]) -> dict[str, Any]:
    """``state`` and ``inputs`` for a condition, from the node sending the message.

    Raises:
        ExpressionError: No declared node is sending (the condition reads
            state or inputs on an edge whose source is not wrapped).
    """
    wanted = names & {"state", "inputs"}
    if not wanted:
        return {}
    scope = _SCOPE.get()
    if scope is None:
        msg = "a condition reading state or inputs ran outside a declared node"
        raise ExpressionError(msg)
    return {name: plain(scope.root(name)) for name in wanted}


class _Recorder:
    """The invocation's context, noting the last thing the node sent or output.

    With ``defer``, sends are kept (in order) for :func:`_send_off_loop`
    rather than routed at once, since routing evaluates the edges' conditions.
    """

    def __init__(self, ctx: Any, *, defer: bool = False) -> None:
        self._ctx = ctx
        self.last: Any = None
        self.sent = False
        self.defer = defer
        self.pending: list[tuple[Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def send_message(self, message: Any, target: Any = None) -> None:
        self.last, self.sent = message, True
        if self.defer:
            self.pending.append((message, target))
        else:
            self._ctx.send_message(message, target)

    def yield_output(self, value: Any) -> None:
        self.last, self.sent = value, True
        self._ctx.yield_output(value)


async def _send_off_loop(recorder: _Recorder | None, ctx: Any) -> None:
    """Route what an ``async`` step sent, in a worker thread: its conditions run there.

    The context is told it is used from a thread (as for a plain ``def``
    handler), so events raised while routing reach the loop safely; if the
    invocation is stopped meanwhile, whatever the thread does later is dropped.
    """
    if recorder is None or not recorder.pending:
        return
    pending, recorder.pending = recorder.pending, []

    def send_all() -> None:
        for message, target in pending:
            ctx.send_message(message, target)

    hand_to_thread = getattr(ctx, "hand_to_thread", None)
    if hand_to_thread is None:  # not the engine's context: route here
        send_all()
        return
    hand_to_thread()
    try:
        await asyncio.to_thread(send_all)
    except asyncio.CancelledError:
        ctx.abandon()
        raise


class DeclaredNode(Executor):
    """A node's step, with what its definition adds around each invocation."""

    def __init__(self, inner: Executor, node_id: str, wrapping: Wrapping) -> None:
        super().__init__(
            node_id,
            concurrency=inner.concurrency,
            shareable=inner.shareable,
            sync_handlers=inner.sync_handlers,
            retry=wrapping.retry or inner.retry,
            timeout=wrapping.timeout or inner.timeout,
        )
        self.inner = inner
        self.wrapping = wrapping
        self.approvers = wrapping.approvers or inner.approvers
        self.four_eyes = inner.four_eyes if wrapping.four_eyes is None else wrapping.four_eyes
        self._templated: tuple[HandlerSpec, ...] | None = None
        if wrapping.has_input:
            specs = inner.handler_specs()
            self._templated = (
                HandlerSpec(
                    name="input",
                    fn=self._with_input,
                    accepts=(object,),
                    sends=inner.sent_types(),
                    is_async=True,
                    bound=False,
                    annotations=tuple(a for s in specs for a in s.annotations),
                ),
            )

    def __getattr__(self, name: str) -> Any:
        """What the step offers beyond an executor (a sub-workflow's ``subgraph``)."""
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def input_problems(self, message: Any) -> list[str]:
        """The definition's declared ``inputs`` that ``message`` misses or gets wrong."""
        if self.wrapping.inputs is None:
            return []
        try:
            checked_inputs(message, self.wrapping.inputs)
        except TypeError as error:
            return [str(error)]
        return []

    def handler_specs(self) -> tuple[HandlerSpec, ...]:
        """The step's handlers, or one taking anything when an ``input`` replaces the message."""
        return self._templated or self.inner.handler_specs()

    def find_handler(self, message_type: type) -> HandlerSpec | None:
        """The step's handler for the class (any class, with an ``input``)."""
        if self._templated is not None:
            return self._templated[0]
        return self.inner.find_handler(message_type)

    def snapshot(self) -> Any:
        """The step's own snapshot."""
        return self.inner.snapshot()

    def restore(self, snapshot: Any) -> None:
        """Restore the step's own snapshot."""
        self.inner.restore(snapshot)

    def invoke(self, spec: HandlerSpec, message: Any, ctx: Any) -> Any:
        """Run the step within this node's scope (the engine calls it as for any executor)."""
        if self.wrapping.inputs is not None:
            message = coerced_inputs(message, self.wrapping.inputs)
        if self._templated is not None:
            return spec.fn(message, ctx)
        if spec.is_async:
            return self._scoped_async(lambda c: self.inner.invoke(spec, message, c), message, ctx)
        return self._scoped(lambda c: self.inner.invoke(spec, message, c), message, ctx)

    def _enter(
        self, message: Any, ctx: Any, *, defer: bool = False
    ) -> tuple[_Scope, _Recorder | None]:
        if self.wrapping.inputs is not None and ctx.state.get(INPUTS_KEY) is None:
            ctx.state.set(INPUTS_KEY, checked_inputs(message, self.wrapping.inputs))
        scope = _Scope(ctx, message, self.wrapping.state_keys)
        defer = defer and self.wrapping.conditioned
        recorded = self.wrapping.record_output or defer
        return scope, _Recorder(ctx, defer=defer) if recorded else None

    def _leave(self, recorder: _Recorder | None, ctx: Any, scope: _Scope) -> None:
        if recorder is not None and recorder.sent:
            ctx.state.set(NODES_KEY, {self.id: recorder.last})
        outcome = self.wrapping.outcome
        if outcome is not None:  # set once the step has run: a failure or a wait sets none
            summary = self.wrapping.outcome_summary
            ctx.set_outcome(
                resolve(outcome, scope.root),
                None if summary is None else resolve(summary, scope.root),
            )

    def _scoped(self, call: Callable[[Any], Any], message: Any, ctx: Any) -> Any:
        scope, recorder = self._enter(message, ctx)
        token = _SCOPE.set(scope)
        try:
            result = call(recorder or ctx)
        finally:
            _SCOPE.reset(token)
        self._leave(recorder, ctx, scope)
        return result

    async def _scoped_async(
        self, call: Callable[[Any], Awaitable[Any]], message: Any, ctx: Any
    ) -> Any:
        scope, recorder = self._enter(message, ctx, defer=True)
        token = _SCOPE.set(scope)
        try:
            result = await call(recorder or ctx)
            await _send_off_loop(recorder, ctx)
        finally:
            _SCOPE.reset(token)
        self._leave(recorder, ctx, scope)
        return result

    async def _with_input(self, message: Any, ctx: Any) -> None:
        """Resolve the ``input`` template, then hand its value to the step's handler."""
        scope, recorder = self._enter(message, ctx, defer=True)
        value = resolve(self.wrapping.input, scope.root)
        spec = self.inner.find_handler(type(value))
        if spec is None:
            msg = (
                f"node {self.id!r}: its input resolved to a {type(value).__name__}, "
                f"which its step has no handler for"
            )
            raise TypeError(msg)
        target = recorder or ctx
        token = _SCOPE.set(scope)
        try:
            if spec.is_async:
                await self.inner.invoke(spec, value, target)
            elif self.inner.sync_handlers == "loop":
                self.inner.invoke(spec, value, target)
            else:
                await asyncio.to_thread(self.inner.invoke, spec, value, target)
            await _send_off_loop(recorder, ctx)
        finally:
            _SCOPE.reset(token)
        self._leave(recorder, ctx, scope)


def coerced_inputs(message: Any, declared: Mapping[str, str]) -> Any:
    """A run's input with each whole number declared ``float`` made a float.

    JSON writes ``1500.0`` as ``1500``; CEL never compares an int with a
    double (``message.amount >= 1000.0`` would fail on it), so the declared
    type is what the start node, templates and conditions see.
    """
    if not isinstance(message, dict):
        return message
    return {
        name: float(value)
        if declared.get(name) == "float" and isinstance(value, int) and not isinstance(value, bool)
        else value
        for name, value in message.items()
    }


def checked_inputs(message: Any, declared: Mapping[str, str]) -> dict[str, Any]:
    """A run's input, checked against the definition's declared inputs.

    Raises:
        TypeError: It is not a mapping, misses a declared input, has one
            not declared, or has one of the wrong type.
    """
    if not isinstance(message, dict):
        msg = f"this workflow takes a mapping of inputs ({', '.join(declared)}), got {message!r}"
        raise TypeError(msg)
    problems = [f"missing input {name!r}" for name in declared if name not in message]
    problems += [f"undeclared input {name!r}" for name in message if name not in declared]
    for name, kind in declared.items():
        value = message.get(name)
        wanted = _INPUT_TYPES[kind]
        if name in message and (
            not isinstance(value, wanted) or (kind in {"int", "float"} and isinstance(value, bool))
        ):
            problems.append(f"input {name!r} must be {kind}, got {type(value).__name__}")
    if problems:
        raise TypeError("; ".join(problems))
    return dict(coerced_inputs(message, declared))


class OutputStep(Executor):
    """The built-in ``output`` step: what it receives (or its ``input``) becomes a run output."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id, shareable=True)

    @handler
    async def emit(self, value: object, ctx: Any) -> None:
        """Yield the value as an output of the run."""
        ctx.yield_output(value)


class TemplateStep(Executor):
    """The built-in ``template`` step: sends what it receives (or its ``input``) along its edges."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id, shareable=True)

    @handler
    async def send(self, value: object, ctx: Any) -> None:
        """Send the value on."""
        ctx.send_message(value)
