"""The store's role of start policies: which start becomes a run now, waits, or is refused.

A start under a policy is decided by the store, once, however many
processes start at the same moment: one transaction per decision, taking
its turn on the workflow's *gate* (a row locked until it commits), reads
what holds a slot and writes the outcome. Nothing is checked in Python and
acted on later.

The decision (:meth:`Admissions.admit`):

* a **deduplication id** seen before for the workflow: the first run's id,
  nothing new (``deduplicated``);
* a **debounce** window: the key's waiting run takes this input instead of
  its own and waits the window again from now; or a new run waits for it
  (``debounced``, status ``queued``);
* room under the **per key** cap (``1``: a singleton) and the workflow's
  **concurrency** cap: the run is admitted (``started``), status
  ``pending`` until started, leased to the caller when it drives it;
* no room: it waits its turn (``queued``), or is refused
  (``StartRefusedError``), as its policy says.

A run holds its slot from admission until it ends (completed, failed,
cancelled or stalled): a run resting on a request or a timer still holds it.
Queued runs are admitted first come first (:meth:`Admissions.admit_queued`,
called by whoever serves the store: a ``Runtime``, ``treadle worker``,
``treadle serve``), and an admitted run nobody started (its starter died
between the decision and the start) is started by them too
(:meth:`Admissions.claim_starts`). Schedules reuse the same decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from treadle._stores._records import Claimed, Lease
    from treadle._values._actors import Actor

Outcome = Literal["started", "queued", "debounced", "deduplicated"]
"""What the store decided about one start."""


@dataclass(frozen=True, slots=True)
class StartRequest:
    """One start for the store to decide, with its policy's values worked out.

    Attributes:
        run_id: The id the new run gets, if one is made.
        workflow: The workflow's name (gates and deduplication ids are per workflow).
        version: The workflow's version the run goes on with (0: the starter's choice is
            the newest a worker hosts).
        payload: The input, encoded by the workflow's serializer.
        key: The key its policy computed from the input (``""``: one key for all).
        per_key: Runs of one key that may hold a slot at once (``1``: a singleton);
            ``None``: no cap per key.
        concurrency: Runs of the workflow (started under a policy) that may hold a slot
            at once; ``None``: no cap.
        refuse: Whether a start finding no room is refused rather than queued.
        debounce: Seconds a start waits for a later one with the same key, which
            replaces its input; ``None``: none.
        dedup_id: The deduplication id; ``None``: none.
        deadline_at: The run's deadline (epoch seconds), kept while it waits.
        started_by: Who starts it (an actor as JSON text), kept in the run's row.
        at: When, on the starter's clock (``None``: the wall clock): where a
            debounce window starts and a queued start takes its place in line.
    """

    run_id: str
    workflow: str
    version: int
    payload: bytes
    key: str = ""
    per_key: int | None = None
    concurrency: int | None = None
    refuse: bool = False
    debounce: float | None = None
    dedup_id: str | None = None
    deadline_at: float | None = None
    started_by: str | None = None
    at: float | None = None

    @property
    def gated(self) -> bool:
        """Whether a slot is needed: a cap per key or on the workflow."""
        return self.per_key is not None or self.concurrency is not None


@dataclass(frozen=True, slots=True)
class Admission:
    """What the store decided about one start.

    Attributes:
        run_id: The run the start is: new, or the one it joined (deduplicated,
            debounced into a waiting run).
        outcome: ``"started"``, ``"queued"``, ``"debounced"`` or ``"deduplicated"``.
        lease: For a run started and leased to its caller, the lease it drives it under.
        status: The run's status as the store has it after the decision.
    """

    run_id: str
    outcome: Outcome
    status: str
    lease: Lease | None = None


def full_for(
    holding: Mapping[str, int], key: str, per_key: int | None, concurrency: int | None
) -> str | None:
    """What is full for a start of ``key``: ``"key"``, ``"concurrency"``, or ``None`` (room).

    ``holding``: how many runs hold a slot, by key, as the decider read it
    under the workflow's gate.
    """
    if per_key is not None and holding.get(key, 0) >= per_key:
        return "key"
    if concurrency is not None and sum(holding.values()) >= concurrency:
        return "concurrency"
    return None


class Admissions(Protocol):
    """Start policies, decided by the store (see the module docstring)."""

    async def admit(
        self,
        request: StartRequest,
        *,
        owner: str | None = None,
        duration: float = 0.0,
        actor: Actor | None = None,
    ) -> Admission:
        """Decide one start, once, whoever else starts at the same moment.

        With ``owner``, a run admitted at once is leased to it for
        ``duration`` seconds (it drives the run: ``create_run`` under that
        lease turns the admitted row into the started run); without, the run
        is left ready for a service or worker to start. With ``actor``, a
        new run's start is recorded (``run_created``), in the same transaction.

        Raises:
            StartRefusedError: No room, and the policy refuses (names the key and
                the runs holding it).
            RunExistsError: ``request.run_id`` is another run's.
        """
        ...

    async def admit_queued(self, workflows: Sequence[str], now: float, *, limit: int) -> int:
        """Admit queued starts of ``workflows`` whose turn has come; how many were.

        Each becomes a ``pending`` run ready for a worker (announced to
        idle ones on PostgreSQL), first come first, as room allows.
        """
        ...

    async def claim_starts(
        self, workflows: Sequence[str], owner: str, duration: float, now: float, *, limit: int
    ) -> list[Claimed]:
        """Admit what :meth:`admit_queued` would, then lease admitted runs nobody started.

        What a ``Runtime`` starts: each claimed run is ``pending`` with its
        input in its inbox; ``create_run`` under the lease starts it.
        """
        ...
