"""The store's roles about who owns a run, and what others send it.

**One owner per run.** A run advances only in the process holding its
*lease* (:class:`~treadle._stores._records.Lease`): ``create_run`` takes
one for a new run, ``acquire`` takes one over a run with no live owner, and
every write given a lease (``commit_many``, ``set_status``) happens only
while that lease is current (the *fencing token* is its ``epoch``);
otherwise it changes nothing and raises ``LeaseLostError``. Others reach a
run through its **inbox** (``deliver``): answers, session messages. The
store decides there, once, which answer to a request wins. Leases are kept
on the wall clock (``time.time()``) of the processes sharing the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._stores._records import CheckpointRecord, Claimed, InboxItem, Lease, RunRecord
    from treadle._values._actors import Actor


class Leases(Protocol):
    """How a process takes, keeps and gives up the lease on one run.

    Attributes:
        lease: Seconds a lease on one of its runs lasts without a heartbeat.
    """

    lease: float

    async def acquire(
        self,
        run_id: str,
        owner: str,
        duration: float,
        *,
        replacing: str | None = None,
        actor: Actor | None = None,
    ) -> Lease:
        """Take the run's lease for ``duration`` seconds, if no one else holds a current one.

        With ``replacing``, take it from that owner whatever its lease says
        (the caller knows it is dead: its process is gone). The new lease's
        epoch is one more than any before it, so writes under an earlier
        lease (a presumed-dead owner) change nothing. A parked run is taken
        up (its ``parked`` reason is cleared). With ``actor``, this is a
        resume: ``run_resumed`` is recorded.

        Raises:
            RunNotFoundError: no such run.
            RunBusyError: another owner's lease is current (names it and its end).
            RunPausedError: the run is paused (``unpause`` may lease it instead).
        """
        ...

    async def renew(self, lease: Lease, duration: float) -> Lease:
        """Extend a lease by ``duration`` seconds from now (a heartbeat).

        Raises:
            LeaseLostError: the lease is no longer current.
        """
        ...

    async def release(self, lease: Lease, *, seen: int = 0) -> bool:
        """Give a lease up so another process may take the run at once.

        The run is left ready when its inbox holds items its owner did not
        apply, and read none of them after ``seen``: what the owner read
        and left (a message for the session's next rest, behind a turn
        waiting on a request) makes no owner take the run up again for it,
        only to leave it again. Returns ``False`` when the lease was no
        longer current (nothing changed).
        """
        ...


class Claims(Protocol):
    """How a timer service finds and leases the runs due to be taken up."""

    async def claim(self, owner: str, duration: float, now: float, *, limit: int) -> list[Claimed]:
        """Lease up to ``limit`` runs a timer service should take up.

        A run is taken when nobody holds a current lease on it, it is not
        parked, paused or ended, and: its timer or deadline is due at ``now`` (the
        service's clock, as in :meth:`due_runs`); or it was delivered
        something no owner has applied; or it is orphaned (``running`` with
        no current lease: its owner died or was detached mid-run).
        """
        ...

    async def held_claimable(self, now: float, *, limit: int) -> list[Lease]:
        """The current leases on runs :meth:`claim` would take, were they free.

        That is, up to ``limit`` runs not parked, paused or ended that are
        ``running``, were delivered something, or are due at ``now``, and
        whose owner's lease has not run out. A timer service looks at their
        owners: one it knows is dead (a process gone from its host) need not
        be waited out (``acquire(..., replacing=owner)``).
        """
        ...

    async def load_claimed(
        self, run_ids: Sequence[str]
    ) -> list[tuple[RunRecord, bytes, CheckpointRecord | None]]:
        """``load_resumable`` of each run's latest checkpoint, for many runs in one read.

        A timer service reads the runs it just claimed a few at a time, in
        one round trip for all of them rather than one each: waking many
        runs is then a statement per batch, not per run. Runs that are gone
        are left out; the others come in the order of ``run_ids``.
        """
        ...


class Deliveries(Protocol):
    """A run's inbox: deliveries to it, and the answers kept."""

    async def deliver(
        self,
        run_id: str,
        items: Sequence[tuple[str, str | None, bytes]],
        *,
        version: int | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Put (kind, target, payload) items in the run's inbox, all or none.

        This is where an answer to a request is decided, once: the first
        answer to a request id is kept; a later one raises and changes
        nothing. The run is marked ready, so a timer service or worker
        applies the items if no caller does. With ``version``, only to a run
        on that version of its workflow, checked in the same transaction
        (a migration moving the run takes turns with it). With ``actor``,
        each item is recorded: ``request_answered`` (its answer as plain
        JSON; ``request_timed_out`` from the timer's door), ``message_sent``.

        Raises:
            RunNotFoundError: no such run.
            RequestError: the run has ended.
            RequestAlreadyAnsweredError: a request was answered already.
            VersionMismatchError: the run is on another version than ``version``.
            ValueError: an item no owner could apply: a kind other than
                ``answer``, ``message`` or ``message:POLICY`` (a policy other
                than reject), or an answer naming no request; nothing was
                delivered.
            TypeError: a target that is not text or ``None``, a payload
                that is not bytes; nothing was delivered.
        """
        ...

    async def inbox(self, run_id: str) -> list[InboxItem]:
        """The run's inbox items not yet applied, in delivery order."""
        ...

    async def answer_of(self, run_id: str, request_id: str) -> tuple[str, float] | None:
        """The answer kept for a request (its JSON, cut short, and when it came), or ``None``."""
        ...

    async def answered_payload(self, run_id: str, request_id: str) -> bytes | None:
        """The answer kept for a request, whole, as delivered (``None``: none was kept).

        Applied answers stay in the run's inbox: this is how a replay check
        gives a recorded superstep the very answer it had.
        """
        ...
