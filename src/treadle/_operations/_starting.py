"""A start policy as the command line and the HTTP API give it: plain values, a key as text.

``treadle run --singleton --key acme``, ``treadle start --dedup-id ...`` and
``POST /api/runs`` with ``"start_policy": {...}`` each say a policy for one
start without code: its key is given as is, not computed from the input.
What is left out is the workflow's own (``docs/flow-control.md``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from treadle._exceptions import CommandError
from treadle._workflow._start_policy import StartPolicy

if TYPE_CHECKING:
    from treadle._workflow._start_policy import WhenBusy


@dataclasses.dataclass(frozen=True, slots=True)
class GivenKey:
    """A policy's key given as text for one start: every input has it."""

    text: str

    def __call__(self, message: Any) -> str:  # noqa: ARG002 - the same key whatever the input
        """The key given, whatever the input."""
        return self.text


def chosen_policy(
    workflow_policy: StartPolicy,
    *,
    key: str | None = None,
    singleton: bool | None = None,
    concurrency: int | None = None,
    when_busy: str | None = None,
    debounce: float | None = None,
) -> StartPolicy | None:
    """The policy one start asks for, or ``None``: the workflow's own.

    Any of ``singleton``, ``concurrency``, ``when_busy`` or ``debounce``
    makes a policy of its own for the start; ``key`` alone keeps the
    workflow's and gives it this key.

    Raises:
        CommandError: The policy is not valid (the message says what is wrong).
    """
    shaped = any(value is not None for value in (singleton, concurrency, when_busy, debounce))
    if key is not None and not key:
        raise CommandError("the start policy's key must not be empty")
    given = GivenKey(key) if key is not None else None
    try:
        if not shaped:
            return None if given is None else dataclasses.replace(workflow_policy, key=given)
        keyed = bool(singleton) or debounce is not None
        chosen: WhenBusy = "queue" if when_busy is None else when_busy  # type: ignore[assignment]
        return StartPolicy(
            key=(given or workflow_policy.key) if keyed else given,
            singleton=bool(singleton),
            concurrency=concurrency,
            when_busy=chosen,
            debounce=debounce,
        )
    except ValueError as error:
        raise CommandError(str(error)) from None


@dataclasses.dataclass(frozen=True, slots=True)
class StartChoice:
    """What one start asks of its workflow's start policy, as a command or a request gave it."""

    dedup_id: str | None = None
    key: str | None = None
    singleton: bool = False
    queue_concurrency: int | None = None
    when_busy: str | None = None
    debounce: float | None = None

    def policy(self, workflow_policy: StartPolicy) -> StartPolicy | None:
        """The policy for this start (``None``: the workflow's own).

        Raises:
            CommandError: The flags make no valid policy (says what is wrong).
        """
        return chosen_policy(
            workflow_policy,
            key=self.key,
            singleton=self.singleton or None,
            concurrency=self.queue_concurrency,
            when_busy=self.when_busy,
            debounce=self.debounce,
        )

    @property
    def given(self) -> bool:
        """Whether the start asks for anything (else the workflow's policy alone applies)."""
        return self != StartChoice()


NO_CHOICE = StartChoice()
"""A start that asks nothing of its own: its workflow's policy applies."""
