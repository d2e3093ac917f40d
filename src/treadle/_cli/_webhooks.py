"""``treadle webhooks add | list | remove | dead | resend`` and ``treadle links create``.

Endpoints live in the store (:mod:`treadle._stores._outbox`), so every
``treadle serve`` and ``treadle worker`` on it sends to them; ``add``
prints the endpoint's signing secret (Standard Webhooks ``whsec_...``),
which a receiver verifies messages with. Dead letters (messages past their
endpoint's attempts) are listed by ``dead`` and sent again by ``resend``.
``links create`` prints a signed single-use answer link for one request
and one person (see :mod:`treadle._operations._links`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from treadle._cli._execute import execute, refuse
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_group, command_set
from treadle._cli._tokens import parse_duration
from treadle._cli._views import out, when
from treadle._operations._commands import get_run
from treadle._operations._links import create_link
from treadle._operations._shapes import with_iso_times
from treadle._operations._webhooks import message_json, outbox_of
from treadle._stores._answer_links import LinkOffer
from treadle._stores._outbox import EVENT_TYPES, new_endpoint
from treadle._values._actors import Actor, names_problem

if TYPE_CHECKING:
    from treadle._stores._answer_links import AnswerLink
    from treadle._stores._store import Store

cli = command_set()

webhooks_app = command_group(
    "Outbound webhooks (Standard Webhooks): add, list, remove, dead, resend."
)
cli.add_typer(webhooks_app, name="webhooks")
links_app = command_group("Signed single-use answer links: create.")
cli.add_typer(links_app, name="links")


@webhooks_app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="Where messages are POSTed (http or https).")],
    events: Annotated[
        list[str] | None,
        typer.Option(
            "--event", help=f"A type it gets (repeatable; default all: {', '.join(EVENT_TYPES)})."
        ),
    ] = None,
    attempts: Annotated[
        int, typer.Option("--attempts", min=1, help="Tries before a dead letter.")
    ] = 12,
    backoff: Annotated[
        float,
        typer.Option(
            "--backoff", min=0.001, help="Seconds before the first retry (then doubling)."
        ),
    ] = 2.0,
    deadline_lead: Annotated[
        float, typer.Option("--deadline-lead", min=0, help="Seconds before a deadline to warn.")
    ] = 600.0,
    principal: Annotated[
        str | None,
        typer.Option("--for", help="Put in each request.created an answer link for this person."),
    ] = None,
    groups: Annotated[
        list[str] | None,
        typer.Option("--group", help="A group of that person's the link answers in (repeatable)."),
    ] = None,
    link_expires: Annotated[
        str, typer.Option("--link-expires", help="How long each link works: 2h, 1d.")
    ] = "1d",
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The server's address the links point at (with --for)."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add an endpoint and print its signing secret; events committed from now on reach it.

    With --for maria --base-url https://treadle.example.com, each
    request.created message carries data.answer_link: a signed single-use
    link answering that request as maria (the same link on every retry).
    """
    offer = None
    if principal is not None:
        if problem := names_problem(principal, groups or ()):
            refuse(escape(f"--{problem.replace('groups:', 'group:', 1)}"))
        if not base_url:
            refuse("--for needs --base-url: the server's address the answer links point at")
        try:
            lifetime = parse_duration(link_expires)
        except ValueError as error:
            refuse(escape(str(error)))
        offer = LinkOffer(principal, tuple(sorted(set(groups or ()))), lifetime, base_url)
    elif groups or base_url:
        refuse("--group and --base-url go with --for: the person the answer links are for")
    try:
        endpoint = new_endpoint(
            url,
            events or EVENT_TYPES,
            now=time.time(),
            attempts=attempts,
            backoff=backoff,
            deadline_lead=deadline_lead,
            links=offer,
        )
    except ValueError as error:
        refuse(escape(str(error)))
    execute(store, lambda s: outbox_of(s).add_endpoint(endpoint), creates=True)
    if as_json:
        out.print_json(data=endpoint.to_json(with_secret=True))
        return
    out.print(f"webhook {endpoint.endpoint_id} -> {escape(url)} ({', '.join(endpoint.events)})")
    if offer is not None:
        out.print(f"request.created carries an answer link for {escape(offer.principal)}")
    out.print(f"signing secret: {endpoint.secret}", highlight=False, soft_wrap=True)


@webhooks_app.command("list")
def list_endpoints(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the endpoints (never their secrets)."""
    endpoints = execute(store, lambda s: outbox_of(s).endpoints())
    if as_json:
        out.print_json(
            data={"webhooks": [with_iso_times(e.to_json(), ("created_at",)) for e in endpoints]}
        )
        return
    if not endpoints:
        out.print("no webhooks (treadle webhooks add URL adds one)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("ID", "URL", "EVENTS", "ATTEMPTS", "LINKS FOR", "ADDED"):
        table.add_column(column)
    for e in endpoints:
        table.add_row(
            e.endpoint_id,
            escape(e.url),
            ", ".join(e.events),
            str(e.attempts),
            escape(e.links.principal) if e.links else "",
            when(e.created_at),
        )
    out.print(table)


@webhooks_app.command("remove")
def remove(
    endpoint_id: Annotated[str, typer.Argument(help="The endpoint's id (wh_...).")],
    store: StoreOption = None,
) -> None:
    """Remove an endpoint and the messages still waiting for it."""
    if not execute(store, lambda s: outbox_of(s).remove_endpoint(endpoint_id)):
        refuse(f"no webhook {escape(endpoint_id)!r} (treadle webhooks list shows them)")
    out.print(f"removed webhook {escape(endpoint_id)}")


@webhooks_app.command("dead")
def dead(
    store: StoreOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    as_json: JsonOption = False,
) -> None:
    """List dead letters: messages their endpoint did not take within its attempts."""
    found = execute(store, lambda s: outbox_of(s).messages("dead", limit))
    if as_json:
        out.print_json(data={"dead": [message_json(m) for m in found]})
        return
    if not found:
        out.print("no dead letters")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("ID", "TYPE", "RUN", "SEQ", "ENDPOINT", "ATTEMPTS", "LAST ERROR"):
        table.add_column(column)
    for m in found:
        table.add_row(
            str(m.message_id),
            m.event_type,
            escape(m.run_id),
            str(m.seq),
            m.endpoint_id,
            str(m.attempts),
            escape(m.last_error or ""),
        )
    out.print(table)


@webhooks_app.command("resend")
def resend(
    message_ids: Annotated[list[int] | None, typer.Argument(help="Dead letters' ids.")] = None,
    all_dead: Annotated[bool, typer.Option("--all-dead", help="Every dead letter.")] = False,
    store: StoreOption = None,
) -> None:
    """Send dead letters again (with their webhook-id unchanged), from now on."""
    if bool(message_ids) == all_dead:
        refuse("name dead letters by id, or give --all-dead (not both)")
    chosen = None if all_dead else list(message_ids or ())
    count = execute(store, lambda s: outbox_of(s).resend(chosen, time.time()))
    out.print(f"{count} dead letter{'s' if count != 1 else ''} queued to send again")


@links_app.command("create")
def create(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    request_id: Annotated[str, typer.Argument(help="The request the link answers.")],
    principal: Annotated[str, typer.Option("--for", help="Who answers through it.")],
    expires: Annotated[
        str, typer.Option("--expires", help="It stops working after: 2h, 1d.")
    ] = "1d",
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The server's address, e.g. https://treadle.example.com."),
    ] = None,
    groups: Annotated[
        list[str] | None,
        typer.Option(
            "--group", help="A group of the person's its answer counts in (repeat for more)."
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Print a signed link answering one request once, as one person, before it expires.

    A request whose approvers name a group (group:finance) takes the link's
    answer only if the link was made with that group (--group finance).
    """
    try:
        lifetime = parse_duration(expires)
    except ValueError as error:
        refuse(escape(str(error)))
    if problem := names_problem(principal, groups or ()):
        refuse(escape(f"--{problem.replace('groups:', 'group:', 1)}"))
    maker = Actor.cli().label

    async def make(s: Store) -> tuple[str, AnswerLink]:
        full = (await get_run(s, run_id)).run_id  # given a prefix, its run's full id
        return await create_link(
            s, full, request_id, principal, expires_in=lifetime, created_by=maker,
            groups=groups or (),
        )  # fmt: skip

    token, link = execute(store, make)
    run_id = link.run_id
    address = f"{base_url.rstrip('/')}/answer/{token}" if base_url else f"/answer/{token}"
    out.print(
        f"answer link for {escape(principal)} to {escape(request_id)} of {escape(run_id)},"
        f" until {when(link.expires_at)}:",
        highlight=False,
    )
    out.print(address, highlight=False, soft_wrap=True)
