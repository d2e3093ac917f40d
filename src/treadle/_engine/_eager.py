"""Running coroutines without a task of their own until they first suspend.

Most handlers return without ever waiting, and a task per invocation is
then most of what a superstep costs (creating it, scheduling its first step,
its done callbacks). Python 3.11 has no eager task factory, so the runner
starts coroutines by hand (:func:`start`), in a copy of the current context
where a task would have given one: a coroutine that finishes there needed
no task at all. One that suspends comes back :class:`Started` and is
continued by :class:`Resumed`, awaited in the task that started it: that
task runs it to the end, so ``asyncio.current_task()`` inside it (which
``asyncio.timeout`` and task groups rely on) is the same task before and
after its first suspension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine, Generator
    from contextvars import Context

T = TypeVar("T")


class Started(Generic[T]):
    """A coroutine started by hand that now waits on ``yielded`` (a future)."""

    __slots__ = ("coro", "yielded")

    def __init__(self, coro: Coroutine[Any, Any, T], yielded: Any) -> None:
        self.coro = coro
        self.yielded = yielded

    def resumed(self, context: Context | None = None) -> Resumed[T]:
        """The rest of it, to await (stepped in ``context``, if it was started in one)."""
        return Resumed(self.coro, self.yielded, context)


def start(coro: Coroutine[Any, Any, None]) -> Started[None] | None:
    """Run ``coro`` in the current context up to its first suspension.

    Returns ``None`` if it finished there, else :class:`Started`; what it
    raised propagates.
    """
    try:
        yielded = coro.send(None)
    except StopIteration:
        return None
    return Started(coro, yielded)


class Resumed(Generic[T]):
    """Await the rest of ``coro``, which was started inline and suspended on ``yielded``.

    What ``yield from coro`` would do had the first step not been taken
    already: the awaiting task gets the future the coroutine waits on, and
    whatever the task sends or throws in (a result, a cancellation) is
    passed on to the coroutine, inside ``context`` when one is given (the
    copy it was started in, when the awaiting task runs in another).
    """

    __slots__ = ("_context", "_coro", "_yielded")

    def __init__(
        self, coro: Coroutine[Any, Any, T], yielded: Any, context: Context | None = None
    ) -> None:
        self._coro = coro
        self._yielded = yielded
        self._context = context

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._coro
        context = self._context
        yielded = self._yielded
        self._yielded = None  # the future is the task's to hold from here on
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as error:  # noqa: BLE001 - thrown in by the task: passed on
                step: Any = coro.throw
                argument: Any = error
            else:
                step = coro.send
                argument = sent
            try:
                yielded = step(argument) if context is None else context.run(step, argument)
            except StopIteration as finished:
                result: T = finished.value
                return result
