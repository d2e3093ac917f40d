"""The log's texts written without an encoder's call are the encoder's texts, byte for byte.

The events every stored run logs (a suspension, a status change without an
error, an event with no fields of its own) are written by hand on the hot
path (``_checkpoints/_journal.py``); readers of the log, the webhooks' feed
and exports parse them, so each must be what the general path writes.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from treadle._checkpoints._journal import EventJournal, _json, entry_of
from treadle._engine._events import ExecutorSuspended, RunStarted, WorkflowEvent
from treadle.testing import FakeClock

_texts = st.text(max_size=30)


def _general(event: WorkflowEvent) -> str:
    common = {"run_id", "superstep", "executor_id", "sequence", "at"}
    own = {
        f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.name not in common
    }
    return _json(own)


@given(st.integers(0, 10**6), _texts, _texts)
def test_a_suspensions_text_is_the_encoders(position, wait, key):
    event = ExecutorSuspended(
        run_id="r", superstep=1, executor_id="x", position=position, wait=wait, key=key
    )
    assert entry_of(event, 0.0).data == _general(event)


def test_an_event_with_no_fields_of_its_own_is_an_empty_object():
    event = RunStarted(run_id="r", superstep=0)
    assert entry_of(event, 0.0).data == _general(event) == "{}"


@given(st.sampled_from(["running", "waiting", "completed", "awaiting_input"]) | _texts)
def test_a_status_change_without_an_error_is_the_encoders_text(status):
    journal = EventJournal(None, FakeClock())
    [entry] = journal.take(1, status, None)
    assert entry.kind == "status_changed"
    assert entry.data == _json({"status": status, "error": None})
