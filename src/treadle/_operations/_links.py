"""Signed single-use answer links: one request, one principal, an expiry.

A link is made for a person (``treadle links create RUN REQUEST --for
maria --expires 2h``) and sent by mail or chat; whoever opens it sees the
question (``GET /answer/TOKEN``) and answers it once (``POST``) as that
person, door ``link``. The token is signed with a key the store keeps
(:mod:`treadle._stores._outbox`), so a changed token is refused; the store
keeps each link's nonce and marks it used by its one use, in a write of
its own before the answer is delivered, so two uses at once get one
answer between them. An answer refused for its content (it does not fit
the request's type) gives the use back.

Refused, each with nothing changed: a tampered token, an expired link, a
link used already, and a link opened by someone signed in as another
principal.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from treadle._exceptions import (
    LinkRefusedError,
    UnknownRequestError,
)
from treadle._operations._audit import action_sentence
from treadle._operations._schemas import describe_request
from treadle._operations._webhooks import outbox_of
from treadle._stores._answer_links import AnswerLink, link_claims, link_token, new_nonce
from treadle._values._actors import Actor, Role, names_problem
from treadle._workflow._logged import asked_event

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._stores._store import EventLog, Store
    from treadle._workflow._workflow import Workflow


async def create_link(
    store: Store,
    run_id: str,
    request_id: str,
    principal: str,
    *,
    expires_in: float,
    created_by: str,
    groups: Sequence[str] = (),
) -> tuple[str, AnswerLink]:
    """Make a link answering ``request_id`` of ``run_id`` as ``principal``; its token and record.

    ``groups``: the principal's groups the answer counts with (signed into
    the token), for a request whose approvers name a group.

    Raises:
        ValueError: ``principal`` or a group is no name (blank, say: see
            ``name_problem``), or ``expires_in`` is not positive.
        RunNotFoundError: No such run.
        UnknownRequestError: The run never asked it, or it was answered already.
    """
    problem = names_problem(principal, groups)
    if problem is not None:
        raise ValueError(problem)
    if expires_in <= 0:
        raise ValueError("an answer link needs a positive lifetime")
    await _check_waiting(store, run_id, request_id)
    outbox = outbox_of(store)
    now = time.time()
    link = AnswerLink(
        new_nonce(),
        run_id,
        request_id,
        principal,
        now + expires_in,
        now,
        created_by,
        groups=tuple(sorted(set(groups))),
    )
    await outbox.add_link(link)
    return link_token(link, await outbox.link_key()), link


async def _check_waiting(store: Store, run_id: str, request_id: str) -> None:
    """Refuse a link to a request the run's log shows never asked, or settled already.

    Read from the log, so the command line makes links without the run's code.

    Raises:
        RunNotFoundError: No such run.
        UnknownRequestError: The run never asked it, or it was answered or timed out.
    """
    for event in await store.read_events(run_id):
        if event.data.get("request_id") != request_id:
            continue
        if event.kind in ("request_answered", "request_timed_out"):
            who = await answered_by(store, run_id, request_id)
            raise UnknownRequestError(
                f"request {request_id!r} of run {run_id!r} was answered already: {who}"
            )
    # A fork's requests were asked in its parent's log (the fork's starts with run_forked).
    if await asked_event(store, await store.get_run(run_id), request_id) is None:
        raise UnknownRequestError(f"run {run_id!r} never asked {request_id!r}")


async def open_link(store: Store, token: str, *, signed_in: str | None = None) -> AnswerLink:
    """The link a token names, if it may be used now by whoever holds it.

    Args:
        store: The store that made it.
        token: The link's token.
        signed_in: The principal signed in where it is opened (``None``:
            nobody); another than the link's is refused.

    Raises:
        LinkRefusedError: Tampered, unknown, expired, used, or not ``signed_in``'s.
    """
    outbox = outbox_of(store)
    claims = link_claims(token, await outbox.link_key())
    link = None if claims is None else await outbox.link(claims[0])
    if link is None or claims is None:
        raise LinkRefusedError(
            "this answer link is not valid (changed, or not made here)", "invalid"
        )
    if names_problem(link.principal, claims[1]) is not None:  # made before names were checked
        raise LinkRefusedError(
            "this answer link names no one it could answer as; ask for a new one", "invalid"
        )
    if link.used_at is not None:
        raise LinkRefusedError(
            f"this answer link was used already, by {link.used_by} at {_when(link.used_at)}",
            "used",
        )
    if link.expires_at <= time.time():
        raise LinkRefusedError(f"this answer link expired at {_when(link.expires_at)}", "expired")
    if signed_in is not None and signed_in != link.principal:
        raise LinkRefusedError(
            f"this answer link is {link.principal}'s; you are signed in as {signed_in}",
            "not_yours",
        )
    return dataclasses.replace(link, groups=claims[1])


async def answer_by_link(
    store: Store,
    token: str,
    value: Any,
    deliver: Callable[[AnswerLink, Any], Awaitable[object]],
    *,
    signed_in: str | None = None,
) -> AnswerLink:
    """Use a link once: check it, mark it used, and answer through ``deliver``.

    ``deliver`` answers the link's request as the link's principal (door
    ``link``) and raises what the answer door raises. Only a request that
    waits no longer (another answer won, it expired) keeps the link used:
    every other failure gives the use back, whether the answer was refused
    for its content or nothing could take it (the run's workflow not
    served here, the store failing, the client gone), so the person can
    answer again.

    Raises:
        LinkRefusedError: See :func:`open_link`; also a use lost to another use.
    """
    link = await open_link(store, token, signed_in=signed_in)
    outbox = outbox_of(store)
    if not await outbox.use_link(link.nonce, time.time(), link.principal):
        raise LinkRefusedError("this answer link was used already, just now", "used")
    try:
        await deliver(link, value)
    except UnknownRequestError:  # the request waits no longer: the link is spent
        raise
    except BaseException:  # nothing answered: the use is given back
        await outbox.release_link(link.nonce)
        raise
    return link


async def link_question(store: Store, link: AnswerLink, workflow: Workflow) -> dict[str, Any]:
    """The request ``link`` answers, as the API describes one (with its answer's schema).

    Raises:
        LinkRefusedError: The request waits no longer (``answered``: saying
            who answered it, when and how, as the run's record has it).
    """
    try:
        return await pending_request(store, workflow, link.run_id, link.request_id)
    except UnknownRequestError:
        who = await answered_by(store, link.run_id, link.request_id)
        said = f": {who}" if who else ""
        raise LinkRefusedError(
            f"request {link.request_id} of run {link.run_id} waits no longer{said}", "answered"
        ) from None


async def pending_request(
    store: Store, workflow: Workflow, run_id: str, request_id: str
) -> dict[str, Any]:
    """A request of a run that waits for its answer, as the API describes one.

    Raises:
        UnknownRequestError: The run waits for no such request (never asked,
            answered, or its answer waiting to be applied).
    """
    record = await store.load_checkpoint(run_id)
    restored = workflow.codec.decode(record, run_id=run_id)
    delivered = {i.target for i in await store.inbox(run_id) if i.kind == "answer"}
    for request in restored.waits.pending_requests():
        if request.request_id == request_id and request.request_id not in delivered:
            return describe_request(workflow, run_id, request)
    raise UnknownRequestError(f"run {run_id} waits for no request {request_id!r}")


async def answered_by(store: EventLog, run_id: str, request_id: str) -> str | None:
    """Who answered a request, as the run's log records it: ``maria approved at 10:02 (page)``."""
    for event in reversed(await store.read_events(run_id)):
        settled = event.kind in ("request_answered", "request_timed_out")
        if settled and event.data.get("request_id") == request_id:
            return action_sentence(event.kind, event.data, event.at)
    return None


def link_actor(link: AnswerLink) -> Actor:
    """Who answers through ``link``: its principal, door ``link``, an approver, in its groups."""
    return Actor("link", link.principal, "link", Role.APPROVER, frozenset(link.groups))


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
