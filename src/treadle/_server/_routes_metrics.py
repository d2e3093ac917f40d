"""``GET /metrics``: the server's Prometheus metrics, behind its access rules.

The route sits behind the access guard like every other (a named token, a
signed-in session, or the server's own token), and needs the viewer role:
metrics show how many runs of each workflow are in which status and how
long requests wait, no more than a viewer may list already, and a
read-only token (``treadle tokens create prometheus --role viewer``) is
what a scraper should hold. Each scrape reads the store's gauges at that
moment (:mod:`treadle._operations._gauges`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.routing import Route

from treadle._server._endpoints import actor_of
from treadle._server._json import ApiError
from treadle._values._actors import Role

if TYPE_CHECKING:
    from starlette.requests import Request

METRICS_ROLE = Role.VIEWER
"""The narrowest role that may read ``/metrics``."""


async def metrics(request: Request) -> Response:
    """The metrics of this server's process and its store, in Prometheus' text format."""
    actor = actor_of(request)
    if not actor.may(METRICS_ROLE):
        reason = f"{actor.label} is a {actor.role.label}: GET /metrics needs the viewer role"
        raise ApiError(403, reason, kind="Forbidden")
    exposed = request.app.state.served.metrics
    from treadle._operations._prometheus import CONTENT_TYPE  # noqa: PLC0415 - the extra

    return Response(await exposed.scrape(), media_type=CONTENT_TYPE)


def routes() -> list[Route]:
    """The metrics route."""
    return [Route("/metrics", metrics, methods=["GET"])]
