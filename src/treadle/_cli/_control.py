"""``treadle cancel``, ``pause`` and ``unpause``: steering a run from outside it.

Each goes through the one door (:mod:`treadle._workflow._actions`) as the
CLI's user, ``cli:USER@HOST``, which the run's record keeps.
"""

from __future__ import annotations

from treadle._cli._execute import execute
from treadle._cli._flags import RunIdArgument, StoreOption  # noqa: TC001 - typer reads them
from treadle._cli._help import command_set
from treadle._cli._views import print_cancelled, print_paused, print_unpaused
from treadle._operations import _commands as commands

cli = command_set()


@cli.command()
def cancel(
    run_id: RunIdArgument,
    store: StoreOption = None,
) -> None:
    """Cancel a run wherever it is; its last checkpoint stays intact.

    A process advancing it right now commits nothing more. (Ctrl-C on
    ``run``, ``resume``, ``respond`` or ``send`` only detaches.)
    """
    print_cancelled(execute(store, lambda s: commands.cancel(s, run_id)))


@cli.command()
def pause(
    run_id: RunIdArgument,
    store: StoreOption = None,
) -> None:
    """Pause a run at a superstep boundary, with a checkpoint, until `treadle unpause`.

    A run nobody is advancing pauses at once; a run a process or worker is
    advancing pauses at that owner's next superstep boundary (its `treadle
    run` then exits 3, paused). Nothing advances a paused run: no worker
    takes it up, and answers wait in its inbox.
    """
    outcome, row = execute(store, lambda s: commands.pause(s, run_id))
    print_paused(row, outcome)


@cli.command()
def unpause(
    run_id: RunIdArgument,
    store: StoreOption = None,
) -> None:
    """Let a paused run go on: a `treadle worker` takes it up, or `treadle resume` does here."""
    was_paused, row = execute(store, lambda s: commands.unpause(s, run_id))
    print_unpaused(row, was_paused=was_paused)
