"""The errors of flow control: a provider that turns calls away, a limit that never admits one."""

from __future__ import annotations

import math

from treadle._exceptions._core import TreadleError


class ProviderBusyError(TreadleError):
    """A called provider asked to be called less (an HTTP 429), and when to try again.

    Raise it from a handler that runs under call limits when the thing the
    limits guard answers "too many requests" (an agent step raises it for
    its model's 429 itself). Every limit the executor names then admits no
    call for ``retry_after`` seconds, in every process on the run's store
    (a ``limit_slowed`` event records it), and the attempt is made again
    once its turn comes: the limit slows down instead of each run retrying
    on its own. It is not one of the retry policy's attempts; after
    :data:`treadle._engine._invoke.BUSY_TRIES` such tries in a row it is
    handled as any other failure.

    Attributes:
        retry_after: Seconds the provider asked to wait (``Retry-After``).
    """

    def __init__(self, retry_after: float, message: str = "") -> None:
        seconds = float(retry_after)
        if not (math.isfinite(seconds) and seconds >= 0):
            msg = f"retry_after must be a finite number of seconds, 0 or more, got {retry_after!r}"
            raise ValueError(msg)
        self.retry_after = seconds
        super().__init__(message or f"the provider asked to retry after {seconds:g} s")


class CallLimitError(TreadleError):
    """A call limit can never admit a call: what it asks for is more than the limit allows.

    A call whose token estimate is above the tokens its limit allows in a
    whole window would wait for ever; it fails at once instead, naming the
    limit, so the run's failure (or its error route) says what to change.

    Attributes:
        limit: The limit's name.
        reason: What the call asks for against what the limit allows.
    """

    def __init__(self, limit: str, reason: str) -> None:
        self.limit = limit
        self.reason = reason
        super().__init__(f"limit {limit!r} can never admit this call: {reason}")
