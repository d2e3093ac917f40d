"""Call limits: named caps shared by everything that calls the same scarce thing.

A :class:`CallLimit` is declared once (on the builder, a ``Runtime``, a
worker, or in a YAML definition) and named by the executors and agent steps
that call what it guards (``@executor(limits=["openai"])``). It caps how
many of those calls run at once (``concurrency``) and how many start in any
window of time (``rate``), across the parallel invocations of a superstep,
the runs of a process, and every process sharing the run's store.

Called ``CallLimit`` rather than ``Limit``: what it limits is calls, and a
definition's ``limits:`` already names a run's own caps (supersteps,
iterations, ``max_concurrency``), which this is not.

A limit changes *when* an invocation runs, never what its superstep
commits: the barrier orders everything by stamps, not by who finished
first (DESIGN §2), so a limited run commits what an unlimited one does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CallLimitError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

_UNITS = MappingProxyType(
    {
        "s": 1.0,
        "sec": 1.0,
        "second": 1.0,
        "m": 60.0,
        "min": 60.0,
        "minute": 60.0,
        "h": 3600.0,
        "hour": 3600.0,
        "d": 86400.0,
        "day": 86400.0,
    }
)
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*([a-z]+)\s*$")
_TOKENS = re.compile(r"^\s*(\d[\d_]*\.?\d*)\s*([km]?)\s*/\s*(\d*\.?\d*)\s*([a-z]+)\s*$")
_SCALE = MappingProxyType({"": 1, "k": 1_000, "m": 1_000_000})
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,99}$")
MOST = 2**63 - 1
"""The largest count or priority a store keeps (a 64-bit integer column)."""


def _seconds(count: str, unit: str) -> float | None:
    """A window's length from its text (``"5"``, ``"mins"``); ``None``: no such unit.

    A unit of a word takes a plural ``s`` (``mins``, ``hours``); a unit of one
    letter does not: ``ms`` is no unit (not minutes), nor are ``hs`` and ``ds``.
    """
    seconds = _UNITS.get(unit)
    if seconds is None and len(unit) > 2 and unit.endswith("s"):  # noqa: PLR2004 - "xs"
        seconds = _UNITS.get(unit[:-1])
    return None if seconds is None else (float(count) if count else 1.0) * seconds


def _check_window(per: object, what: str) -> None:
    """Refuse a window that is not a positive, finite number of seconds."""
    if not (isinstance(per, int | float) and math.isfinite(per) and per > 0):
        msg = f"{what}'s window must be a positive number of seconds, got {per!r}"
        raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``calls`` calls start in any window of ``per`` seconds.

    Attributes:
        calls: How many calls may start in one window.
        per: The window, in seconds.
    """

    calls: int
    per: float

    def __post_init__(self) -> None:
        if not isinstance(self.calls, int) or self.calls < 1:
            msg = f"a rate needs at least 1 call per window, got {self.calls!r}"
            raise ValueError(msg)
        if self.calls > MOST:
            msg = f"a rate allows at most {MOST} calls per window, got {self.calls!r}"
            raise ValueError(msg)
        _check_window(self.per, "a rate")

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"500/min"``, ``"10/s"``, ``"3/5s"``, ``"1000/hour"``, ``"20/day"``.

        Raises:
            ValueError: ``text`` is not ``N/unit`` or ``N/<number>unit``.
        """
        match = _RATE.match(text.lower())
        per = _seconds(match.group(2), match.group(3)) if match else None
        if match is None or per is None:
            msg = (
                f"rate {text!r} is not calls per time, such as '500/min', '10/s', "
                f"'3/5s' or '1000/hour'"
            )
            raise ValueError(msg)
        return cls(int(match.group(1)), per)

    def __str__(self) -> str:
        return f"{self.calls}/{self.per:g}s"


@dataclass(frozen=True, slots=True)
class TokenRate:
    """At most ``tokens`` tokens used by the calls started in any window of ``per`` seconds.

    Attributes:
        tokens: How many tokens the calls started in one window may use.
        per: The window, in seconds.
    """

    tokens: int
    per: float

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, int) or isinstance(self.tokens, bool) or self.tokens < 1:
            msg = f"a token rate needs at least 1 token per window, got {self.tokens!r}"
            raise ValueError(msg)
        if self.tokens > MOST:
            msg = f"a token rate allows at most {MOST} tokens per window, got {self.tokens!r}"
            raise ValueError(msg)
        _check_window(self.per, "a token rate")

    @classmethod
    def parse(cls, text: str) -> TokenRate:
        """``"200k/min"``, ``"1.5m/hour"``, ``"50000/min"``, ``"40_000/5s"``.

        Raises:
            ValueError: ``text`` is not ``N[k|m]/unit`` or ``N[k|m]/<number>unit``.
        """
        match = _TOKENS.match(text.lower())
        per = _seconds(match.group(3), match.group(4)) if match else None
        if match is None or per is None:
            msg = (
                f"token rate {text!r} is not tokens per time, such as '200k/min', "
                f"'1.5m/hour' or '50000/min'"
            )
            raise ValueError(msg)
        return cls(round(float(match.group(1).replace("_", "")) * _SCALE[match.group(2)]), per)

    def __str__(self) -> str:
        return f"{self.tokens}/{self.per:g}s"


@dataclass(frozen=True, slots=True)
class LimitCall:
    """What a limit's ``key`` and ``priority`` are computed from: one call about to be made.

    Attributes:
        message: The message the invocation handles.
        run_id: The run it belongs to.
        workflow: The run's workflow's name.
        executor: The executor (or agent step) making the call.
    """

    message: Any
    run_id: str
    workflow: str
    executor: str


@dataclass(frozen=True, slots=True)
class CallLimit:
    """A named cap on calls to one scarce thing (a model provider, an API, a database).

    Args:
        name: What executors name it by (``@executor(limits=["openai"])``).
        concurrency: Most calls under way at once; ``None``: no cap.
        rate: Most calls started per window: a :class:`Rate` or its text,
            ``"500/min"``; ``None``: no cap.
        key: Who a call is made for (a tenant, a customer), computed from
            the call (:class:`LimitCall`) as a string. Calls waiting for a
            slot are served by turns across keys (round robin), so one key
            with many calls waiting never starves another. ``None``: one key.
        priority: A number computed from the call: higher is served first,
            ahead of any turn; ``None``: every call has priority 0.
        tokens: Most tokens used by the calls started per window: a
            :class:`TokenRate` or its text, ``"200k/min"``; ``None``: no cap.
            A call reserves its ``estimate`` when it starts and is counted
            for what it reports using once it ends (an agent step: its
            model's usage; any handler: ``ctx.report_tokens(n)``).
        estimate: The tokens a call is expected to use, reserved when it
            starts: a number, or a callable of the call (:class:`LimitCall`).
            Required with ``tokens``: there is no good guess of it.

    At least one of ``concurrency``, ``rate`` and ``tokens`` is required. Waiting for a
    slot holds no thread, and a waiting call keeps its place in line when
    its run is taken over after a crash (see ``docs/flow-control.md``).
    """

    name: str
    concurrency: int | None = None
    rate: Rate | str | None = None
    key: Callable[[LimitCall], object] | None = None
    priority: Callable[[LimitCall], int] | None = None
    tokens: TokenRate | str | None = None
    estimate: int | Callable[[LimitCall], int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            msg = (
                f"a limit's name must be letters, digits, '_', '-', '.' or ':' "
                f"(a letter first), got {self.name!r}"
            )
            raise ValueError(msg)
        if self.concurrency is not None and (
            not isinstance(self.concurrency, int) or self.concurrency < 1
        ):
            msg = f"limit {self.name!r}: concurrency must be at least 1, got {self.concurrency!r}"
            raise ValueError(msg)
        if self.concurrency is not None and self.concurrency > MOST:
            msg = (
                f"limit {self.name!r}: concurrency must be at most {MOST}, got {self.concurrency!r}"
            )
            raise ValueError(msg)
        if isinstance(self.rate, str):
            try:
                object.__setattr__(self, "rate", Rate.parse(self.rate))
            except ValueError as problem:
                msg = f"limit {self.name!r}: {problem}"
                raise ValueError(msg) from None
        elif self.rate is not None and not isinstance(self.rate, Rate):
            msg = f"limit {self.name!r}: rate must be a Rate or text such as '500/min'"
            raise TypeError(msg)
        self._check_tokens()
        if self.concurrency is None and self.rate is None and self.tokens is None:
            msg = f"limit {self.name!r} caps nothing: give it concurrency=, rate= or tokens="
            raise ValueError(msg)
        for field in ("key", "priority"):
            value = getattr(self, field)
            if value is not None and not callable(value):
                msg = f"limit {self.name!r}: {field} must be a callable of the call, got {value!r}"
                raise TypeError(msg)

    def _check_tokens(self) -> None:
        """Parse ``tokens``; an estimate must go with it, and one never admitted is refused."""
        tokens = self.tokens
        if isinstance(tokens, str):
            try:
                tokens = TokenRate.parse(tokens)
            except ValueError as problem:
                msg = f"limit {self.name!r}: {problem}"
                raise ValueError(msg) from None
            object.__setattr__(self, "tokens", tokens)
        elif tokens is not None and not isinstance(tokens, TokenRate):
            msg = f"limit {self.name!r}: tokens must be a TokenRate or text such as '200k/min'"
            raise TypeError(msg)
        estimate = self.estimate
        if tokens is None:
            if estimate is not None:
                msg = (
                    f"limit {self.name!r}: estimate= is what a call reserves of tokens=; give both"
                )
                raise ValueError(msg)
            return
        if estimate is None:
            msg = (
                f"limit {self.name!r}: tokens= needs estimate=, the tokens a call reserves "
                f"when it starts (a number, or a callable of the call)"
            )
            raise ValueError(msg)
        if callable(estimate):
            return
        if isinstance(estimate, bool) or not isinstance(estimate, int) or estimate < 0:
            msg = (
                f"limit {self.name!r}: estimate must be a whole number of tokens, got {estimate!r}"
            )
            raise ValueError(msg)
        if estimate > tokens.tokens:
            msg = (
                f"limit {self.name!r}: no call could ever start: its estimate of {estimate} "
                f"tokens is above the {tokens.tokens} tokens it allows per {tokens.per:g} s"
            )
            raise ValueError(msg)

    @property
    def budget(self) -> TokenRate | None:
        """The token rate as a :class:`TokenRate` (``tokens`` is parsed on construction)."""
        tokens = self.tokens
        assert not isinstance(tokens, str)  # noqa: S101 - parsed in __post_init__
        return tokens

    def estimate_of(self, call: LimitCall | None) -> float:
        """The tokens ``call`` reserves (1 call for a limit with no token budget).

        Raises:
            CallLimitError: the estimate is above what the limit allows in a
                whole window, so the call could never start.
            ValueError: a computed estimate is not a whole number of tokens.
        """
        estimate = self.estimate
        budget = self.budget
        if budget is None or estimate is None:
            return 1.0
        value = estimate(call) if callable(estimate) else estimate  # type: ignore[arg-type]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            msg = f"limit {self.name!r}: its estimate gave {value!r}, not a number of tokens"
            raise ValueError(msg)
        if value > budget.tokens:
            raise CallLimitError(
                self.name,
                f"its estimate of {value:g} tokens is above the {budget.tokens} tokens it "
                f"allows per {budget.per:g} s",
            )
        return float(value)

    @property
    def window(self) -> Rate | None:
        """The rate as a :class:`Rate` (``rate`` is parsed on construction)."""
        rate = self.rate
        assert not isinstance(rate, str)  # noqa: S101 - parsed in __post_init__
        return rate

    def key_of(self, call: LimitCall) -> str:
        """The key ``call`` waits under (``""``: the limit has no key)."""
        return "" if self.key is None else str(self.key(call))

    def priority_of(self, call: LimitCall) -> int:
        """How urgent ``call`` is (0 unless the limit computes it).

        Raises:
            CallLimitError: the priority is past what a store keeps (a 64-bit integer).
        """
        priority = 0 if self.priority is None else int(self.priority(call))
        if not -MOST <= priority <= MOST:
            raise CallLimitError(
                self.name, f"its priority {priority} is not between -{MOST} and {MOST}"
            )
        return priority


def check_limit_names(owner: str, names: object) -> tuple[str, ...]:
    """The limit names an executor or agent step declared, checked.

    Raises:
        TypeError: ``names`` is not a list of strings (naming ``owner``).
    """
    if names is None:
        return ()
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):  # type: ignore[attr-defined]
        msg = f"{owner}: limits must be a list of limit names, got {names!r}"
        raise TypeError(msg)
    return tuple(dict.fromkeys(names))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class WorkflowLimits:
    """A workflow's call limits: those it declares, those its host must, and who names which.

    Attributes:
        declared: Name -> the limit the workflow declares itself.
        hosted: Names the workflow leaves to whoever hosts it to declare
            (a ``Runtime``, ``treadle worker``), with the numbers of that
            deployment.
        by_executor: Executor id -> the names of the limits it runs under,
            sorted (only executors that name some).
    """

    declared: Mapping[str, CallLimit]
    hosted: frozenset[str]
    by_executor: Mapping[str, tuple[str, ...]]

    def names(self) -> frozenset[str]:
        """Every limit some executor names."""
        return frozenset(name for names in self.by_executor.values() for name in names)

    def missing(self, host: Mapping[str, CallLimit]) -> list[str]:
        """What ``host``'s declarations leave undeclared, one problem each."""
        problems: list[str] = []
        for executor_id, names in self.by_executor.items():
            problems.extend(
                f"executor {executor_id!r} names limit {name!r}, which its host does not declare"
                for name in names
                if name not in self.declared and name not in host
            )
        return problems

    def resolve(self, host: Mapping[str, CallLimit]) -> dict[str, tuple[CallLimit, ...]]:
        """Executor id -> its limits, the host's declaration of a name winning.

        Raises:
            ValueError: a named limit is declared nowhere (see :meth:`missing`).
        """
        problems = self.missing(host)
        if problems:
            raise ValueError("; ".join(problems))
        return {
            executor_id: tuple(host.get(name) or self.declared[name] for name in names)
            for executor_id, names in self.by_executor.items()
        }


NO_LIMITS = WorkflowLimits(MappingProxyType({}), frozenset(), MappingProxyType({}))


def workflow_limits(
    limits: Iterable[CallLimit | str], executors: Mapping[str, Sequence[str]]
) -> tuple[WorkflowLimits, list[str]]:
    """A workflow's limits from its builder's ``limits=`` and its executors' names, with problems.

    A problem names the executor and the limit: an executor naming a limit
    the workflow neither declares nor leaves to its host, or a name declared twice.
    """
    declared: dict[str, CallLimit] = {}
    hosted: set[str] = set()
    problems: list[str] = []
    for limit in limits:
        if isinstance(limit, str):
            hosted.add(limit)
            continue
        if not isinstance(limit, CallLimit):
            problems.append(f"limits: {limit!r} is neither a CallLimit nor a limit's name")
            continue
        if limit.name in declared:
            problems.append(f"limits: {limit.name!r} is declared twice")
        declared[limit.name] = limit
    by_executor: dict[str, tuple[str, ...]] = {}
    for executor_id, names in executors.items():
        if not names:
            continue
        by_executor[executor_id] = tuple(sorted(names))
        problems.extend(
            f"executor {executor_id!r} names limit {name!r}, which is not declared "
            f"(declare it with WorkflowBuilder(limits=[CallLimit({name!r}, ...)]), "
            f"or name it there, limits=[{name!r}], for its host to declare)"
            for name in names
            if name not in declared and name not in hosted
        )
    if not by_executor and not declared and not hosted:
        return NO_LIMITS, problems
    return (
        WorkflowLimits(
            MappingProxyType(declared), frozenset(hosted), MappingProxyType(by_executor)
        ),
        problems,
    )
