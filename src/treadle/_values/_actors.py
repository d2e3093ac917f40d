"""Who acts on a run, through which door, and with which rights.

Every action that changes a run (an answer, a message, a cancel, a pause, a
fork, a delete, a migration, a start) is taken by an :class:`Actor`, and the
run's record keeps it: a decision in a workflow whose point is a person's
decision is only worth its record. An actor is a plain, frozen value so it
can travel from the door it came in by (the page, the HTTP API, the CLI,
Python, the workers' client, a signed link) down to the store that writes
it beside the action's effect, in one transaction.

Rights come from roles, narrowest first (DESIGN §17): a ``viewer`` reads;
an ``approver`` also answers the requests addressed to it; an ``operator``
also starts, sends, cancels, pauses, unpauses, resumes and forks; an
``admin`` also deletes, prunes, migrates and manages tokens. A request may
name who may answer it (``approvers``: user names, ``role:R`` or
``group:G``), and a run may forbid its starter from answering its own
requests (four eyes); :func:`answer_refusal` says why an actor may not.
"""

from __future__ import annotations

import enum
import getpass
import json
import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from treadle._values._text import unstorable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


class Role(enum.IntEnum):
    """What an actor may do, each role holding every right of the ones before it."""

    VIEWER = 1
    APPROVER = 2
    OPERATOR = 3
    ADMIN = 4

    @classmethod
    def parse(cls, text: str) -> Role:
        """The role a name gives (``"approver"``), refusing anything else by name.

        Raises:
            ValueError: ``text`` names no role (the message lists them).
        """
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(role.label for role in cls)
            msg = f"{text!r} is not a role (roles: {names})"
            raise ValueError(msg) from None

    @property
    def label(self) -> str:
        """The role's name as people write it (``"approver"``)."""
        return self.name.lower()


DOORS = frozenset({"page", "api", "cli", "python", "client", "link", "worker", "timer", "schedule"})
"""The ways an action reaches a run; the record says which one each took."""

KINDS = frozenset({"user", "token", "cli", "python", "service", "link"})
"""What an actor is: a person signed in, a named API token, the CLI's OS user,
a Python program, a service (worker, timer, schedule), or a signed link's holder."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who takes an action on a run, through which door, and with which rights.

    Attributes:
        kind: What the actor is (one of :data:`KINDS`).
        name: Who it is within its kind: a user's name (``"maria"``), a token's
            name, ``USER@HOST`` for the CLI and Python, a service's name.
        door: How this action came in (one of :data:`DOORS`).
        role: Its rights (:class:`Role`).
        groups: The groups a provider's claims put a signed-in person in.
        on_behalf_of: For a service acting for people (a schedule's tick),
            their labels: who set it going (its schedule's creator, who
            triggered or backfilled it). A run such a service starts counts
            as started by each of them too, for four eyes. A fork's forker
            acts on behalf of its parent's starters in the same way.
    """

    kind: str
    name: str
    door: str
    role: Role = Role.VIEWER
    groups: frozenset[str] = field(default_factory=frozenset)
    on_behalf_of: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            msg = f"actor kind {self.kind!r} is not one of {sorted(KINDS)}"
            raise ValueError(msg)
        if self.door not in DOORS:
            msg = f"door {self.door!r} is not one of {sorted(DOORS)}"
            raise ValueError(msg)
        if not self.name:
            msg = "an actor needs a name"
            raise ValueError(msg)

    @property
    def label(self) -> str:
        """How the record names the actor: ``maria`` for a person, ``cli:ann@box`` otherwise."""
        return self.name if self.kind == "user" else f"{self.kind}:{self.name}"

    def may(self, role: Role) -> bool:
        """Whether the actor holds ``role``'s rights."""
        return self.role >= role

    def through(self, door: str) -> Actor:
        """The same actor coming in by another door (the page, a link)."""
        return Actor(self.kind, self.name, door, self.role, self.groups, self.on_behalf_of)

    def to_json(self) -> dict[str, Any]:
        """The actor as the record keeps it (plain JSON)."""
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "label": self.label,
            "door": self.door,
            "role": self.role.label,
            "groups": sorted(self.groups),
        }
        if self.on_behalf_of:  # only then: records made before it keep their text (and hash)
            data["on_behalf_of"] = list(self.on_behalf_of)
        return data

    def encode(self) -> str:
        """:meth:`to_json` as compact text, for a store's column."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Actor:
        """The actor :meth:`to_json` gave.

        Raises:
            ValueError: ``data`` is not an actor's record.
        """
        try:
            return cls(
                kind=str(data["kind"]),
                name=str(data["name"]),
                door=str(data["door"]),
                role=Role.parse(str(data.get("role", "viewer"))),
                groups=frozenset(str(g) for g in data.get("groups", ())),
                on_behalf_of=tuple(str(who) for who in data.get("on_behalf_of", ())),
            )
        except (KeyError, TypeError, AttributeError) as error:
            msg = f"not an actor's record: {data!r}"
            raise ValueError(msg) from error

    @classmethod
    def cli(cls) -> Actor:
        """The CLI's user when it opens the store itself: ``cli:USER@HOST``, an admin.

        Whoever can open the store's file or database can change it whatever
        the server's rules say, so the CLI holds every right; the record still
        says who it was.
        """
        return cls("cli", _user_at_host(), "cli", Role.ADMIN)

    @classmethod
    def python(cls) -> Actor:
        """A Python program acting on its own store: ``python:USER@HOST``, an admin."""
        return cls("python", _user_at_host(), "python", Role.ADMIN)

    @classmethod
    def service(cls, name: str, door: str = "worker", on_behalf_of: tuple[str, ...] = ()) -> Actor:
        """A service acting on its own (a takeover, a timer), or for people (a schedule)."""
        return cls("service", name, door, Role.OPERATOR, on_behalf_of=on_behalf_of)


def _user_at_host() -> str:
    """``USER@HOST`` of this process (the uid when it has no user name)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container without a passwd entry for its uid
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def answer_refusal(
    actor: Actor,
    approvers: Iterable[str] = (),
    *,
    starter: str | Sequence[str] | None = None,
    four_eyes: bool = False,
) -> str | None:
    """Why ``actor`` may not answer a request, or ``None`` when it may.

    Args:
        actor: Who is answering.
        approvers: Who the request names as allowed to answer it: user names,
            ``role:R`` (anyone holding role R's rights) or ``group:G``.
            Empty: anyone with the approver role.
        starter: The label of the actor that started the run, or the labels
            of all it counts as started by (see :attr:`Actor.on_behalf_of`).
        four_eyes: Whether the run's starter is refused.

    Returns:
        A sentence naming who may answer, or ``None``.
    """
    starters = (starter,) if isinstance(starter, str) else tuple(starter or ())
    if four_eyes and any(_same_person(actor.label, who) for who in starters):
        return f"{actor.label} started this run, and its requests need four eyes: someone else"
    named = tuple(approvers)
    if not named:
        if actor.may(Role.APPROVER):
            return None
        return f"{actor.label} is a {actor.role.label}: answering needs the approver role"
    for entry in named:
        if entry.startswith("role:"):
            try:
                if actor.may(Role.parse(entry.removeprefix("role:"))):
                    return None
            except ValueError:
                continue
        elif entry.startswith("group:"):
            if entry.removeprefix("group:") in actor.groups:
                return None
        elif entry in {actor.name, actor.label}:
            return None
    return f"{actor.label} may not answer this request: only {', '.join(named)} may"


_AT_HOST = frozenset({"cli", "python"})
"""Kinds whose actors are named ``USER@HOST`` (the OS user, and the machine)."""


def _same_person(label: str, starter: str) -> bool:
    """Whether two actor labels name the same person (``cli:ann@box`` and ``ann``).

    A person signed in, a token, a link's holder are named whole (a name may be
    a mail address: ``ann@example.com`` is not ``ann@partner.org``). The CLI's
    and Python's actors are ``USER@HOST``, whose user is all they say of the
    person: against one of them, names compare by what comes before ``@``, so
    four eyes refuses rather than guess (``cli:ann@box`` is ``ann@example.com``).
    """

    def person(text: str) -> tuple[str, bool]:
        kind, colon, name = text.partition(":")
        return (name, kind in _AT_HOST) if colon else (text, False)

    if label == starter:
        return True
    (one, one_at_host), (other, other_at_host) = person(label), person(starter)
    if one_at_host or other_at_host:
        return one.split("@", 1)[0] == other.split("@", 1)[0]
    return one == other


def check_approvers(approvers: Iterable[str]) -> tuple[str, ...]:
    """``approvers`` as a request keeps them, refusing an entry that can match no one.

    Raises:
        TypeError: ``approvers`` is one string, not a list of them.
        ValueError: An entry is empty, or names a role that does not exist.
    """
    if isinstance(approvers, str):  # one name is not a list of its letters
        msg = f"approvers takes a list of names, not one string: {approvers!r}"
        raise TypeError(msg)
    checked: list[str] = []
    for entry in approvers:
        if not isinstance(entry, str) or not entry.strip():
            msg = f"an approver must be a user name, 'role:R' or 'group:G', not {entry!r}"
            raise ValueError(msg)
        if entry.startswith("role:"):
            try:
                Role.parse(entry.removeprefix("role:"))
            except ValueError as error:
                msg = f"approver {entry!r}: {error}"
                raise ValueError(msg) from None
        checked.append(entry.strip())
    return tuple(checked)


MAX_NAME = 200
"""The longest name of a person or group a link or an endpoint's links are made for."""


def name_problem(what: str, name: object) -> str | None:
    """Why ``name`` cannot name a person (or a group) on the record; ``None``: it can.

    A link answers as the person it names, and its answer is recorded in
    that name: a blank one would record a decision by no one, and a link
    for ``""`` failed only when it was used. ``what`` is where the name
    was given (``for``, ``groups``).
    """
    if not isinstance(name, str) or not name.strip():
        return f"{what}: a name, not {name!r}"
    if name != name.strip():
        return f"{what}: {name!r} starts or ends with a space"
    if len(name) > MAX_NAME:
        return f"{what}: a name of at most {MAX_NAME} characters, not {len(name):,}"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):  # noqa: PLR2004 - C0, DEL, C1
        return f"{what}: {name!r} holds a control character"
    return unstorable(what, name)


def names_problem(
    principal: object, groups: Iterable[object], said: tuple[str, str] = ("for", "groups")
) -> str | None:
    """Why ``principal`` in ``groups`` cannot stand on the record (a link is made for them).

    ``said``: what the name and each group are called where they were
    given (a link's ``for`` and ``groups``; a sign-in's claims).
    """
    name_is, group_is = said
    return name_problem(name_is, principal) or next(
        (found for group in groups if (found := name_problem(group_is, group))), None
    )
