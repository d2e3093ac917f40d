"""Retry and backoff policies for handlers.

A policy is a frozen value: set it per handler (``@handler(retry=...)``), per
executor, or as the workflow's default; the most specific one applies. A
retried invocation starts again from a fresh context (nothing it sent or
wrote in a failed attempt commits) with the same ``idempotency_key``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """Delays that grow by ``multiplier`` from ``initial`` up to ``maximum``.

    ``jitter`` spreads each delay by up to that fraction either way, so
    many retrying invocations do not hit a recovering service in step.
    """

    initial: float = 1.0
    maximum: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < self.initial:
            msg = (
                f"need 0 <= initial <= maximum, got initial={self.initial}, maximum={self.maximum}"
            )
            raise ValueError(msg)
        if self.multiplier < 1:
            msg = f"multiplier must be at least 1, got {self.multiplier}"
            raise ValueError(msg)
        if not 0 <= self.jitter <= 1:
            msg = f"jitter must be between 0 and 1, got {self.jitter}"
            raise ValueError(msg)

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The (low, high) range of the delay after failed attempt ``attempt`` (1-based)."""
        try:
            grown = self.initial * self.multiplier ** (attempt - 1)
        except OverflowError:  # thousands of attempts: past any float, so past the maximum
            grown = self.maximum
        base = min(self.maximum, grown)
        return base * (1 - self.jitter), min(self.maximum, base * (1 + self.jitter))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A delay within :meth:`bounds` for failed attempt ``attempt``."""
        low, high = self.bounds(attempt)
        return (rng or random).uniform(low, high)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often, and on what, a failing handler is tried again.

    Args:
        max_attempts: Total attempts, the first included (1 = no retry).
        backoff: The delay before each retry.
        retry_on: Exception classes, or a predicate, that deserve a retry;
            anything else fails the invocation at once.
    """

    max_attempts: int = 3
    backoff: ExponentialBackoff = field(default_factory=ExponentialBackoff)
    retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (Exception,)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            msg = f"max_attempts must be at least 1, got {self.max_attempts}"
            raise ValueError(msg)

    def should_retry(self, error: BaseException, attempt: int) -> bool:
        """Whether failed attempt ``attempt`` (1-based) is tried again."""
        if attempt >= self.max_attempts:
            return False
        if isinstance(self.retry_on, tuple):
            return isinstance(error, self.retry_on)
        return bool(self.retry_on(error))


NO_RETRY = RetryPolicy(max_attempts=1)
"""The policy of handlers that declare none: fail at the first error."""
