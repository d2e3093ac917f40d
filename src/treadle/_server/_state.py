"""What every route works with: the store, the served workflows, the driver of runs.

One :class:`Served` per server, made when its lifespan opens the store and
kept on ``app.state.served``. Runs are named in paths by their id or any
prefix of it that picks out one run (:meth:`Served.find_run`); a run's
workflow is one of those the server was started with (``--app``), found
by the name the run records, never imported from anything a request or a
stored run says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from treadle._exceptions import RunNotFoundError
from treadle._operations._run_names import runs_named, several
from treadle._server._json import ApiError

if TYPE_CHECKING:
    from starlette.requests import Request

    from treadle._operations._prometheus import PrometheusMetrics
    from treadle._server._driver import Driver
    from treadle._server._json import Redactor
    from treadle._server._settings import ServerSettings
    from treadle._stores._store import RunRecord, Store
    from treadle._workflow._versions import Hosted
    from treadle._workflow._workflow import Workflow


@dataclass(frozen=True, slots=True)
class Served:
    """The server's running parts.

    Attributes:
        settings: What it was started with.
        store: Its store, open for the server's lifetime.
        workflows: The workflows it serves, by name.
        driver: What advances runs (see :mod:`treadle._server._driver`).
        redactor: Hides the token and store passwords in what it sends.
        metrics: What ``GET /metrics`` exposes (this process's and the store's).
    """

    settings: ServerSettings
    store: Store
    workflows: Hosted
    driver: Driver
    redactor: Redactor
    metrics: PrometheusMetrics

    async def find_run(self, given: str) -> RunRecord:
        """The run named by its id, or by a prefix of its id that names one run.

        Raises:
            RunNotFoundError: No run has that id or prefix (404).
            ApiError: Several runs share the prefix (400, some named).
        """
        named = await runs_named(self.store, given)
        if named is None:
            raise RunNotFoundError(given)  # a run's own id, the run gone: no one else's prefix
        if not isinstance(named, list):
            return named
        if len(named) == 1:
            return named[0]
        if not named:
            raise RunNotFoundError(given)
        raise ApiError(400, several(given, named))

    def workflow(self, name: str, version: int | None = None) -> Workflow:
        """The served workflow of this name: version ``version``, else the newest.

        Raises:
            ApiError: 404, this server does not serve it (the ones it does named).
        """
        found = self.workflows.get(name, version)
        if found is None and name in self.workflows:
            served = ", ".join(map(str, self.workflows.versions(name)))
            raise ApiError(
                404,
                f"this server does not serve version {version} of {name!r} (it serves: {served})",
                kind="WorkflowNotFoundError",
            )
        if found is None:
            served = ", ".join(self.workflows.names()) or "none"
            raise ApiError(
                404,
                f"this server does not serve a workflow {name!r} (it serves: {served}; "
                f"start it with --app for that workflow's module)",
                kind="WorkflowNotFoundError",
            )
        return found

    def workflow_of(self, run: RunRecord) -> Workflow:
        """The served version of ``run``'s workflow: the one the run goes on with.

        A run queued without a version (0) takes the newest, as a worker would.

        Raises:
            ApiError: 404, this server does not serve that version.
        """
        return self.workflow(run.workflow, run.version or None)


def served_of(request: Request) -> Served:
    """The server's parts, as its lifespan left them on the app."""
    served: Served = request.app.state.served
    return served
