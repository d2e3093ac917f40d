"""Absurd intervals are refused by ``Schedule`` naming the field (the CLI's parser did already).

An ``every`` of 10**12 seconds made a schedule, which ``create`` then refused
with ``year 33658 is out of range`` (no schedule, no field named), and an infinite or NaN one with
``cannot convert float infinity to integer``.
"""

from __future__ import annotations

import pytest

from treadle import Schedule


@pytest.mark.parametrize(
    ("every", "said"),
    [
        (10**12, "every= must be at most a hundred years"),
        (float("inf"), "every must be a finite number of seconds"),
        (float("nan"), "every must be a finite number of seconds"),
    ],
)
def test_an_absurd_interval_is_refused_naming_it(every, said):
    with pytest.raises(ValueError, match=said):
        Schedule("digest", every=every)


def test_an_infinite_catchup_is_refused_naming_it():
    with pytest.raises(ValueError, match="catchup must be a finite number of seconds"):
        Schedule("digest", every=60, catchup=float("inf"))
