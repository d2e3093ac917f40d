"""Actors and roles: who may answer a request (DESIGN §17)."""

from __future__ import annotations

import pytest

from treadle import Actor, Role
from treadle._values._actors import answer_refusal, check_approvers

MARIA = Actor("user", "maria", "page", Role.APPROVER, frozenset({"finance"}))
BOB = Actor("user", "bob", "page", Role.VIEWER)
OPS = Actor("token", "ops-bot", "api", Role.OPERATOR)


def test_roles_hold_the_rights_of_the_narrower_ones() -> None:
    assert OPS.may(Role.APPROVER)
    assert OPS.may(Role.VIEWER)
    assert not OPS.may(Role.ADMIN)
    assert not BOB.may(Role.APPROVER)


def test_a_role_name_that_is_no_role_is_refused_naming_the_roles() -> None:
    with pytest.raises(ValueError, match=r"'boss' is not a role .*viewer, approver, operator"):
        Role.parse("boss")


def test_without_approvers_anyone_with_the_approver_role_may_answer() -> None:
    assert answer_refusal(MARIA) is None
    assert answer_refusal(OPS) is None
    refusal = answer_refusal(BOB)
    assert refusal == "bob is a viewer: answering needs the approver role"


@pytest.mark.parametrize(
    ("approvers", "allowed"),
    [
        (["maria"], {"maria"}),
        (["group:finance"], {"maria"}),
        (["role:operator"], {"token:ops-bot"}),
        (["token:ops-bot"], {"token:ops-bot"}),
        (["ann", "group:legal"], set()),
    ],
)
def test_named_approvers_are_the_only_ones_who_may(approvers: list[str], allowed: set[str]) -> None:
    for actor in (MARIA, BOB, OPS):
        refusal = answer_refusal(actor, approvers)
        assert (refusal is None) == (actor.label in allowed), (actor, refusal)
        if refusal is not None:
            assert refusal.endswith(f"only {', '.join(approvers)} may")


def test_four_eyes_refuses_the_starter_by_any_door() -> None:
    starter = Actor.cli().label  # cli:USER@HOST
    same_person = Actor("user", starter.split(":", 1)[1].split("@")[0], "page", Role.ADMIN)
    refusal = answer_refusal(same_person, starter=starter, four_eyes=True)
    assert refusal is not None
    assert "four eyes" in refusal
    assert answer_refusal(same_person, starter=starter, four_eyes=False) is None
    assert answer_refusal(MARIA, starter=starter, four_eyes=True) is None


def test_an_actor_round_trips_through_its_record() -> None:
    assert Actor.from_json(MARIA.to_json()) == MARIA
    assert MARIA.to_json()["label"] == "maria"
    assert Actor.cli().label.startswith("cli:")
    with pytest.raises(ValueError, match="not an actor's record"):
        Actor.from_json({"name": "x"})


def test_bad_actors_and_approvers_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="door 'fax'"):
        Actor("user", "maria", "fax")
    with pytest.raises(ValueError, match="actor kind 'robot'"):
        Actor("robot", "r2", "api")
    with pytest.raises(ValueError, match="approver 'role:boss': 'boss' is not a role"):
        check_approvers(["role:boss"])
    with pytest.raises(ValueError, match="an approver must be"):
        check_approvers([""])
    assert check_approvers([" maria ", "group:finance"]) == ("maria", "group:finance")
