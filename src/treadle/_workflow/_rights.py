"""Who may act on a run: the role each control action needs, and who may answer a request.

The first step of every action through the door (:mod:`treadle._workflow._actions`).
Control actions need a role (operator to send, start, cancel, pause,
unpause, resume and fork; admin to delete, prune and migrate); an answer
needs what its request says (its approvers, four eyes against the run's
starter: :func:`~treadle._values._actors.answer_refusal`). An action taken
without an actor is the Python program's own, on its own store
(``python:USER@HOST``), which may do anything.
"""

from __future__ import annotations

import functools
import json
from types import MappingProxyType
from typing import TYPE_CHECKING

from treadle._engine._answers import request_rules
from treadle._exceptions import ActionRefusedError
from treadle._values._actors import Actor, Role, answer_refusal

if TYPE_CHECKING:
    from treadle._checkpoints._codec import RestoredRun
    from treadle._stores._store import RunRecord

ROLES = MappingProxyType(
    {
        "message": Role.OPERATOR,
        "start": Role.OPERATOR,
        "cancel": Role.OPERATOR,
        "pause": Role.OPERATOR,
        "unpause": Role.OPERATOR,
        "resume": Role.OPERATOR,
        "fork": Role.OPERATOR,
        "schedule": Role.OPERATOR,
        "delete": Role.ADMIN,
        "prune": Role.ADMIN,
        "migrate": Role.ADMIN,
    }
)
"""The role each control action needs (DESIGN §17); answers follow their request's rules."""


def actor_or_default(actor: Actor | None) -> Actor:
    """``actor``, or the Python program acting on its own store (``python:USER@HOST``)."""
    return _python_actor() if actor is None else actor


@functools.cache
def _python_actor() -> Actor:
    """:meth:`Actor.python`, asked once: the process's user and host do not change."""
    return Actor.python()


def check_right(actor: Actor, action: str, run_id: str | None) -> None:
    """Refuse ``actor`` an action its role does not allow.

    Raises:
        ActionRefusedError: naming the role the action needs; nothing changed.
    """
    needed = ROLES[action]
    if not actor.may(needed):
        reason = f"{actor.label} is a {actor.role.label}: {action} needs the {needed.label} role"
        raise ActionRefusedError(actor.label, action, run_id, reason)


def answer_rules(restored: RestoredRun, request_id: str) -> tuple[tuple[str, ...], bool]:
    """Who may answer a pending request (its approvers) and whether it needs four eyes."""
    try:
        waiting = restored.waits.find_request(request_id)
    except LookupError:
        return (), False
    return request_rules(waiting)  # kept on the wait, inside a sub-workflow too


def starter_of(run: RunRecord) -> tuple[str, ...]:
    """Who the run counts as started by, as its row keeps it (empty: unknown).

    The label of the actor that started it, and of the people it acted for
    (a schedule's tick: see :attr:`Actor.on_behalf_of`).
    """
    text = getattr(run, "started_by", None)
    if not text:
        return ()
    try:
        starter = Actor.from_json(json.loads(text))
    except ValueError:
        return ()
    return (starter.label, *starter.on_behalf_of)


def check_answer_right(
    actor: Actor, run: RunRecord, request_id: str, rules: tuple[tuple[str, ...], bool]
) -> None:
    """Refuse ``actor`` an answer its request does not let it give.

    Raises:
        ActionRefusedError: naming who may answer; nothing changed.
    """
    approvers, four_eyes = rules
    refusal = answer_refusal(actor, approvers, starter=starter_of(run), four_eyes=four_eyes)
    if refusal is not None:
        action = f"answering request {request_id!r}"
        raise ActionRefusedError(actor.label, action, run.run_id, refusal)


def started_by(actor: Actor | None) -> str:
    """What a new run's row keeps of who started it (the actor as JSON text).

    Raises:
        ActionRefusedError: ``actor``'s role may not start runs.
    """
    if actor is None:  # most runs: asked once
        return _python_started_by()
    check_right(actor, "start", None)
    return _encoded(actor)


@functools.cache
def _python_started_by() -> str:
    """What a run the Python program starts keeps of who started it (see :func:`started_by`)."""
    return started_by(_python_actor())


@functools.lru_cache(maxsize=256)
def _encoded(actor: Actor) -> str:
    """:meth:`Actor.encode`, once per actor: most runs are started by the same few."""
    return actor.encode()
