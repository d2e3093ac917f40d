"""Property tests of the pure barrier algebra: state commit and delivery."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treadle._engine._delivery import build_inboxes
from treadle._engine._state import SET, UPDATE, StateKey, commit_state
from treadle._graph._edges import FanInEdge
from treadle.errors import StateConflictError

EXECUTORS = ["a", "b", "c", "d"]
KEYS = ["x", "y", "z"]


def increment(v):
    return v + 1


writes_strategy = st.lists(
    st.tuples(
        st.sampled_from(EXECUTORS),
        st.lists(
            st.tuples(st.sampled_from([SET, UPDATE]), st.sampled_from(KEYS), st.integers(0, 9)),
            max_size=4,
        ),
    ),
    max_size=6,
)


def to_ops(ops):
    return [(kind, key, value if kind == SET else increment) for kind, key, value in ops]


@given(writes_strategy)
def test_commit_conflicts_exactly_when_two_executors_set_one_key(writes):
    committed = dict.fromkeys(KEYS, 0)
    setters: dict[str, set[str]] = {}
    for executor_id, ops in writes:
        for kind, key, _ in ops:
            if kind == SET:
                setters.setdefault(key, set()).add(executor_id)
    conflict = any(len(s) > 1 for s in setters.values())
    batch = [(e, to_ops(ops)) for e, ops in writes]
    if conflict:
        with pytest.raises(StateConflictError):
            commit_state(committed, batch, {}, 1)
        return
    new = commit_state(committed, batch, {}, 1)
    # Replaying the ops sequentially in the given order gives the same answer.
    expected = dict(committed)
    for _, ops in batch:
        for kind, key, value in ops:
            expected[key] = value if kind == SET else value(expected[key])
    assert new == expected
    assert committed == dict.fromkeys(KEYS, 0), "the committed mapping was mutated"


@given(st.lists(st.sampled_from(EXECUTORS), max_size=50))
def test_updates_from_any_number_of_executors_are_never_lost(executors):
    batch = [(e, [(UPDATE, "n", increment)]) for e in executors]
    assert commit_state({"n": 0}, batch, {}, 1).get("n", 0) == len(executors)


@given(st.lists(st.tuples(st.sampled_from(EXECUTORS), st.integers()), max_size=20))
def test_a_reducer_merges_every_set_in_order(sets):
    specs = {"total": StateKey(default=[], reducer=lambda cur, new: [*cur, new])}
    batch = [(e, [(SET, "total", v)]) for e, v in sets]
    result = commit_state({"total": []}, batch, specs, 1)
    assert result["total"] == [v for _, v in sets]


def test_no_writes_returns_the_same_mapping():
    committed = {"k": 1}
    assert commit_state(committed, [("a", [])], {}, 1) is committed


sends_strategy = st.lists(
    st.tuples(
        st.sampled_from(EXECUTORS),
        st.lists(st.tuples(st.sampled_from(["t1", "t2", "fan"]), st.integers()), max_size=4),
    ),
    max_size=8,
)
RANKS = {"a": 0, "b": 1, "c": 2, "d": 3, "t1": 4, "t2": 5, "join": 6}


@given(sends_strategy)
def test_inboxes_are_sorted_by_stamp_and_every_message_is_delivered_once(raw):
    # Invocations in (rank, position) order, as the runner hands them over.
    raw = sorted(raw, key=lambda item: RANKS[item[0]])
    positions: dict[str, int] = {}
    sent = []
    for source, sends in raw:
        position = positions.get(source, 0)
        positions[source] = position + 1
        outgoing = [
            ("join", 0, v, None)
            if target == "fan" and source in {"a", "b"}
            else (target if target != "fan" else "t1", -1, v, None)
            for target, v in sends
        ]
        sent.append((source, RANKS[source], position, outgoing))
    edge = FanInEdge(("a", "b"), "join")
    inboxes, buffers = build_inboxes(7, sent, [edge], ({},), RANKS)
    for box in inboxes.values():
        stamps = [e.stamp for e in box]
        assert stamps == sorted(stamps)
    direct = sorted((t, v) for _, _, _, out in sent for t, fi, v, _ in out if fi < 0)
    delivered = sorted((t, e.payload) for t, box in inboxes.items() if t != "join" for e in box)
    assert delivered == direct
    fan_in_senders = {s for s, _, _, out in sent if any(fi == 0 for _, fi, _, _ in out)}
    if {"a", "b"} <= fan_in_senders:
        assert buffers == ({},)
        (joined,) = inboxes["join"]
        expected = [
            v
            for s in ("a", "b")
            for src, _, _, out in sent
            if src == s
            for _, fi, v, _ in out
            if fi == 0
        ]
        assert joined.payload == expected
    else:
        assert "join" not in inboxes
