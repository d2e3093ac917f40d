"""``StartPolicy``: how starts of a workflow take turns, decided by its store.

One frozen value says it all, set on the workflow (``WorkflowBuilder(...,
start_policy=)``, a YAML definition's ``start:``) and replaced per start
where a caller knows better (``start_policy=``); the deduplication id is
the one part that belongs to a single start (``deduplication_id=``). The
store decides each start once (``treadle._stores._starts``): this module
only turns the policy and one input into the values it decides on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from treadle._stores._starts import StartRequest
from treadle._values._text import checked_name

if TYPE_CHECKING:
    from collections.abc import Callable

WhenBusy = Literal["queue", "refuse"]
"""What a start finding no room does: wait its turn, or be refused (``StartRefusedError``)."""


@dataclass(frozen=True, slots=True)
class StartPolicy:
    """How starts of a workflow take turns: one run per key, a queue, debounce.

    ``StartPolicy()`` (every field left out) is no policy: each start is a
    run at once, as without one. Give it to ``WorkflowBuilder(start_policy=)``
    for every start of the workflow, or to a start (``run``, ``Runtime.start``,
    the client's ``start``, ``--singleton`` and the like) to replace the
    workflow's for that start. A policy needs a store: the store decides each
    start once, however many processes start at the same moment.

    A run *holds a slot* from the moment it is admitted until it ends
    (completed, failed, cancelled, stalled): resting on a request or a timer
    it still holds it. A queued run has status ``QUEUED``, its input kept
    with it; whoever serves the store (a ``Runtime``, ``treadle worker``,
    ``treadle serve``) starts it when its turn comes, first come first.

    Attributes:
        key: What "the same" means for ``singleton`` and ``debounce``: a function
            of the input (``lambda order: order.customer``; its result is used as
            text). ``None``: every start of the workflow has the same key.
        singleton: One run per key at a time; another start of the key waits
            until it ends, or is refused (``when_busy``).
        concurrency: At most this many runs of the workflow (of those started
            under a policy) hold a slot at once; the others wait their turn.
        when_busy: ``"queue"`` (the default): a start finding no room waits its
            turn; ``"refuse"``: it raises ``StartRefusedError`` and nothing starts.
        debounce: Seconds (or a ``timedelta``) a start waits for another of its
            key: each later one replaces its input and the wait begins again,
            so one run starts, with the last input, once starts stop for this long.
    """

    key: Callable[[Any], Any] | None = None
    singleton: bool = False
    concurrency: int | None = None
    when_busy: WhenBusy = "queue"
    debounce: float | dt.timedelta | None = None

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("StartPolicy: " + "; ".join(problems))

    @property
    def is_empty(self) -> bool:
        """Whether it is no policy at all: every start is a run at once."""
        return not (self.singleton or self.concurrency is not None or self.debounce is not None)

    @property
    def window(self) -> float | None:
        """The debounce window in seconds (``None``: no debounce)."""
        if isinstance(self.debounce, dt.timedelta):
            return self.debounce.total_seconds()
        return None if self.debounce is None else float(self.debounce)

    def key_of(self, message: Any, workflow: str) -> str:
        """The key of one input: the policy's ``key`` function's result, as text.

        Raises:
            ValueError: The function raised, or gave ``None`` (the error names the workflow).
        """
        if self.key is None:
            return ""
        try:
            found = self.key(message)
        except Exception as error:
            msg = (
                f"the start policy of workflow {workflow!r} could not compute the key of "
                f"input {message!r}: {type(error).__name__}: {error}"
            )
            raise ValueError(msg) from error
        if found is None:
            msg = (
                f"the start policy of workflow {workflow!r} computed no key (None) for input "
                f"{message!r}: the key function must give a value for every input"
            )
            raise ValueError(msg)
        return str(found)

    def request(
        self,
        message: Any,
        *,
        run_id: str,
        workflow: str,
        version: int,
        payload: bytes,
        dedup_id: str | None,
        deadline_at: float | None,
        started_by: str | None,
        at: float | None,
        key: str | None = None,
    ) -> StartRequest:
        """What the store decides one start on: this policy for ``message``.

        ``key``: given as is (a caller with no code to compute it: the
        client, the CLI, the API), instead of the policy's ``key`` function.
        """
        if dedup_id is not None and not dedup_id:
            msg = "deduplication_id must be a non-empty text, or None"
            raise ValueError(msg)
        if dedup_id is not None:
            checked_name("deduplication_id", dedup_id)
        return StartRequest(
            run_id,
            workflow,
            version,
            payload,
            key=key if key is not None else self.key_of(message, workflow),
            per_key=1 if self.singleton else None,
            concurrency=self.concurrency,
            refuse=self.when_busy == "refuse",
            debounce=self.window,
            dedup_id=dedup_id,
            deadline_at=deadline_at,
            started_by=started_by,
            at=at,
        )


def _problems(policy: StartPolicy) -> list[str]:
    problems: list[str] = []
    if policy.key is not None and not callable(policy.key):
        problems.append(f"key must be a function of the input, got {policy.key!r}")
    if not isinstance(policy.singleton, bool):
        problems.append(f"singleton must be True or False, got {policy.singleton!r}")
    concurrency = policy.concurrency
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        problems.append(f"concurrency must be a whole number of at least 1, got {concurrency!r}")
    if policy.when_busy not in ("queue", "refuse"):
        problems.append(f"when_busy must be 'queue' or 'refuse', got {policy.when_busy!r}")
    debounce = policy.debounce
    seconds = debounce.total_seconds() if isinstance(debounce, dt.timedelta) else debounce
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
    ):
        problems.append(f"debounce must be a positive number of seconds, got {debounce!r}")
    capped = policy.singleton or policy.concurrency is not None
    if policy.when_busy == "refuse" and not capped:
        problems.append("when_busy='refuse' needs singleton=True or a concurrency to be busy")
    if policy.when_busy == "refuse" and debounce is not None:
        problems.append(
            "when_busy='refuse' cannot go with debounce: a debounced start is admitted "
            "later, with nobody there to refuse"
        )
    if policy.key is not None and not (policy.singleton or debounce is not None):
        problems.append("key is used by singleton and debounce: give one of them, or no key")
    return problems


NO_START_POLICY = StartPolicy()
"""Every start a run at once: a workflow's policy when it was given none."""
