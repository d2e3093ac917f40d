"""The longest a duration a person gives treadle may be: what a time stored from it can hold.

A time the store keeps is seconds since the epoch, shown as an ISO 8601
date, which ends with year 9999. A token, a link or a schedule's interval
given as ``999999999999d`` (or NaN, or infinity) was kept, and every
later listing of it failed as it turned the time into a date. So each is
refused where it is given, past :data:`LONGEST_SECONDS`.
"""

from __future__ import annotations

import math

LONGEST_SECONDS = 100 * 366 * 86400.0
"""A hundred years: the longest expiry, interval or window a person may give."""


def duration_problem(seconds: float) -> str | None:
    """Why ``seconds`` is no duration to keep (``None``: it is one); above 0 is the caller's."""
    if not math.isfinite(seconds):
        return f"{seconds!r} seconds is not a finite duration"
    if seconds > LONGEST_SECONDS:
        return f"{seconds:,.0f} seconds is more than the hundred years a duration may be"
    return None
