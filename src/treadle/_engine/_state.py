"""Shared state, transactional per superstep.

A handler sees the state committed at the end of the previous superstep plus
its executor's own writes (read-your-writes). Writes are buffered as
operations and committed at the barrier, in (rank, inbox position, sequence)
order, by :func:`commit_state` — a pure function, so it is property-tested
without an event loop.

``update(key, fn)`` stores the function, not its result: at commit it is
applied to the then-current value, so a hundred concurrent increments give a
hundred. Two executors ``set``-ting one key in a superstep cannot both win
without the outcome depending on timing, so that is a
:class:`StateConflictError` unless the key declares a reducer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, TypeAlias

from treadle._engine._ended import ended_error
from treadle._engine._errors import ExecutorFailedError, StateConflictError


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

SET: Final = 0
UPDATE: Final = 1
DELETE: Final = 2

Op: TypeAlias = tuple[int, str, Any]
"""A buffered write: (SET | UPDATE | DELETE, key, value or function)."""

Reducer: TypeAlias = Callable[[Any, Any], Any]


@dataclass(frozen=True, slots=True)
class StateKey:
    """A declared state key: its initial value and how concurrent sets merge.

    Attributes:
        default: The value before anything was written (``MISSING``: none).
        reducer: ``reducer(current, new)`` merges a ``set``; several executors
            may then set the key in one superstep, merged in rank order.
    """

    default: Any = MISSING
    reducer: Reducer | None = None


def _apply(current: Any, op: Op, spec: StateKey | None) -> Any:
    kind, key, value = op
    if kind == SET:
        if spec is not None and spec.reducer is not None:
            return value if current is MISSING else spec.reducer(current, value)
        return value
    if kind == UPDATE:
        if current is MISSING:
            msg = (
                f"state.update({key!r}, ...) on a key with no value: declare it with "
                f"builder.add_state({key!r}, default=...) or pass it in the initial state"
            )
            raise KeyError(msg)
        return value(current)
    return MISSING


class SharedState:
    """The state as one invocation sees it: committed values plus own writes."""

    __slots__ = ("_committed", "_earlier", "_ended_by", "_ops", "_specs")

    def __init__(
        self,
        committed: Mapping[str, Any],
        specs: Mapping[str, StateKey],
        earlier: Sequence[Sequence[Op]] = (),
    ) -> None:
        self._committed = committed
        self._specs = specs
        self._earlier = earlier
        # A tuple once the invocation ended (see close): no allocation to mark it.
        self._ops: list[Op] | tuple[()] = []

    @property
    def ops(self) -> list[Op] | tuple[()]:
        """The writes this invocation buffered, in order."""
        return self._ops

    def _value(self, key: str) -> Any:
        spec = self._specs.get(key)
        current = self._committed.get(key, MISSING)
        if current is MISSING and spec is not None:
            current = spec.default
        for ops in (*self._earlier, self._ops):
            for op in ops:
                if op[1] == key:
                    current = _apply(current, op, spec)
        return current

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` as this invocation sees it, or ``default``."""
        value = self._value(key)
        return default if value is MISSING else value

    def __getitem__(self, key: str) -> Any:
        value = self._value(key)
        if value is MISSING:
            msg = f"state has no key {key!r}"
            raise KeyError(msg)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._value(key) is not MISSING

    def close(self, executor_id: str) -> None:
        """Refuse writes from here on: the invocation's outcome was taken (see the context)."""
        self._ops = ()
        self._ended_by = executor_id

    def _buffer(self, op: Op) -> None:
        ops = self._ops
        if type(ops) is not list:
            raise ended_error(self._ended_by, "write state")
        ops.append(op)

    def set(self, key: str, value: Any) -> None:
        """Write ``key`` at the barrier (merged by its reducer, if declared)."""
        if type(key) is not str:
            _not_a_key("set", key)
        self._buffer((SET, key, value))

    def update(self, key: str, fn: Callable[[Any], Any]) -> None:
        """Atomic read-modify-write: ``fn`` gets the value current at commit.

        ``fn`` may run more than once (also to serve reads of this
        invocation), so it must be a pure function of its argument.
        """
        if type(key) is not str:
            _not_a_key("update", key)
        if not callable(fn):
            msg = f"state.update({key!r}, fn) needs a callable, got {fn!r}"
            raise TypeError(msg)
        self._buffer((UPDATE, key, fn))

    def delete(self, key: str) -> None:
        """Remove ``key`` at the barrier."""
        if type(key) is not str:
            _not_a_key("delete", key)
        self._buffer((DELETE, key, None))


def _not_a_key(call: str, key: object) -> NoReturn:
    """Refuse a key that is not text: JSON keeps keys as text, so ``42`` came back ``"42"``."""
    msg = (
        f"state.{call}({key!r}): a state key is a str, not {type(key).__name__} "
        f"(a checkpoint keeps keys as text, so the run would read it back as another key)"
    )
    raise TypeError(msg)


def commit_state(
    committed: Mapping[str, Any],
    writes: Iterable[tuple[str, Sequence[Op]]],
    specs: Mapping[str, StateKey],
    superstep: int,
) -> Mapping[str, Any]:
    """Apply one superstep's writes, given as (executor id, ops) in stamp order.

    Returns ``committed`` itself when nothing was written, else a new dict:
    committed mappings are never mutated, so a checkpoint may hold them.

    Raises:
        StateConflictError: two executors set one key that has no reducer.
        ExecutorFailedError: an update function or reducer raised, or an
            update met a key with no value and no default.
    """
    new: dict[str, Any] | None = None
    set_by: dict[str, str] = {}
    for executor_id, ops in writes:
        for op in ops:
            if new is None:
                new = dict(committed)
            kind, key, _ = op
            spec = specs.get(key)
            if kind != UPDATE and (spec is None or spec.reducer is None):
                first = set_by.setdefault(key, executor_id)
                if first != executor_id:
                    raise StateConflictError(key, (first, executor_id), superstep)
            current = new.get(key, MISSING)
            if current is MISSING and spec is not None:
                current = spec.default
            try:
                value = _apply(current, op, spec)
            except Exception as error:
                raise ExecutorFailedError(executor_id, superstep, error) from error
            if value is MISSING:
                new.pop(key, None)
            else:
                new[key] = value
    return committed if new is None else new


def initial_state(specs: Mapping[str, StateKey], given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state a run starts from: declared defaults overlaid by ``given``.

    Raises:
        TypeError: a key of ``given`` is not a ``str`` (see :func:`checked_keys`).
    """
    state = {k: s.default for k, s in specs.items() if s.default is not MISSING}
    if given:
        state.update(checked_keys("state", given))
    return state


def checked_keys(what: str, given: Mapping[str, Any]) -> Mapping[str, Any]:
    """``given`` (a run's initial state, a fork's patch) once every key is a ``str``.

    Raises:
        TypeError: one is not (naming ``what`` and the key), or ``given`` is
            not a mapping at all (a list's items read as its keys).
    """
    if not isinstance(given, Mapping):
        msg = f"{what} must be a mapping of state key to value, got {type(given).__name__}"
        raise TypeError(msg)
    for key in given:
        if type(key) is not str:
            msg = (
                f"{what}: a state key is a str, not {type(key).__name__} ({key!r}); a "
                f"checkpoint keeps keys as text, so the run would read it back as another key"
            )
            raise TypeError(msg)
    return given
