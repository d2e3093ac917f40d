"""The record's texts written without an encoder's call are the encoder's texts, byte for byte.

A run's start writes its actor into its audit entry and its log event. Those
texts are kept per actor and the start's event data is put together by hand
(``_stores/_audit.py``); the audit chain hashes the entry's texts, so they
must be exactly what the general path writes, for any actor.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from treadle._stores._audit import Recorded, entry_hash, started
from treadle._values._actors import DOORS, KINDS, Actor, Role

_names = st.text(min_size=1, max_size=20)
_actors = st.builds(
    Actor,
    kind=st.sampled_from(sorted(KINDS)),
    name=_names,
    door=st.sampled_from(sorted(DOORS)),
    role=st.sampled_from(list(Role)),
    groups=st.frozensets(_names, max_size=3),
)


@given(
    _actors, st.integers(1, 10**12), st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
)
def test_a_starts_event_data_is_the_encoders_text(actor, seq, digest):
    recorded = Recorded("run-1", "run_created", actor, {})
    general = {"actor": actor.to_json(), "audit": {"seq": seq, "hash": digest}}
    assert recorded.event_data(seq, digest) == json.dumps(general, separators=(",", ":"))


@given(_actors, st.integers(1, 10**6), st.floats(0, 2e9))
def test_a_starts_audit_row_holds_the_encoders_texts_and_their_hash(actor, seq, at):
    recorded = started("run-1", actor.encode(), None)
    assert recorded.actor == actor
    row = recorded.row(seq, at, "0" * 64)
    stored = json.dumps(actor.to_json(), sort_keys=True, separators=(",", ":"))
    assert row[4] == stored
    assert row[6] == "{}"
    assert row[-1] == entry_hash(
        seq, at, "run-1", "run_created", stored, actor.door, "{}", "0" * 64
    )
