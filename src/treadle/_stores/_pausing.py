"""Pausing a run: the store port's part for it, and the rules every store applies alike.

A pause is decided by the store, in one transaction, like a cancel: a run
nobody is advancing is paused at once; a run whose owner holds a current
lease is *asked* to pause (``pause_requested``), and the owner's next
commit honours that in its own transaction (it commits its barrier, the
run becomes ``paused`` and the lease is given up), so the barrier a run
pauses at is always checkpointed and no write of the owner can slip past
the pause. The decisions themselves are the functions here, which
``MemoryStore`` and the SQL stores all call, so that all answer alike; the
SQL stores' statements for them are :mod:`treadle._stores._sql_pausing`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from treadle._exceptions import RequestError, RunBusyError, RunNotFoundError
from treadle._stores._sql_ownership import ENDED_STATUSES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._store import Lease
    from treadle._values._actors import Actor

PAUSED = "paused"
"""A paused run's status, as stored (``RunStatus.PAUSED``)."""

PauseOutcome = Literal["paused", "requested"]
"""What ``pause`` did: the run is paused now, or its owner pauses it at its next commit."""


class Unpaused(NamedTuple):
    """What ``unpause`` did.

    Attributes:
        withdrawn: ``True``: the run had not paused yet, and the pause asked
            of it was withdrawn; ``False``: it was paused, and goes on.
        lease: The lease it was taken with, when asked for (``owner=``).
    """

    withdrawn: bool
    lease: Lease | None = None


class Pausing(Protocol):
    """What the store port asks of a store about pausing runs (a part of ``Store``)."""

    async def pause(self, run_id: str, *, actor: Actor | None = None) -> PauseOutcome:
        """Stop the run at a superstep boundary, with a checkpoint, until it is unpaused.

        A run nobody holds a current lease on (pending, resting, orphaned)
        becomes ``paused`` at once, its lease epoch moved on so that a
        presumed-dead owner commits nothing more; its latest checkpoint is
        the boundary it stopped at. A run whose owner holds a current lease
        is asked to pause (``pause_requested``): the owner's next commit
        (or release) pauses it (see ``Store.commit_many``). A paused run is
        not claimed, due or acquired; deliveries to it are kept for when it
        goes on. Pausing a paused run changes nothing.

        Returns:
            ``"paused"`` (it is paused now) or ``"requested"`` (its owner
            pauses it with its next commit).

        Raises:
            RunNotFoundError: no such run.
            RequestError: it has ended (the error names its status).
        """
        ...

    async def unpause(
        self,
        run_id: str,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Unpaused:
        """Let a paused run go on: its status becomes its latest checkpoint's again.

        A run left ``running`` is then orphaned (any timer service, worker
        or ``resume`` takes it up at once), a resting one rests again, a
        pending one waits for a worker; it is marked ready if its inbox
        holds items. A pause asked of a run that has not paused yet is
        withdrawn instead. With ``owner``, a paused run is leased to it for
        ``duration`` seconds in the same transaction, so that nobody else
        takes it up first (the lease is in the outcome). With ``actor``,
        ``run_unpaused`` is recorded (``withdrawn`` saying which).

        Raises:
            RunNotFoundError: no such run.
            RunBusyError: with ``owner``, another owner's lease is current
                (nothing was changed).
            RequestError: it has ended, or is neither paused nor asked to
                pause (the error names its status).
        """
        ...


# --- the rules, from a run's (status, owner, lease_until, pause_requested) ----------

PauseStep = Literal["pause", "request", "none"]
"""What ``pause`` must write: pause the run now, ask its owner to, or nothing."""

UnpauseStep = Literal["unpause", "withdraw"]
"""What ``unpause`` must write: unpause the run, or withdraw a pause asked of it."""


def decide_pause(run_id: str, found: Sequence[object] | None, now: float) -> PauseStep:
    """What pausing a run does, given its row as it stands, locked.

    Raises:
        RunNotFoundError: ``found`` is ``None``.
        RequestError: the run has ended, or is queued by its start policy.
    """
    status, owner, lease_until, _ = _row(run_id, found)
    if status in ENDED_STATUSES:
        raise RequestError(f"run {run_id!r} has ended ({status}); there is nothing to pause")
    if status == PAUSED:
        return "none"
    if status == "queued":  # its start policy holds it in line: it has nothing to pause yet
        raise RequestError(
            f"run {run_id!r} is queued by its start policy and has not started: there is "
            f"nothing to pause; cancel it to take it out of line"
        )
    if _owned(owner, lease_until, now):
        return "request"
    return "pause"


def pause_outcome(step: PauseStep) -> PauseOutcome:
    """What ``pause`` tells its caller once ``step`` is written."""
    return "requested" if step == "request" else "paused"


def decide_unpause(
    run_id: str, found: Sequence[object] | None, now: float, *, taking: bool
) -> UnpauseStep:
    """What unpausing a run does, given its row as it stands, locked; ``taking``: to lease it.

    Raises:
        RunNotFoundError: ``found`` is ``None``.
        RunBusyError: ``taking``, and another owner's lease is current.
        RequestError: the run has ended, or is neither paused nor asked to pause.
    """
    status, owner, lease_until, requested = _row(run_id, found)
    if taking and _owned(owner, lease_until, now):
        raise RunBusyError(run_id, str(owner), float(lease_until))  # type: ignore[arg-type]
    if status in ENDED_STATUSES:
        raise RequestError(f"run {run_id!r} has ended ({status}); there is nothing to unpause")
    if status == PAUSED:
        return "unpause"
    if requested is not None:
        return "withdraw"
    raise RequestError(f"run {run_id!r} is not paused ({status}); there is nothing to unpause")


def _row(run_id: str, found: Sequence[object] | None) -> Sequence[object]:
    if found is None:
        raise RunNotFoundError(run_id)
    return found


def _owned(owner: object, lease_until: object, now: float) -> bool:
    return owner is not None and isinstance(lease_until, float | int) and lease_until > now


def paused_status(status: str) -> str:
    """The status a run whose pause is honoured takes: ``paused``, unless ``status`` ended it."""
    return status if status in ENDED_STATUSES else PAUSED
