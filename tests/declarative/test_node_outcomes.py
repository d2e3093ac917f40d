"""A definition's node may set the run's outcome: ``outcome:`` (a name or a template)."""

from __future__ import annotations

import pytest

import treadle
from treadle import RunStatus
from treadle.errors import DefinitionError


async def test_a_node_sets_the_runs_outcome_once_it_has_run(write):
    from treadle.declarative import export_text  # noqa: PLC0415 - as treadle.load

    path = write(
        """\
        name: verdicts
        start: decide
        nodes:
          decide:
            step: output
            outcome: "{{message.verdict}}"
            outcome_summary: "{{message.why}}"
        """
    )
    workflow = treadle.load(path)
    done = await workflow.run({"verdict": "rejected", "why": "1200 EUR is over the limit"})
    assert done.status is RunStatus.COMPLETED
    assert (done.outcome, done.outcome_summary) == ("rejected", "1200 EUR is over the limit")
    text = export_text(workflow)
    assert "outcome: '{{message.verdict}}'" in text
    assert "outcome_summary: '{{message.why}}'" in text


async def test_a_node_that_waits_sets_no_outcome_until_it_runs_through(write):
    from declarative.steps import Decision  # noqa: PLC0415 - the test's own step module
    from treadle.stores import MemoryStore  # noqa: PLC0415

    path = write(
        """\
        name: expenses
        start: review
        nodes:
          review:
            executor: "declarative.steps:review"
            outcome: reviewed
          paid:
            step: output
            outcome: approved
        edges:
          - {from: review, to: paid}
        """
    )
    workflow = treadle.load(path)
    store = MemoryStore()
    waiting = await workflow.run({"amount": 1500}, store=store, run_id="exp-1")
    assert waiting.outcome is None  # review waits: it has not run through
    (asked,) = waiting.pending_requests
    done = await workflow.respond("exp-1", {asked.request_id: Decision(True)}, store=store)
    assert done.outcome == "approved"  # review set "reviewed", then paid set its own
    assert (await store.get_run("exp-1")).outcome == "approved"


def test_an_outcome_template_reading_nothing_declared_is_a_problem_of_the_node(write):
    path = write(
        """\
        name: verdicts
        start: decide
        nodes:
          decide:
            step: output
            outcome: "{{state.verdict}}"
        """
    )
    with pytest.raises(DefinitionError) as problem:
        treadle.load(path)
    assert "flow.yaml:6:14: {{state.verdict}}: no state key 'verdict'" in str(problem.value)
