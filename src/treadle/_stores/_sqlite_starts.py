"""``SqliteStore``'s start policies: each decision one transaction on its writer thread.

SQLite's one writer (``BEGIN IMMEDIATE``) makes deciders of every process
sharing the file take turns already; the plans' gate lock costs nothing
more here (see :mod:`treadle._stores._start_plans`).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, TypeVar

from treadle._stores import _start_plans
from treadle._stores._sql_rules import check_limit
from treadle._stores._sqlite_writes import drive
from treadle._stores._write_steps import SQLITE_WRITES

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from treadle._stores._records import Claimed
    from treadle._stores._starts import Admission, StartRequest
    from treadle._values._actors import Actor

_T = TypeVar("_T")


class SqliteAdmissions(ABC):
    """What the store port asks of ``SqliteStore`` about start policies (``Admissions``)."""

    @abstractmethod
    async def _call(
        self, work: Callable[[sqlite3.Connection], _T], *, write: bool, group: bool = False
    ) -> _T:
        """Run ``work`` on the store's writer thread (one transaction when ``write``)."""

    async def admit(
        self,
        request: StartRequest,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Admission:
        """Decide one start, once (see ``Admissions.admit``)."""
        plan = functools.partial(_start_plans.admit, request, owner, duration, actor, SQLITE_WRITES)
        return await self._call(lambda c: drive(plan(), c), write=True)

    async def admit_queued(self, workflows: Sequence[str], now: float, *, limit: int) -> int:
        """Admit queued starts whose turn has come (see ``Admissions.admit_queued``)."""
        check_limit(limit)
        plan = functools.partial(_start_plans.admit_queued, workflows, now, limit, SQLITE_WRITES)
        return len(await self._call(lambda c: drive(plan(), c), write=True))

    async def claim_starts(
        self, workflows: Sequence[str], owner: str, duration: float, now: float, *, limit: int
    ) -> list[Claimed]:
        """Admit what is due, then lease admitted runs nobody started (see the port)."""
        check_limit(limit)
        plan = functools.partial(
            _start_plans.claim_starts, workflows, owner, duration, now, limit, SQLITE_WRITES
        )
        return await self._call(lambda c: drive(plan(), c), write=True)
