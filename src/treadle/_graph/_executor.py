"""Executors: units of work whose handlers are chosen by message type.

An executor is an actor. One instance handles the messages it receives in a
superstep one at a time, in delivery order, so its own fields need no lock.
Stateless executors may opt into ``concurrency=n``; the runtime still stamps
what they send by inbox position, so their output order never depends on
timing. How a handler is declared (:func:`handler`) and read
(:class:`HandlerSpec`) is here too; executors made from one function
(``@executor``) are :mod:`treadle._graph._function_executor`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Never,
    TypeAlias,
    TypeVar,
    get_args,
    get_origin,
    overload,
)

from treadle._graph._limits import check_limit_names
from treadle._graph._typing import promotions, resolve_hints, runtime_classes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._graph._policies import RetryPolicy
    from treadle._graph._remote import RemotePool

HandlerContext: TypeAlias = Any
"""The ``ctx`` a handler is called with: the engine's ``WorkflowContext``.

Definitions sit below the engine, so they hand the context through untyped;
handlers annotate it as ``WorkflowContext[...]`` themselves.
"""

SyncHandlers = Literal["thread", "loop"]
F = TypeVar("F", bound=Callable[..., Any])

_HANDLER_MARK = "__treadle_handler__"


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One handler: the function, what it accepts, what it may send.

    ``sends`` is ``None`` when the context parameter is not parameterized,
    which means "unknown": build-time edge checks then trust the author.
    ``pool`` is where a plain ``def`` function handler runs when it does not
    run in the run's own process (see ``_graph/_remote.py``); it lives on
    the handler rather than the executor so no field of a user's executor
    class can be mistaken for it.
    """

    name: str
    fn: Callable[..., Any]
    accepts: tuple[type, ...]
    sends: tuple[type, ...] | None
    is_async: bool
    bound: bool  # True for methods (called with self), False for plain functions
    annotations: tuple[object, ...] = ()  # raw message and sent types, for serialization
    retry: RetryPolicy | None = None
    timeout: float | None = None
    pool: RemotePool | None = None


@dataclass(frozen=True, slots=True)
class _HandlerMark:
    accepts: object
    retry: RetryPolicy | None = None
    timeout: float | None = None


@overload
def handler(fn: F, /) -> F: ...
@overload
def handler(
    *,
    accepts: object = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
) -> Callable[[F], F]: ...
def handler(
    fn: F | None = None,
    /,
    *,
    accepts: object = None,
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
) -> F | Callable[[F], F]:
    """Mark an ``Executor`` method as the handler for the type of its message.

    The message type comes from the annotation of the first parameter after
    ``self`` (or from ``accepts=`` when annotations cannot be resolved). A
    union registers the handler for every member; the most specific handler
    wins when several match a message. ``retry`` and ``timeout`` (seconds)
    override the executor's and the workflow's.

    A timeout fails the attempt when it passes, like an exception the
    handler raised. A plain ``def`` handler in a worker thread cannot be
    stopped: its thread is abandoned, runs on until the handler returns,
    and whatever it does from then on is discarded, never committed. One
    pinned to the loop (``sync_handlers="loop"``) cannot be interrupted.
    """
    seconds = _seconds(timeout)

    def mark(f: F) -> F:
        setattr(f, _HANDLER_MARK, _HandlerMark(accepts, retry, seconds))
        return f

    return mark(fn) if fn is not None else mark


def _sent_classes(ctx_annotation: object) -> tuple[type, ...] | None:
    """Classes named by ``WorkflowContext[X]``; ``None`` if unparameterized."""
    if get_origin(ctx_annotation) is None:
        return None
    args = get_args(ctx_annotation)
    if not args:
        return None
    if args[0] is Never:
        return ()
    return runtime_classes(args[0])


def _seconds(timeout: float | timedelta | None) -> float | None:
    """A handler's or an executor's ``timeout`` in seconds (a ``timedelta`` too, as ``run`` takes).

    Raises:
        TypeError: it is neither.
        ValueError: it is not a positive, finite time.
    """
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        msg = f"timeout must be seconds or a datetime.timedelta, got {timeout!r}"
        raise TypeError(msg)
    if not 0 < timeout < math.inf:
        msg = f"timeout must be a positive number of seconds, got {timeout!r}"
        raise ValueError(msg)
    return float(timeout)


def build_handler_spec(
    fn: Callable[..., Any],
    *,
    bound: bool,
    accepts: object,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,
) -> HandlerSpec:
    """Read one handler's message and context types from its signature."""
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        name = getattr(fn, "__qualname__", repr(fn))
        msg = (
            f"handler {name} is a generator function (it yields), so calling it would run "
            f"none of its body: send with ctx.send_message and ctx.yield_output instead"
        )
        raise TypeError(msg)
    params = list(inspect.signature(fn).parameters.values())
    skip = 1 if bound else 0
    if len(params) - skip != 2:  # noqa: PLR2004 - a chain links at least two
        name = getattr(fn, "__qualname__", repr(fn))
        msg = f"handler {name} must take (message, ctx){' after self' if bound else ''}"
        raise TypeError(msg)
    message_param, ctx_param = params[skip], params[skip + 1]
    hints: dict[str, Any] = {}
    if accepts is None or ctx_param.annotation is not inspect.Parameter.empty:
        hints = resolve_hints(fn)
    if accepts is None:
        if message_param.name not in hints:
            name = getattr(fn, "__qualname__", repr(fn))
            msg = f"handler {name} needs a type annotation on {message_param.name!r}"
            raise TypeError(msg)
        accepts = hints[message_param.name]
    ctx_annotation = hints.get(ctx_param.name)
    sends = _sent_classes(ctx_annotation) if ctx_annotation is not None else None
    raw = (accepts, *(get_args(ctx_annotation) if ctx_annotation is not None else ()))
    return HandlerSpec(
        name=fn.__name__,
        fn=fn,
        accepts=runtime_classes(accepts),
        sends=sends,
        is_async=inspect.iscoroutinefunction(fn),
        bound=bound,
        annotations=raw,
        retry=retry,
        timeout=timeout,
    )


class Executor:
    """A unit of work with an ``id`` and handlers keyed by message type.

    Subclass it and mark ``async def`` (preferred) or plain ``def`` methods with
    :func:`handler`. Plain ``def`` handlers run in a worker thread so they
    never block the event loop; ``sync_handlers="loop"`` pins them to the loop
    thread instead, for code that must stay on one thread.

    Args:
        id: Unique within a workflow; defaults to the class name.
        concurrency: How many of its messages may be handled at once. Keep 1
            (the default) whenever handlers touch instance fields.
        shareable: Whether one instance may serve several concurrent runs.
            Declare it only for executors that keep no per-run fields.
        sync_handlers: Where plain ``def`` handlers run: ``"thread"`` or
            ``"loop"``.
        retry: Retry policy of its handlers (a handler's own one wins).
        timeout: Seconds each handler may take (a handler's own one wins);
            see :func:`handler` for what a timeout does to a plain ``def`` one.
        limits: The names of the call limits its handlers run under (see
            ``CallLimit``): each attempt waits for a slot of every one.
    """

    _handler_specs: ClassVar[dict[str, HandlerSpec] | None] = None
    _dispatch_cache: ClassVar[dict[type, HandlerSpec]]

    approvers: tuple[str, ...] = ()
    """Who may answer the requests its handlers ask without naming their own
    (``ctx.request(..., approvers=)``): a definition's node and an agent's
    ``approvers=`` set it; empty, anyone with the approver role."""

    four_eyes: bool | None = None
    """Whether its requests refuse the run's starter, unless a request says
    (``None``: as the workflow says)."""

    def __init__(
        self,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        *,
        concurrency: int = 1,
        shareable: bool = False,
        sync_handlers: SyncHandlers = "thread",
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
        limits: Sequence[str] = (),
    ) -> None:
        self.retry = retry
        self.timeout = _seconds(timeout)
        if concurrency < 1:
            msg = f"concurrency must be at least 1, got {concurrency}"
            raise ValueError(msg)
        if sync_handlers not in ("thread", "loop"):
            msg = f"sync_handlers must be 'thread' or 'loop', got {sync_handlers!r}"
            raise ValueError(msg)
        self.id: str = id if id is not None else type(self).__name__
        if not isinstance(self.id, str) or not self.id:
            msg = f"executor id must be a non-empty string, got {self.id!r}"
            raise ValueError(msg)
        self.concurrency = concurrency
        self.limits: tuple[str, ...] = check_limit_names(f"executor {self.id!r}", limits)
        self.shareable = shareable
        self.sync_handlers: SyncHandlers = sync_handlers

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handler_specs = None
        cls._dispatch_cache = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id!r}>"

    # -- durability hooks ---------------------------------------------------------
    def snapshot(self) -> Any:
        """What of this instance's fields a checkpoint should keep.

        Override together with :meth:`restore` for executors that keep state
        in fields across supersteps; the value must be serializable (see
        ``docs/durability.md``). The default keeps nothing.
        """
        return None

    def restore(self, snapshot: Any) -> None:
        """Put back what :meth:`snapshot` returned, on a fresh instance."""

    def answer_problems(self, question: Any, answer: Any) -> list[str]:
        """What is wrong with ``answer`` to a request this executor asked, beyond its type.

        ``question`` is the request's payload; ``answer`` is already built
        as the asked type. Called wherever an answer arrives (``respond``,
        ``treadle respond``, the HTTP API, a client), before it is kept, so
        an answer refused here changes nothing and the request still waits.
        Override when the asked type alone cannot say what fits (an agent
        checks edited tool arguments against the tool's schema). Each
        problem reads ``loc: what is wrong``, ``loc`` a field of the answer.
        The default finds none.
        """
        del question, answer
        return []

    def input_problems(self, message: Any) -> list[str]:
        """What is wrong with ``message`` as a new run's input, beyond its type, if this starts it.

        Called before a new run is made, from Python (``TypeError``) as where
        an input arrives as JSON (``treadle run``, the HTTP API): an input
        refused here makes no run. Override
        when the type alone cannot say what fits (a definition's declared
        ``inputs``). The default finds none.
        """
        del message
        return []

    def needed_edges(self) -> tuple[str, ...]:
        """The executors this one sends to whatever it is given: its edges to them must exist.

        ``build()`` refuses a graph that lacks one, naming the edge to add,
        rather than the run failing once it sends (a session agent waits
        for its next message along its edge to itself). The default needs none.
        """
        return ()

    # -- handlers -------------------------------------------------------------
    def handler_specs(self) -> tuple[HandlerSpec, ...]:
        """Every handler of this executor, resolved once per class."""
        cls = type(self)
        if cls._handler_specs is None:
            specs: dict[str, HandlerSpec] = {}
            for klass in reversed(cls.__mro__):
                for name, attr in vars(klass).items():
                    mark = getattr(attr, _HANDLER_MARK, None)
                    if isinstance(mark, _HandlerMark):
                        specs[name] = build_handler_spec(
                            attr,
                            bound=True,
                            accepts=mark.accepts,
                            retry=mark.retry,
                            timeout=mark.timeout,
                        )
            cls._handler_specs = specs
        return tuple(cls._handler_specs.values())

    def accepted_types(self) -> tuple[type, ...]:
        """Every class some handler accepts."""
        return tuple(dict.fromkeys(t for spec in self.handler_specs() for t in spec.accepts))

    def sent_types(self) -> tuple[type, ...] | None:
        """Every class some handler may send, or ``None`` if any is unknown."""
        found: list[type] = []
        for spec in self.handler_specs():
            if spec.sends is None:
                return None
            found.extend(spec.sends)
        return tuple(dict.fromkeys(found))

    def find_handler(self, message_type: type) -> HandlerSpec | None:
        """The most specific handler for a message class, cached per class.

        "Most specific" follows the message's MRO: a handler for the class
        itself beats one for a base class, which beats one for ``object``.
        """
        cache = self._dispatch_cache  # the class's: shared by its instances
        spec = cache.get(message_type)
        if spec is None:
            by_type: dict[type, HandlerSpec] = {}
            for candidate in self.handler_specs():
                for accepted in candidate.accepts:
                    by_type.setdefault(accepted, candidate)
            for klass in (*message_type.__mro__, *promotions(message_type)):
                if klass in by_type:
                    spec = by_type[klass]
                    break
            if spec is None:
                return None
            cache[message_type] = spec
        return spec

    def invoke(self, spec: HandlerSpec, message: Any, ctx: HandlerContext) -> Any:
        """Call one handler; returns a coroutine for async handlers."""
        if spec.bound:
            return spec.fn(self, message, ctx)
        return spec.fn(message, ctx)
