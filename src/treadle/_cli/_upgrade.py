"""``treadle check-upgrade``: replay a store's recorded runs against new code.

Before deploying a changed workflow, an operator asks whether runs already
under way will go on the same way: each recorded superstep is replayed from
its checkpoint with the new code (in memory; the store is only read) and
compared with what was recorded (:func:`treadle.testing.replay`). No step
runs again: each returns its journaled result. Each run is checked against
the code of its own version, found beside the named workflow in its module
(as ``treadle resume`` finds it); a run of a version the module does not
hold is skipped, and said to be. Exit 0 when every run checked replays; 1,
with the first divergence of each run that does not, otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from treadle._cli._execute import execute
from treadle._cli._flags import JsonOption, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_set
from treadle._cli._views import out
from treadle._operations._inputs import load_version, load_workflow
from treadle.testing import ReplayReport, replay

if TYPE_CHECKING:
    from treadle._stores._store import Store
    from treadle._workflow._workflow import Workflow


cli = command_set()


@cli.command("check-upgrade")
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
        run_ids = run or [r.run_id for r in await s.list_runs(workflow=workflow.name)]
        code: dict[int, Workflow] = {workflow.version: workflow}
        for run_id in run_ids:
            record = await s.get_run(run_id)
            if record.workflow == workflow.name and record.version not in code:
                held = load_version(app_, workflow.name, record.version)
                if held.version == record.version:  # else: not in the module, skipped
                    code[record.version] = held
        return await replay(code.values(), s, run_ids)

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
                        "checked": r.checked,
                    }
                    for r in report.runs
                ],
            }
        )
    else:
        for replayed in report.runs:
            for why in replayed.skipped:
                out.print(escape(f"skipped: run {replayed.run_id}: {why}"), style="dim")
        for divergence in report.divergences:
            out.print(escape(divergence.describe()))
        checked = sum(r.checked for r in report.runs)
        summary = f"{checked - len(report.divergences)} of {checked} run(s) replay as recorded"
        if checked < len(report.runs):
            summary += f"; {len(report.runs) - checked} run(s) not checked"
        out.print(summary)
    raise typer.Exit(0 if report.ok else 1)
