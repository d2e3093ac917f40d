"""Deleting runs and trimming their history: what keeps a long-lived store small.

``treadle delete`` and ``DELETE /api/runs/{id}`` delete one run;
``treadle prune`` deletes the ended runs a filter selects and trims the
checkpoints every other run keeps. The store does the deleting
(``Store.delete_run``, ``Store.prune``): it refuses a run a live process
owns, and a run that was forked from (forks share what it stored, so the
forks go first).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from treadle._engine._result import ENDED, RunStatus
from treadle._exceptions import CommandError, RunBusyError, RunHasForksError, RunNotFoundError
from treadle._values._actors import Actor
from treadle._workflow import _actions as door

if TYPE_CHECKING:
    from treadle._stores._store import RunRecord, Store

DAY = 86_400.0
"""Seconds in a day: ``--older-than`` counts days."""

ENDED_STATUSES = tuple(sorted(s.value for s in ENDED))
"""The statuses of runs that prune may delete: nothing will ever move them again."""


async def delete_run(store: Store, run_id: str, *, actor: Actor | None = None) -> RunRecord:
    """Delete the run whose id is ``run_id``; return its row as it was.

    The id is the run's whole id, which the caller resolved from what it
    was given (a prefix) once: resolved again here, after another caller
    deleted that run, a prefix would name a run nobody named. Its
    checkpoints, events and inbox go with it; its audit entries stay, with
    ``run_deleted`` and ``actor`` (default the CLI's user).

    Raises:
        RunNotFoundError: No such run (deleted meanwhile: nothing was deleted).
        RunBusyError: A live process owns the run (nothing was deleted).
        RunHasForksError: Runs were forked from it (nothing was deleted).
    """
    run = await store.get_run(run_id)
    await door.delete(store, run_id, actor=actor or Actor.cli())
    return run


@dataclass(frozen=True, slots=True)
class PruneFilter:
    """Which runs ``prune`` deletes, and how many checkpoints it leaves the rest.

    Runs are deleted only when ``statuses`` or ``older_than_days`` is given:
    the ended runs (of ``workflow``) with one of ``statuses`` (default: any
    ended one) last changed more than ``older_than_days`` ago (default: at
    any time). With ``keep``, every run of ``workflow`` not deleted keeps
    only its newest ``keep`` checkpoints (its latest always).

    Attributes:
        statuses: Statuses of runs to delete, each an ended one.
        older_than_days: Delete only runs unchanged for longer than this.
        keep: Checkpoints each remaining run keeps (``None``: all).
        workflow: Only runs of the workflow of this name.
    """

    statuses: tuple[str, ...] = ()
    older_than_days: float | None = None
    keep: int | None = None
    workflow: str | None = None

    def check(self) -> None:
        """Refuse a filter that would do nothing or delete a run that is not over.

        Raises:
            CommandError: Nothing asked; a status that is not an ended one; a
                negative age; ``keep`` below 1.
        """
        if not self.deletes and self.keep is None:
            msg = "prune needs --older-than DAYS, --status S or --keep N (see treadle prune --help)"
            raise CommandError(msg)
        known = {s.value for s in RunStatus}
        for status in self.statuses:
            if status not in ENDED_STATUSES:
                why = "not a status" if status not in known else "not an ended status"
                msg = (
                    f"prune deletes only ended runs: {status!r} is {why} "
                    f"(use {', '.join(ENDED_STATUSES)}; treadle delete RUN deletes any one run)"
                )
                raise CommandError(msg)
        if self.older_than_days is not None and not self.older_than_days >= 0:
            msg = f"--older-than must be a number of days, at least 0, not {self.older_than_days}"
            raise CommandError(msg)
        if self.keep is not None and self.keep < 1:
            msg = f"--keep must be at least 1 (a run's latest checkpoint stays), not {self.keep}"
            raise CommandError(msg)

    @property
    def deletes(self) -> bool:
        """Whether this filter deletes runs (rather than only trimming checkpoints)."""
        return bool(self.statuses) or self.older_than_days is not None

    def selects(self, run: RunRecord, now: float) -> bool:
        """Whether ``run`` is one to delete."""
        if not self.deletes or run.status not in (self.statuses or ENDED_STATUSES):
            return False
        return self.older_than_days is None or run.updated_at < now - self.older_than_days * DAY


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a prune deleted (or, dry, would delete).

    Attributes:
        deleted: The runs deleted.
        trimmed: Per run trimmed, how many checkpoints went.
        skipped: One line per run left alone, and why (it is owned, or forked from).
        dry_run: Nothing was changed; the rest says what would have been.
    """

    deleted: list[RunRecord] = field(default_factory=list)
    trimmed: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    dry_run: bool = False


async def prune(
    store: Store, chosen: PruneFilter, *, dry_run: bool = False, actor: Actor | None = None
) -> Pruned:
    """Delete the runs ``chosen`` selects and trim the others' checkpoints.

    With ``dry_run``, nothing changes and the result says what would. Runs
    are deleted newest first, so a fork goes before the run it was forked
    from; a run that is owned, or keeps a fork that is not deleted, is
    skipped (and named in :attr:`Pruned.skipped`).

    Raises:
        CommandError: The filter asks for nothing, or would delete runs
            that have not ended.
    """
    chosen.check()
    who = actor or Actor.cli()
    now = time.time()
    done = Pruned(dry_run=dry_run)
    for run in await store.list_runs(workflow=chosen.workflow):
        if chosen.selects(run, now):
            if not dry_run:
                try:
                    await door.delete(store, run.run_id, actor=who)
                except (RunBusyError, RunHasForksError) as error:
                    done.skipped.append(f"{run.run_id}: {error}")
                    continue
                except RunNotFoundError:  # deleted meanwhile by someone else: as asked
                    continue
            done.deleted.append(run)
        elif chosen.keep is not None:
            gone = await _trim(store, run.run_id, chosen.keep, dry_run=dry_run, actor=who)
            if gone:
                done.trimmed[run.run_id] = gone
    return done


async def _trim(store: Store, run_id: str, keep: int, *, dry_run: bool, actor: Actor) -> int:
    """Checkpoints of the run beyond its newest ``keep`` deleted (dry: counted); how many."""
    try:
        if dry_run:
            return max(0, len(await store.list_checkpoints(run_id)) - keep)
        return await door.prune(store, run_id, keep, actor=actor)
    except RunNotFoundError:  # deleted meanwhile
        return 0
