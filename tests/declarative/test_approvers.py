"""A definition says who may answer its nodes' requests: ``approvers:`` and ``four_eyes:``."""

from __future__ import annotations

import pytest

import treadle
from treadle import Actor, Role, RunStatus
from treadle.errors import DefinitionError


async def test_a_nodes_approvers_and_four_eyes_go_with_its_requests(write, tmp_path):
    from declarative.steps import Decision  # noqa: PLC0415 - the test's own step module
    from treadle.declarative import export_text  # noqa: PLC0415 - as treadle.load
    from treadle.stores import SqliteStore  # noqa: PLC0415 - as the other tests here

    path = write(
        """\
        name: expenses
        start: review
        four_eyes: true
        nodes:
          review:
            executor: "declarative.steps:review"
            approvers: [maria, "group:finance"]
          second:
            executor: "declarative.steps:review"
            four_eyes: false
        edges:
          - {from: review, to: second}
        """
    )
    workflow = treadle.load(path)
    store = SqliteStore(tmp_path / "runs.sqlite")
    try:
        waiting = await workflow.run({"amount": 1500}, store=store, run_id="exp-1")
        assert waiting.status is RunStatus.AWAITING_INPUT
        (asked,) = waiting.pending_requests
        assert (asked.approvers, asked.four_eyes) == (("maria", "group:finance"), True)
        maria = Actor("user", "maria", "python", Role.APPROVER)  # four eyes: not the starter
        answer = {asked.request_id: Decision(True)}
        again = await workflow.respond("exp-1", answer, store=store, actor=maria)
        (second,) = again.pending_requests
        assert (second.approvers, second.four_eyes) == ((), False)
    finally:
        await store.close()

    # Written back as a definition, the rules are kept.
    text = export_text(workflow)
    assert "four_eyes: true" in text
    assert "approvers:\n    - maria\n    - group:finance" in text
    assert "four_eyes: false" in text


def test_approvers_naming_no_one_are_a_problem_of_the_node(write):
    path = write(
        """\
        name: expenses
        start: review
        nodes:
          review:
            executor: "declarative.steps:review"
            approvers: ["role:boss", ""]
        """
    )
    with pytest.raises(DefinitionError) as caught:
        treadle.load(path)
    assert "flow.yaml:6:5: approver 'role:boss': 'boss' is not a role" in str(caught.value)
