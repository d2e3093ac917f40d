"""``PostgresStore``'s start policies: each decision one transaction, on the workflow's gate.

Under READ COMMITTED each statement sees what committed before it began:
the plan's first locking read of the workflow's gate row waits for any
other decider of that workflow to commit, so what it reads after has their
writes (see :mod:`treadle._stores._start_plans`).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, TypeVar

from treadle._stores import _start_plans
from treadle._stores._postgres_writes import drive, ends_on_first_read
from treadle._stores._sql_rules import check_limit
from treadle._stores._write_steps import POSTGRES_WRITES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from treadle._stores._postgres_pools import Connection
    from treadle._stores._records import Claimed
    from treadle._stores._starts import Admission, StartRequest
    from treadle._stores._write_steps import Plan
    from treadle._values._actors import Actor

_T = TypeVar("_T")


class PostgresAdmissions(ABC):
    """What the store port asks of ``PostgresStore`` about start policies (``Admissions``)."""

    @abstractmethod
    async def _run(self, work: Callable[[Connection], Awaitable[_T]], *, write: bool) -> _T:
        """Run ``work`` on a pooled connection (one transaction when ``write``)."""

    async def admit(
        self,
        request: StartRequest,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Admission:
        """Decide one start, once (see ``Admissions.admit``)."""
        plan = _start_plans.admit(request, owner, duration, actor, POSTGRES_WRITES)
        return await self._run(functools.partial(drive, plan), write=True)

    async def admit_queued(self, workflows: Sequence[str], now: float, *, limit: int) -> int:
        """Admit queued starts whose turn has come (see ``Admissions.admit_queued``).

        A worker asks whenever a slot frees, and nearly always no start is
        due: the plan's first statement, a read that locks nothing, answers
        so, and the plan ends there having written nothing. So that read is
        asked alone first, one round trip, not three with a transaction's
        ``BEGIN`` and ``COMMIT`` around it; when it finds a start due, the
        plan runs whole in its transaction (reading again there).
        """
        check_limit(limit)

        def plan() -> Plan[list[str]]:
            return _start_plans.admit_queued(workflows, now, limit, POSTGRES_WRITES)

        ended, admitted = await self._run(
            functools.partial(ends_on_first_read, plan()), write=False
        )
        if not ended:
            admitted = await self._run(functools.partial(drive, plan()), write=True)
        return len(admitted or ())

    async def claim_starts(
        self, workflows: Sequence[str], owner: str, duration: float, now: float, *, limit: int
    ) -> list[Claimed]:
        """Admit what is due, then lease admitted runs nobody started (see the port)."""
        check_limit(limit)
        plan = _start_plans.claim_starts(workflows, owner, duration, now, limit, POSTGRES_WRITES)
        return await self._run(functools.partial(drive, plan), write=True)
