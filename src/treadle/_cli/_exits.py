"""How a ``treadle`` command ends: its exit code says where the run it drove or watched is.

* 0 — done (a run that completed, a listing);
* 1 — the run failed, stalled or was cancelled;
* 2 — bad input: unknown run or request, malformed, oversized or too
  deeply nested JSON, an import path that does not load, a refused or
  already given answer, a run another process owns (without ``--wait``), a
  run-id prefix several runs share, a ``delete`` refused or not confirmed;
  nothing was changed (:func:`treadle._cli._execute.refuse`);
* 3 — the run rests (it awaits input or waits on a timer) or is paused;
* 130 — interrupted (Ctrl-C): ``run``, ``resume``, ``respond`` and ``send``
  *detach* from their run rather than cancel it. It stays as last committed,
  resumable by ``treadle resume`` or a ``treadle worker``; only ``treadle
  cancel`` cancels (:mod:`treadle._cli._stopping`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from treadle._cli._event_views import print_settled
from treadle._cli._views import print_result
from treadle._engine._result import RunStatus

if TYPE_CHECKING:
    from treadle._cli._flags import RunFlags
    from treadle._engine._result import RunResult
    from treadle._operations._run_view import RunView

EXIT_FOR_STATUS = MappingProxyType(
    {
        RunStatus.COMPLETED: 0,
        RunStatus.AWAITING_INPUT: 3,
        RunStatus.WAITING: 3,
        RunStatus.FAILED: 1,
        RunStatus.STALLED: 1,
        RunStatus.CANCELLED: 1,
        RunStatus.PAUSED: 3,
        RunStatus.RUNNING: 0,
        RunStatus.PENDING: 0,
        RunStatus.QUEUED: 0,
    }
)
"""The exit code for a run's status: a run's status *is* a command's outcome."""


def exit_with_result(
    result: RunResult, requests: list[dict[str, Any]], flags: RunFlags
) -> NoReturn:
    """Print a run's outcome (with how to answer what it asks) and exit with its status's code."""
    print_result(result, as_json=flags.as_json, requests=requests)
    raise typer.Exit(EXIT_FOR_STATUS[result.status])


def exit_where_settled(view: RunView, *, as_json: bool) -> NoReturn:
    """Print where a followed run settled and exit with its status's code."""
    print_settled(view, as_json=as_json)
    raise typer.Exit(exit_code_of(view))


def exit_code_of(view: RunView) -> int:
    """The exit code for where a run stands now."""
    return EXIT_FOR_STATUS[RunStatus(view.run.status)]
