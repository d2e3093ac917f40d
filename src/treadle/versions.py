"""Versions of a workflow, and migrations that move parked runs between them.

A workflow carries a name and a version (``WorkflowBuilder(..., version=2)``).
A runtime, worker or server may host several versions of one workflow: every
run goes on with the version it started with, and new runs take the newest.
When a version's runs should not finish on it, a migration the team writes
moves them::

    from treadle.versions import CheckpointContents, migration

    @migration("review", from_version=1, to_version=2)
    def rename_writer(run: CheckpointContents) -> CheckpointContents:
        return run.rename_executor("write", "draft").with_state(priority="normal")

    report = await treadle.versions.migrate(store, review_v2, [rename_writer], from_version=1)

or ``treadle migrate --app myapp.flows --from 1 --to 2 [--dry-run]``. Each
moved run keeps its id, history and event log, which records the move; a run
that cannot move is named with its reasons and left untouched. See
``docs/versions.md``.
"""

from __future__ import annotations

from treadle._migrations._runs import MigrationReport, RunMigration, migrate
from treadle._migrations._steps import (
    CheckpointContents,
    Migration,
    WaitSummary,
    migration,
    migration_path,
)
from treadle._public import publish
from treadle._workflow._versions import Hosted

__all__ = [
    "CheckpointContents",
    "Hosted",
    "Migration",
    "MigrationReport",
    "RunMigration",
    "WaitSummary",
    "migrate",
    "migration",
    "migration_path",
]

publish(__name__, globals(), __all__)
