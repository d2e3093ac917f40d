"""``treadle check-upgrade``: replay a store's recorded runs against new code.

Before deploying a changed workflow, an operator asks whether runs already
under way will go on the same way: each recorded superstep is replayed from
its checkpoint with the new code (in memory; the store is only read) and
compared with what was recorded (:func:`treadle.testing.replay`). Exit 0
when every run replays; 1, with the first divergence of each run that does
not, otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from treadle._cli._app import app
from treadle._cli._execute import execute
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._views import out
from treadle._operations._inputs import load_workflow
from treadle.testing import ReplayReport, replay

if TYPE_CHECKING:
    from treadle._stores._store import Store


@app.command("check-upgrade")
def check_upgrade(
    app_: Annotated[str, typer.Option("--app", help="The new code: pkg.module:workflow.")],
    store: StoreOption = None,
    run: Annotated[
        list[str] | None, typer.Option("--run", help="A run to check (default: every run).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check new code against recorded runs; name the first divergence of each run."""
    workflow = load_workflow(app_)

    async def work(s: Store) -> ReplayReport:
        return await replay(workflow, s, run or None)

    report = execute(store, work)
    if as_json:
        out.print_json(
            data={
                "ok": report.ok,
                "runs": [
                    {
                        "run_id": r.run_id,
                        "supersteps": r.supersteps,
                        "divergence": r.divergence.describe() if r.divergence else None,
                        "skipped": list(r.skipped),
                    }
                    for r in report.runs
                ],
            }
        )
    else:
        for divergence in report.divergences:
            out.print(escape(divergence.describe()))
        diverged = len(report.divergences)
        out.print(f"{len(report.runs) - diverged} of {len(report.runs)} run(s) replay as recorded")
    raise typer.Exit(0 if report.ok else 1)
