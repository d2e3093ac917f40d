"""A frame's waits and envelopes, read back slot by slot, equal what their classes make.

The reading side builds ``Envelope``, ``Wait``, ``Suspension`` and the
``WaitBook`` without calling their classes (``_engine/_slots.py``), and
goes through none of a book's parts left out: every woken run reads some.
Whatever was written, what is read must be the value the classes would
have made, as frozen as theirs.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treadle._checkpoints._frame import envelope_in, envelope_out, same, waits_in, waits_out
from treadle._engine._delivery import Envelope, HandoffContext
from treadle._engine._waits import HandoffApproval, ScheduledMessage, Suspension, Wait, WaitBook

_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)
_names = st.text(max_size=6)
_stamps = st.tuples(*[st.integers(-1, 10**6)] * 4)
_entries = st.tuples(st.sampled_from(["step", "wait", "call"]), _names, _plain)
_envelopes = st.builds(
    Envelope,
    _stamps,
    _names,
    _plain,
    st.none() | st.builds(HandoffContext, _names, st.none() | _names),
    st.none() | st.lists(_entries, max_size=3),
)
_waits = st.builds(
    Wait,
    st.sampled_from(["request", "input", "timer", "workflow"]),
    _names,
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
    _plain,
    st.none() | _names,
    st.none() | _names,
    st.lists(_names, max_size=2).map(tuple),
    st.booleans(),
)
_suspensions = st.builds(Suspension, _names, _envelopes, st.lists(_entries, max_size=3), _waits)
_books = st.builds(
    WaitBook,
    st.lists(_suspensions, max_size=2),
    st.lists(
        st.builds(
            ScheduledMessage,
            st.floats(allow_nan=False, allow_infinity=False),
            _names,
            _envelopes,
            st.none() | _names,
        ),
        max_size=2,
    ),
    st.sets(_names, max_size=3),
    st.lists(st.builds(HandoffApproval, _names, _names, _names, _envelopes), max_size=2),
    st.just({}),
    st.dictionaries(_names, st.dictionaries(_names, _plain, max_size=2), max_size=2),
)


def _stored(value: object) -> object:
    """``value`` as it comes back from the JSON a frame is written in."""
    return json.loads(json.dumps(value))


@given(_envelopes)
def test_an_envelope_read_back_equals_the_one_written(envelope):
    read = envelope_in(_stored(envelope_out(envelope, same)))

    assert type(read) is Envelope
    assert (read.stamp, read.source, read.payload, read.handoff, read.journal) == (
        envelope.stamp,
        envelope.source,
        envelope.payload,
        envelope.handoff,
        envelope.journal,
    )


@given(st.lists(_suspensions, max_size=3))
def test_suspensions_read_back_equal_what_their_classes_make(suspended):
    read = waits_in(_stored(waits_out(WaitBook(suspended), same))).suspended

    assert read == tuple(suspended)  # a book keeps its suspensions as a tuple
    for one in read:
        assert type(one) is Suspension
        assert type(one.wait) is Wait
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.wait.key = "changed"  # type: ignore[misc]


@given(_books)
def test_a_wait_book_read_back_equals_the_one_written(book):
    read = waits_in(_stored(waits_out(book, same)))

    assert type(read) is WaitBook
    assert read.suspended == book.suspended
    assert read.scheduled == book.scheduled
    assert read.answered == book.answered
    assert read.approvals == book.approvals
    assert read.nested == book.nested
    assert read.saved == book.saved
