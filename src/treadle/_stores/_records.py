"""What a store keeps, as the values its port takes and returns.

Apart from the port (:mod:`treadle._stores._store`) so that what a run row,
a lease or a checkpoint *is* reads in one place, and the port's file holds
only what a store *does*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from treadle._stores._events import EventEntry
    from treadle._values._search_fields import FieldValue


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the store knows it.

    Attributes:
        run_id: The run's id.
        workflow: The workflow's name.
        status: A ``RunStatus`` value (``"running"``, ``"completed"``, ...).
        superstep: The last committed superstep.
        checkpoint_id: The newest checkpoint, or ``None`` before the first.
        parent_run_id: For a fork, the run it branched from.
        parent_checkpoint_id: For a fork, the checkpoint it branched from.
        created_at: Seconds since the epoch.
        updated_at: Seconds since the epoch, at the last change.
        error: Why a ``FAILED`` run failed, in one line.
        wake_at: When the run's next durable timer falls due (epoch
            seconds), for ``WAITING`` runs and runs with scheduled messages.
        deadline_at: The run's wall-clock deadline (its ``timeout=``), kept
            so that it is enforced across restarts.
        owner: The process that holds the run's lease (``host:pid:tag``), or
            ``None``. Its lease may have ended: see :meth:`orphaned`.
        lease_until: When the owner's lease ends unless renewed.
        parked: Why a timer service or worker set the run aside (it could
            not load it), or ``None``. A parked run is not woken until a
            ``resume`` takes it up.
        pause_requested: When ``pause`` was asked of the run while an owner
            held a current lease on it (epoch seconds), or ``None``. The
            owner's next commit pauses it (see :meth:`Store.pause`).
        version: The version of its workflow the run goes on with: the one
            that started it, or the one a migration moved it to.
        outcome: The run's named outcome (``"approved"``, ``"rejected"``,
            ...) as its latest checkpoint holds it (``ctx.set_outcome``), or ``None``.
        outcome_summary: The one line given with it, if any.
        started_by: Who started the run (an actor as JSON text, see
            :class:`~treadle.Actor`), or ``None`` where nobody was recorded:
            its requests' four eyes refuse that actor, and creating a run
            with it records ``run_started`` (``run_forked`` for a fork).
    """

    run_id: str
    workflow: str
    status: str
    superstep: int
    checkpoint_id: str | None
    parent_run_id: str | None
    parent_checkpoint_id: str | None
    created_at: float
    updated_at: float
    error: str | None = None
    wake_at: float | None = None
    deadline_at: float | None = None
    owner: str | None = None
    lease_until: float | None = None
    parked: str | None = None
    pause_requested: float | None = None
    version: int = 1
    outcome: str | None = None
    outcome_summary: str | None = None
    started_by: str | None = None

    def owned(self, now: float) -> bool:
        """Whether a process holds a current lease on the run at ``now``."""
        return self.owner is not None and self.lease_until is not None and self.lease_until > now

    def orphaned(self, now: float) -> bool:
        """Whether the run was left mid-run: ``running``, but nobody holds a current lease.

        Its owner died (or was detached by Ctrl-C) between two barriers. Any
        timer service, worker or ``resume`` takes it over from its last
        checkpoint.
        """
        return self.status == "running" and not self.owned(now)


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to advance one run, held by one process until ``until``.

    Attributes:
        run_id: The run.
        owner: Who holds it (``host:pid:tag``), as written in the run row.
        epoch: The fencing token: it grows with every new lease on the run,
            and a write under an older epoch changes nothing.
        until: When it ends unless renewed (seconds since the epoch).
    """

    run_id: str
    owner: str
    epoch: int
    until: float


class Claimed(NamedTuple):
    """A run a timer service claimed: its lease, its workflow, and whether it was delivered to.

    ``delivered`` says the run's inbox may hold items no owner has applied
    (it was made ready by a delivery), so the service reads its inbox only
    when it is set. ``version`` is the run's version of its workflow.
    """

    lease: Lease
    workflow: str
    delivered: bool
    version: int = 1


@dataclass(frozen=True, slots=True)
class InboxItem:
    """Something delivered to a run for its owner to apply.

    Attributes:
        seq: Its position in the store's inbox (delivery order).
        kind: ``"start"`` (a queued run's input), ``"answer"`` or ``"message"``.
        target: The request id of an answer; the executor a message is for,
            or ``None``.
        payload: The value, encoded by the deliverer's serializer.
        created_at: When the store took it (epoch seconds): a debounced
            session times its quiet window from it.
    """

    seq: int
    kind: str
    target: str | None
    payload: bytes
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """A checkpoint's metadata, as ``history`` lists it.

    ``parent_checkpoint_id`` is the checkpoint this one was computed from: the
    previous barrier, or for a resumed-from-the-past or forked run, the
    checkpoint it branched from. ``wake_at`` is when the earliest durable
    timer pending at this barrier falls due (``None``: no timer).
    """

    checkpoint_id: str
    run_id: str
    superstep: int
    status: str
    parent_checkpoint_id: str | None
    created_at: float
    wake_at: float | None = None


@dataclass(frozen=True, slots=True)
class Piece:
    """A stored part of checkpoints, shared by every checkpoint that uses it.

    A checkpoint stores what changed since its parent: a state value that a
    superstep did not write is not stored again, and items appended to a
    list are stored alone, as a piece that *extends* the piece holding the
    list before them. So a piece may be used by many checkpoints (and by
    forks), and the store keeps it while any of them is kept.

    Attributes:
        piece_id: Its id, unique in the store.
        extends: The piece whose content this one continues (``None``: none).
            Loading a piece loads the pieces it extends, transitively.
        blob: Its sealed content, opaque to the store.
    """

    piece_id: str
    extends: str | None
    blob: bytes


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """A checkpoint: its sealed frame, and the pieces it is made of.

    Attributes:
        info: Its metadata.
        blob: The sealed frame: the small part written whole every time.
        refs: The ids of the pieces the frame names, in any order.
        pieces: Given to a commit, the pieces first stored with this
            checkpoint (the others in ``refs`` are stored already).
            Returned by a load, every piece the checkpoint needs: those in
            ``refs`` and all they extend.
        requires: Pieces this checkpoint uses that an earlier one stored,
            which a commit checks are still there (a run that branches from
            an older checkpoint names them, in case a prune took them
            meanwhile). Empty on load.
        events: What the run reported in the superstep this checkpoint
            commits, appended to its event log in the same transaction.
            Empty on load.
        outcome: Given to a commit, the run's outcome as of this checkpoint
            (name and summary; ``None``: none), which the run's row takes
            with it. ``None`` on load (the checkpoint's content holds it).
        fields: Given to a commit, the run's search fields this checkpoint
            sets or unsets (see :mod:`treadle._values._search_fields`),
            written in the same transaction. Empty on load.
    """

    info: CheckpointInfo
    blob: bytes
    refs: tuple[str, ...] = ()
    pieces: tuple[Piece, ...] = ()
    requires: tuple[str, ...] = ()
    events: tuple[EventEntry, ...] = ()
    outcome: tuple[str, str | None] | None = None
    fields: tuple[FieldValue, ...] = ()
