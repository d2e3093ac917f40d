"""Executors made from one function: ``@executor``, and the only executors a pool runs.

A function keeps no fields, so a :class:`FunctionExecutor` is shareable
between concurrent runs unless declared otherwise, and it is the one kind
of executor that may run on an executor pool (a cluster): a method would
need its instance, whose fields are values, shipped along.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any, overload

from treadle._graph._executor import (
    Executor,
    HandlerContext,
    HandlerSpec,
    SyncHandlers,
    build_handler_spec,
)
from treadle._graph._typing import promotions

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from datetime import timedelta

    from treadle._graph._policies import RetryPolicy
    from treadle._graph._remote import RemotePool


class FunctionExecutor(Executor):
    """An executor made from one function by :func:`executor`.

    Functions keep no fields, so they are shareable between concurrent runs
    unless declared otherwise. Only function executors run on a pool: a
    method would need its instance, whose fields are values, shipped along.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        id: str | None = None,  # noqa: A002 - `id` is the contract's name
        accepts: object = None,
        concurrency: int = 1,
        shareable: bool = True,
        sync_handlers: SyncHandlers = "thread",
        retry: RetryPolicy | None = None,
        timeout: float | timedelta | None = None,
        pool: RemotePool | None = None,
        limits: Sequence[str] = (),
    ) -> None:
        super().__init__(
            id if id is not None else fn.__name__,
            concurrency=concurrency,
            shareable=shareable,
            sync_handlers=sync_handlers,
            retry=retry,
            timeout=timeout,
            limits=limits,
        )
        self._spec = build_handler_spec(fn, bound=False, accepts=accepts)
        self._own_cache: dict[type, HandlerSpec] = {}
        self.__wrapped__ = fn
        if pool is not None:
            problem = self.pool_problem(pool)
            if problem is not None:
                raise TypeError(problem)
            self._spec = dataclasses.replace(self._spec, pool=pool)

    @property
    def pool(self) -> RemotePool | None:
        """The pool its handler runs on; ``None``: in the run's own process."""
        return self._spec.pool

    def pool_problem(self, pool: object) -> str | None:
        """Why this executor cannot run on ``pool``; ``None`` if it can.

        A pool runs plain ``def`` handlers: an ``async def`` one belongs on
        the event loop, and one pinned there with ``sync_handlers="loop"``
        must stay on its thread.
        """
        if not callable(getattr(pool, "run", None)):
            return f"executor {self.id!r}: {pool!r} is not an executor pool (it has no run method)"
        if self._spec.is_async:
            return (
                f"executor {self.id!r}: a pool runs plain def handlers; "
                f"an async def handler runs on the event loop"
            )
        if self.sync_handlers == "loop":
            return f"executor {self.id!r}: sync_handlers='loop' pins it to the loop, not a pool"
        return None

    def on_pool(self, pool: RemotePool) -> FunctionExecutor:
        """A copy of this executor whose handler runs on ``pool``.

        A copy, so an executor shared by several workflows runs on the pool
        only in the one whose builder chose it.

        Raises:
            TypeError: this executor cannot run on a pool (see :meth:`pool_problem`).
        """
        problem = self.pool_problem(pool)
        if problem is not None:
            raise TypeError(problem)
        pooled = copy.copy(self)
        pooled._spec = dataclasses.replace(self._spec, pool=pool)  # noqa: SLF001 - its own copy
        pooled._own_cache = {}  # noqa: SLF001 - the cache held the unpooled spec
        return pooled

    def handler_specs(self) -> tuple[HandlerSpec, ...]:
        """The single handler made from the function."""
        return (self._spec,)

    def find_handler(self, message_type: type) -> HandlerSpec | None:
        """The function's handler when the message type matches it."""
        spec = self._own_cache.get(message_type)
        if spec is None:
            if not _accepted(self._spec.accepts, message_type):
                return None
            spec = self._own_cache[message_type] = self._spec
        return spec

    def __call__(self, message: Any, ctx: HandlerContext) -> Awaitable[None] | None:
        """Call the wrapped function directly (handy in unit tests)."""
        result: Awaitable[None] | None = self._spec.fn(message, ctx)
        return result


def _accepted(accepts: tuple[type, ...], message_type: type) -> bool:
    """Whether ``message_type``, a class it derives from or one it promotes to is accepted.

    Its own function: a generator reading ``accepts`` in ``find_handler``
    would make it a cell there, built at every message.
    """
    candidates = (*message_type.__mro__, *promotions(message_type))
    return any(klass in accepts for klass in candidates)


@overload
def executor(fn: Callable[..., Any], /) -> FunctionExecutor: ...
@overload
def executor(
    *,
    id: str | None = None,
    accepts: object = None,
    concurrency: int = 1,
    shareable: bool = True,
    sync_handlers: SyncHandlers = "thread",
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
    pool: RemotePool | None = None,
    limits: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], FunctionExecutor]: ...
def executor(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    id: str | None = None,  # noqa: A002 - `id` is the contract's name
    accepts: object = None,
    concurrency: int = 1,
    shareable: bool = True,
    sync_handlers: SyncHandlers = "thread",
    retry: RetryPolicy | None = None,
    timeout: float | timedelta | None = None,
    pool: RemotePool | None = None,
    limits: Sequence[str] = (),
) -> FunctionExecutor | Callable[[Callable[..., Any]], FunctionExecutor]:
    """Turn a function ``(message, ctx)`` into an executor.

    Usable bare (``@executor``; the id is the function's name) or with
    options (``@executor(id="upper")``). With ``pool`` (a plain ``def``
    function only, e.g. ``treadle.dask.DaskPool()``) its invocations run on
    that pool's workers instead of this process; see ``docs/cluster.md``.
    With ``limits`` (names of ``CallLimit``s) each call waits for a slot of
    every one; see ``docs/flow-control.md``.
    """

    def wrap(f: Callable[..., Any]) -> FunctionExecutor:
        return FunctionExecutor(
            f,
            id=id,
            accepts=accepts,
            concurrency=concurrency,
            shareable=shareable,
            sync_handlers=sync_handlers,
            retry=retry,
            timeout=timeout,
            pool=pool,
            limits=limits,
        )

    return wrap(fn) if fn is not None else wrap
