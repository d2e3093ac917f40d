"""Moving a store's parked runs from one version of a workflow to another.

:func:`migrate` picks the runs of version A that have not ended, and for
each one: reads its latest checkpoint, runs the migration functions from A
to B over its contents (:mod:`treadle._migrations._steps`), checks the
result against version B's graph, and writes it as the run's next
checkpoint with the run row moved to version B, in one transaction under
the run's lease. A run someone holds (a worker, a ``resume``, the server)
is left alone and named busy; a run the migration cannot move is named
with every reason and left exactly as it was. The run keeps its id, its
history and its event log, which records the move.

A dry run does everything but the lease and the write, so it reports the
very runs a real pass would move (unless one changes in between), each
with what its contents become.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from treadle._checkpoints._delta import PieceCache
from treadle._checkpoints._graph_description import encode_description, fingerprint
from treadle._checkpoints._ownership import lease_duration, new_owner
from treadle._engine._result import ENDED, RunStatus
from treadle._exceptions import (
    DurabilityError,
    LeaseLostError,
    MigrationError,
    RunBusyError,
    RunNotFoundError,
    RunPausedError,
    TreadleError,
)
from treadle._migrations._steps import apply_migrations, migration_path
from treadle._stores._events import EventEntry
from treadle._stores._records import CheckpointInfo, CheckpointRecord
from treadle._values._ids import new_checkpoint_id
from treadle._values._text import error_text
from treadle._workflow import _actions as door
from treadle._workflow._rights import actor_or_default, check_right

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from treadle._checkpoints._codec import RestoredRun
    from treadle._migrations._steps import MigratedCheckpoint, Migration
    from treadle._stores._records import Lease, RunRecord
    from treadle._stores._store import RunReads, Store
    from treadle._values._actors import Actor
    from treadle._workflow._workflow import Workflow

Outcome = Literal["moved", "would move", "cannot move", "busy"]

_ENDED = frozenset(status.value for status in ENDED)
_PAGE = 500
_PAUSED = "paused: unpause it first"
_UNAPPLIED = (
    "it holds answers or messages delivered and not yet applied, which are for the "
    "version they were sent to: move it once it has taken them"
)


@dataclass(frozen=True, slots=True)
class RunMigration:
    """What a migration did, or would do, to one run.

    Attributes:
        run_id: The run.
        status: Its status when it was looked at.
        outcome: ``"moved"``; ``"would move"`` (a dry run); ``"cannot move"``
            (the reasons say why; nothing was changed); ``"busy"`` (someone
            holds its lease: try again once it rests).
        reasons: Why it cannot move, or who holds it.
        checkpoint_id: The checkpoint the move wrote (``None``: none was).
        renamed: The executors the migration renamed (old → new).
        dropped: The executors it dropped.
        state_keys: The state keys it added (+name) and removed (-name).
    """

    run_id: str
    status: str
    outcome: Outcome
    reasons: tuple[str, ...] = ()
    checkpoint_id: str | None = None
    renamed: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    state_keys: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The outcome as plain data (``treadle migrate --json``)."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "outcome": self.outcome,
            "reasons": list(self.reasons),
            "checkpoint_id": self.checkpoint_id,
            "renamed": dict(self.renamed),
            "dropped": list(self.dropped),
            "state_keys": list(self.state_keys),
        }


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """The outcome of :func:`migrate`, run by run, in the order they were taken.

    Attributes:
        workflow: The workflow's name.
        from_version: The version runs were moved from.
        to_version: The version they were moved to.
        dry_run: Whether nothing was written.
        runs: One :class:`RunMigration` per run of ``from_version`` that had
            not ended.
    """

    workflow: str
    from_version: int
    to_version: int
    dry_run: bool
    runs: tuple[RunMigration, ...]

    def with_outcome(self, *outcomes: Outcome) -> list[RunMigration]:
        """The runs whose outcome is one of ``outcomes``."""
        return [run for run in self.runs if run.outcome in outcomes]

    @property
    def moved(self) -> list[str]:
        """The ids of the runs moved (or, in a dry run, that would be)."""
        return [run.run_id for run in self.with_outcome("moved", "would move")]

    @property
    def ok(self) -> bool:
        """Whether every run moved (or would)."""
        return all(run.outcome in ("moved", "would move") for run in self.runs)

    def to_json(self) -> dict[str, Any]:
        """The report as plain data (``treadle migrate --json``)."""
        return {
            "workflow": self.workflow,
            "from_version": self.from_version,
            "to_version": self.to_version,
            "dry_run": self.dry_run,
            "runs": [run.to_json() for run in self.runs],
        }


async def migrate(
    store: Store,
    to: Workflow,
    migrations: Iterable[Migration],
    *,
    from_version: int,
    previous: Workflow | None = None,
    dry_run: bool = False,
    run_ids: Sequence[str] | None = None,
    actor: Actor | None = None,
) -> MigrationReport:
    """Move the runs of ``from_version`` of ``to``'s workflow to ``to``'s version.

    Args:
        store: Where the runs are.
        to: The version the runs move to.
        migrations: The registered migrations; the chain from
            ``from_version`` to ``to.version`` is taken from them.
        from_version: The version whose runs move.
        previous: That version's workflow, when this process has it: its
            codec reads the runs' checkpoints (the types it allows), and a
            run recorded by another graph under that version is refused.
            Without it, ``to``'s codec reads them.
        dry_run: Report what would happen; write nothing, lease nothing.
        run_ids: Only these runs (default: every run of ``from_version``
            that has not ended).
        actor: Who migrates (default this program; it must be an admin):
            each run moved records ``run_migrated`` with it.

    Raises:
        MigrationError: No chain of migrations leads from ``from_version``
            to ``to.version``, or they are one version (nothing would move).
    """
    if from_version == to.version:  # a run moved to its own version would record a move of nothing
        msg = (
            f"the runs of version {from_version} of {to.name!r} are on it already: "
            f"nothing to migrate (name a later version to move them to)"
        )
        raise MigrationError([msg])
    path = migration_path(tuple(migrations), to.name, from_version, to.version)
    if previous is not None and (previous.name, previous.version) != (to.name, from_version):
        msg = (
            f"previous is version {previous.version} of {previous.name!r}, "
            f"not version {from_version} of {to.name!r}"
        )
        raise ValueError(msg)
    who = actor_or_default(actor)
    check_right(who, "migrate", None)
    mover = _Mover(store, to, path, previous, dry_run, who)
    outcomes = [
        await mover.one(row) for row in await _chosen(store, to.name, from_version, run_ids)
    ]
    return MigrationReport(to.name, from_version, to.version, dry_run, tuple(outcomes))


async def _chosen(
    store: RunReads, name: str, version: int, run_ids: Sequence[str] | None
) -> list[RunRecord]:
    """The runs to move, oldest first: of ``name`` at ``version``, not ended."""
    if run_ids is not None:
        rows = [await store.get_run(run_id) for run_id in run_ids]
    else:
        rows, before = [], None
        while True:
            page = await store.list_runs(workflow=name, limit=_PAGE, before=before)
            rows += page
            if len(page) < _PAGE:
                break
            before = (page[-1].created_at, page[-1].run_id)
        rows.reverse()
    return [
        row
        for row in rows
        if row.workflow == name and row.version == version and row.status not in _ENDED
    ]


class _Mover:
    """Moves runs one at a time (each in a transaction of its own)."""

    def __init__(
        self,
        store: Store,
        to: Workflow,
        path: Sequence[Migration],
        previous: Workflow | None,
        dry_run: bool,
        actor: Actor,
    ) -> None:
        self.actor = actor
        self.store = store
        self.to = to
        self.path = tuple(path)
        self.previous = previous
        self.dry_run = dry_run
        self.graph = encode_description(to.description)

    async def one(self, row: RunRecord) -> RunMigration:
        if row.status == RunStatus.PAUSED.value:
            return RunMigration(row.run_id, row.status, "cannot move", (_PAUSED,))
        if row.checkpoint_id is None:
            reason = "queued: it has no checkpoint yet (it starts on the version it names)"
            return RunMigration(row.run_id, row.status, "cannot move", (reason,))
        if self.dry_run:
            if row.owned(time.time()):
                return _busy(row, RunBusyError(row.run_id, row.owner or "?", row.lease_until or 0))
            return await self._move(row, None)
        try:
            lease = await self.store.acquire(row.run_id, new_owner(), lease_duration(self.store))
        except RunBusyError as error:
            return _busy(row, error)
        except RunPausedError:
            return RunMigration(row.run_id, "paused", "cannot move", (_PAUSED,))
        except RunNotFoundError:
            return RunMigration(row.run_id, row.status, "cannot move", ("it was deleted",))
        try:
            return await self._move(row, lease)
        except BaseException:
            await self._let_go(row, lease)
            raise

    async def _move(self, row: RunRecord, lease: Lease | None) -> RunMigration:
        """Migrate one run's latest checkpoint; write it when holding ``lease``."""
        held, graph, record = await self.store.load_resumable(row.run_id, None)
        if held.status in _ENDED:
            return await self._refuse(row, lease, (f"it has ended meanwhile ({held.status})",))
        if held.version != row.version or record is None:
            why = f"it is on version {held.version} now" if record else "its checkpoint is gone"
            return await self._refuse(row, lease, (why,))
        reader = self.previous or self.to
        try:
            if self.previous is not None and fingerprint(json.loads(graph)) != (
                self.previous.fingerprint
            ):
                why = f"it was recorded by another graph than the version {row.version} given"
                return await self._refuse(row, lease, (why,))
            restored = reader.codec.decode(record, run_id=row.run_id)
        except (TreadleError, ValueError) as error:
            return await self._refuse(row, lease, (error_text(error),))
        try:
            # The old graph's executors: a rename of one this run holds nothing of is fine.
            executors = json.loads(graph).get("executors", {})
            migrated = apply_migrations(restored, self.path, self.to, executors=executors)
        except MigrationError as error:
            return await self._refuse(row, lease, error.reasons)
        checkpoint = self._checkpoint(restored, migrated, row.version)
        if lease is not None:
            return await self._write(row, held.status, lease, checkpoint, migrated)
        if await self.store.inbox(row.run_id):
            return await self._refuse(row, None, (_UNAPPLIED,))
        return RunMigration(row.run_id, held.status, "would move", (), None, *_changes(migrated))

    async def _write(
        self,
        row: RunRecord,
        status: str,
        lease: Lease,
        checkpoint: CheckpointRecord,
        migrated: MigratedCheckpoint,
    ) -> RunMigration:
        """Write a migrated checkpoint under ``lease``: the run moved, or why not."""
        try:
            moved = await door.migrate(
                self.store, lease, self.to.version, self.graph, checkpoint, actor=self.actor
            )
        except (LeaseLostError, RunNotFoundError) as lost:
            return await self._lost(row, lost)
        if not moved:
            return await self._refuse(row, lease, (_UNAPPLIED,))
        written = checkpoint.info.checkpoint_id
        return RunMigration(row.run_id, status, "moved", (), written, *_changes(migrated))

    def _checkpoint(
        self, restored: RestoredRun, migrated: MigratedCheckpoint, version: int
    ) -> CheckpointRecord:
        barrier = migrated.barrier
        now = time.time()
        info = CheckpointInfo(
            checkpoint_id=new_checkpoint_id(),
            run_id=restored.run_id,
            superstep=restored.superstep,
            status=restored.status,
            parent_checkpoint_id=restored.checkpoint_id,
            created_at=now,
            wake_at=barrier.wake_at,
        )
        # Fresh pieces: the new version may seal and encode values its own way.
        encoded = self.to.codec.encode(
            barrier, self.to.fingerprint, migrated.snapshots, PieceCache()
        )
        renamed, dropped, keys = _changes(migrated)
        moved = {
            "from_version": version,
            "to_version": self.to.version,
            "migrations": [m.name for m in self.path],
            "checkpoint_id": info.checkpoint_id,
            "renamed": renamed,
            "dropped": list(dropped),
            "state_keys": list(keys),
            "actor": self.actor.to_json(),
        }
        events = (
            EventEntry(info.superstep, "run_migrated", None, now, json.dumps(moved)),
            EventEntry(
                info.superstep,
                "checkpoint_saved",
                None,
                now,
                json.dumps({"checkpoint_id": info.checkpoint_id}),
            ),
        )
        return CheckpointRecord(
            info, encoded.blob, encoded.refs, encoded.pieces, encoded.requires, events
        )

    async def _refuse(
        self, row: RunRecord, lease: Lease | None, reasons: Sequence[str]
    ) -> RunMigration:
        if lease is not None:
            await self._let_go(row, lease)
        return RunMigration(row.run_id, row.status, "cannot move", tuple(reasons))

    async def _lost(self, row: RunRecord, error: DurabilityError) -> RunMigration:
        """A run whose move was fenced out: cancelled, taken over or deleted meanwhile.

        Nothing was written (the fence refused the whole transaction); the
        run is named for what happened to it, and the pass goes on with the
        next run (before, the error ended the pass: the runs moved before it
        went unreported and those after it untried).
        """
        try:
            now = await self.store.get_run(row.run_id)
        except RunNotFoundError:
            return RunMigration(row.run_id, row.status, "cannot move", ("it was deleted",))
        if now.status in _ENDED:
            why = f"it has ended meanwhile ({now.status})"
            return RunMigration(row.run_id, now.status, "cannot move", (why,))
        return RunMigration(row.run_id, now.status, "busy", (error_text(error),))

    async def _let_go(self, row: RunRecord, lease: Lease) -> None:
        """Leave a run as it was: parked again with its reason if it was, else released."""
        try:
            if row.parked is not None:
                await self.store.park(lease, row.parked)
            else:
                await self.store.release(lease)
        except DurabilityError:  # the lease ends by itself; nothing was written
            pass


def _busy(row: RunRecord, error: RunBusyError) -> RunMigration:
    return RunMigration(row.run_id, row.status, "busy", (str(error),))


def _changes(
    migrated: MigratedCheckpoint,
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """What a migration changed: executors renamed and dropped, state keys."""
    before, after = migrated.before, migrated.after
    added = sorted(set(after.state) - set(before.state))
    removed = sorted(set(before.state) - set(after.state))
    keys = tuple([f"+{k}" for k in added] + [f"-{k}" for k in removed])
    return dict(after.renamed), tuple(sorted(after.dropped)), keys
