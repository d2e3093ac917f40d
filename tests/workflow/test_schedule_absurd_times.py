"""Absurd intervals are refused by ``Schedule`` naming the field (the CLI's parser did already).

An ``every`` of 10**12 seconds made a schedule, which ``create`` then refused
with ``year 33658 is out of range`` (no schedule, no field named), and an infinite or NaN one with
``cannot convert float infinity to integer``.
"""

from __future__ import annotations

import math
import time
from datetime import timedelta

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


def test_a_cron_expression_past_any_real_ones_length_is_refused_at_once_naming_it():
    # A megabyte of "1," in one field was a cron expression: each parse of it (made by
    # create, by every tick, and for each listing's description and next time) took
    # one to two seconds, holding up everything else the serving process did.
    huge = "0 0 " + ",".join(["1"] * 500_000) + " * *"
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"cron is 1,000,007 characters long; a cron expression"):
        Schedule("digest", cron=huge)
    assert time.monotonic() - started < 0.1
    every_value = "0-59,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27"
    Schedule("digest", cron=f"{every_value} 0,1,2,3,4,5,6,7,8,9,10,11,12 L,15,2,3 JAN-DEC 1#1")


@pytest.mark.parametrize("millis", [100, 4516])
def test_an_interval_of_milliseconds_moves_on_from_each_tick_in_any_year(millis):
    # The tick after a tick was found by flooring its time in milliseconds, as a float:
    # in some years (2004, and from 2036) one tick in two hundred read a hair below
    # itself, the "next" tick was the same tick, and the schedule ticked it for ever
    # (a backfill listed it over and over).
    schedule = Schedule("fast", every=timedelta(milliseconds=millis))
    for year_start in (1_072_915_200_000, 2_082_758_400_000):  # 2004 and 2036, in UTC
        first = year_start // millis + 1
        for index in range(first, first + 20_000):
            tick, following = index * millis / 1000, (index + 1) * millis / 1000
            assert schedule.next_after(tick) == following, tick
            assert schedule.next_after(math.nextafter(tick, -math.inf)) == tick, tick
