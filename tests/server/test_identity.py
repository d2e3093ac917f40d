"""Who the provider's claims make someone, and what a session keeps of it.

A signed-in person is their name and groups; the role is the server's role
rules' at each request, never what they were at sign-in. A name matches
names only and a ``group:`` rule groups only. Found by an attacker with a
provider whose accounts chose their own usernames.
"""

from __future__ import annotations

import dataclasses

from treadle._server._identity import Sessions, SignIn
from treadle._values._actors import Actor, Role

RULES = (
    (Role.APPROVER, ("group:finance",)),
    (Role.OPERATOR, ("group:ops",)),
    (Role.ADMIN, ("ann",)),
)
SIGN_IN = SignIn(issuer="http://127.0.0.1:9", client_id="treadle", roles=RULES)


def test_a_person_named_like_a_group_gets_no_role_of_its_rule():
    # preferred_username "group:finance" signed in as an approver with no group at all.
    for name in ("group:finance", "group:ops", "role:admin", "cli:root@vm", "token:server"):
        refused = SIGN_IN.actor_of({"preferred_username": name, "groups": []})
        assert isinstance(refused, str), (name, refused)
        assert "names a" in refused
    maria = SIGN_IN.actor_of({"preferred_username": "maria", "groups": ["finance"]})
    assert isinstance(maria, Actor)
    assert maria.role is Role.APPROVER
    plain = SIGN_IN.actor_of({"preferred_username": "finance", "groups": []})
    assert isinstance(plain, Actor)
    assert plain.role is Role.VIEWER  # a name is no group


def test_a_name_or_group_the_record_cannot_keep_is_refused():
    for claims, said in (
        ({"preferred_username": "maria\napproved by admin"}, "holds a control character"),
        ({"preferred_username": "m" * 20_000}, "at most 200 characters"),
        ({"preferred_username": " maria"}, "starts or ends with a space"),
        ({"preferred_username": "maria", "groups": ["fin\x00ance"]}, "a group: 'fin\\x00ance'"),
    ):
        refused = SIGN_IN.actor_of(claims)
        assert isinstance(refused, str)
        assert refused.startswith("the provider's claims cannot sign anyone in: ")
        assert said in refused, refused


def test_a_session_has_the_role_the_rules_give_now_not_at_sign_in():
    # The role was frozen in the signed cookie for its twelve hours, whatever the rules said.
    sessions = Sessions("s3cret", 3600.0, SIGN_IN)
    ann = SIGN_IN.actor_of({"preferred_username": "ann", "groups": ["finance"]})
    assert isinstance(ann, Actor)
    session = sessions.issue(ann)
    assert sessions.signed(session, "page").role is Role.ADMIN
    demoted = dataclasses.replace(SIGN_IN, roles=((Role.VIEWER, ("ann",)),))
    later = Sessions("s3cret", 3600.0, demoted)  # the server restarted with new rules
    now = later.signed(session, "page")
    assert (now.name, now.role, now.groups) == ("ann", Role.VIEWER, frozenset({"finance"}))
    nobody = dataclasses.replace(SIGN_IN, roles=(), default_role=None)
    assert Sessions("s3cret", 3600.0, nobody).signed(session, "page") is None
