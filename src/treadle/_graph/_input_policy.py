"""What a session does with a message that arrives while one of its turns is running.

A *turn* is what a session does between taking a message (its
``ctx.wait_for_input()`` returns) and waiting for the next one. A message
sent meanwhile meets one of six policies, a closed set of frozen values:
the workflow's (``WorkflowBuilder(input_policy=...)``), or the sender's
(``send_message(policy=...)``) on a workflow whose own is not ``reject``.

The policy travels with the message into the run's inbox, where the store
gives each message its place (its sequence number): that order decides,
once, which message starts a turn and which meet a turn already running,
however many processes send at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

PolicyKind: TypeAlias = Literal["reject", "enqueue", "merge", "interrupt", "rollback", "debounce"]

_KINDS: tuple[PolicyKind, ...] = ("reject", "enqueue", "merge", "interrupt", "rollback", "debounce")

LONGEST_DEBOUNCE = 300.0
"""The longest debounce window, in seconds.

A window is the quiet that ends a burst of messages, and the session's
driver waits it out holding the run: a sender's window of a year held the
run, and every message sent after it, for a year. Wait longer with a timer
(``ctx.sleep``) in the turn.
"""


@dataclass(frozen=True, slots=True)
class InputPolicy:
    """How a session takes a message sent while a turn is running.

    Use the constants and :meth:`debounce`:

    - ``InputPolicy.REJECT`` (the default): the sender gets
      ``SessionBusyError``; nothing is delivered.
    - ``InputPolicy.ENQUEUE``: kept in the run's inbox and delivered when the
      session next waits for input, one message per turn, in arrival order.
    - ``InputPolicy.MERGE``: delivered into the running turn, as a message
      to the session's executor in the next superstep.
    - ``InputPolicy.INTERRUPT``: at the next superstep boundary the turn's
      pending work is dropped (what it committed stays) and the message is
      delivered to the session's executor instead.
    - ``InputPolicy.ROLLBACK``: the turn is abandoned at the next superstep
      boundary (its checkpoints stay in the run's history) and the run
      branches from the checkpoint where the turn began, delivering the
      message there instead of the one that started the turn.
    - ``InputPolicy.debounce(seconds)``: messages less than ``seconds``
      apart are coalesced; once ``seconds`` pass with none, the session
      takes them all at once, as one ``list`` in arrival order (a list of
      one when one came alone).

    Attributes:
        kind: One of the six names above.
        window: For ``debounce``: the quiet seconds that end a burst.
    """

    kind: PolicyKind
    window: float = 0.0

    REJECT: ClassVar[InputPolicy]
    ENQUEUE: ClassVar[InputPolicy]
    MERGE: ClassVar[InputPolicy]
    INTERRUPT: ClassVar[InputPolicy]
    ROLLBACK: ClassVar[InputPolicy]

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            msg = f"input policy must be one of {', '.join(_KINDS)}; got {self.kind!r}"
            raise ValueError(msg)
        if self.kind == "debounce":
            if not (isinstance(self.window, (int, float)) and math.isfinite(self.window)):
                msg = f"debounce window must be a number of seconds, got {self.window!r}"
                raise TypeError(msg)
            if self.window <= 0:
                msg = f"debounce window must be positive, got {self.window}"
                raise ValueError(msg)
            if self.window > LONGEST_DEBOUNCE:
                msg = (
                    f"debounce window must be at most {LONGEST_DEBOUNCE:g} s (the quiet that"
                    f" ends a burst; a longer wait is a timer in the turn), got {self.window:g}"
                )
                raise ValueError(msg)
        elif self.window:
            msg = f"only debounce takes a window; {self.kind} got {self.window}"
            raise ValueError(msg)

    @classmethod
    def debounce(cls, window: float | dt.timedelta) -> InputPolicy:
        """Coalesce messages less than ``window`` apart; deliver them once it passes quietly."""
        seconds = window.total_seconds() if isinstance(window, dt.timedelta) else window
        return cls("debounce", seconds)

    @classmethod
    def parse(cls, text: str) -> InputPolicy:
        """The policy a command line or a JSON body names: ``"enqueue"``, ``"debounce:2.5"``.

        Raises:
            ValueError: no such policy, or a debounce window that is not a
                positive number of seconds up to :data:`LONGEST_DEBOUNCE`.
        """
        name, _, window = text.strip().partition(":")
        if name == "debounce":
            try:
                seconds = float(window)
            except ValueError:
                msg = f"debounce needs a window in seconds, as 'debounce:2.5'; got {text!r}"
                raise ValueError(msg) from None
            try:
                return cls.debounce(seconds)
            except TypeError as error:  # not a finite number (nan, inf)
                raise ValueError(str(error)) from None
        if window:
            msg = f"only debounce takes a window (as 'debounce:2.5'); got {text!r}"
            raise ValueError(msg)
        return cls(name)  # type: ignore[arg-type]  # checked by __post_init__

    @property
    def watches_turns(self) -> bool:
        """Whether a session with this policy takes messages while a turn runs (not ``reject``)."""
        return self.kind != "reject"

    def __str__(self) -> str:
        """Its name, as :meth:`parse` reads it back (``debounce:2.5``)."""
        return f"debounce:{self.window:g}" if self.kind == "debounce" else self.kind


InputPolicy.REJECT = InputPolicy("reject")
InputPolicy.ENQUEUE = InputPolicy("enqueue")
InputPolicy.MERGE = InputPolicy("merge")
InputPolicy.INTERRUPT = InputPolicy("interrupt")
InputPolicy.ROLLBACK = InputPolicy("rollback")

MESSAGE_KIND = "message"
"""The inbox kind of a session message under ``reject`` (as every message was before policies)."""


def inbox_kind(policy: InputPolicy) -> str:
    """The inbox kind a message sent under ``policy`` is stored with: ``message:enqueue``."""
    return MESSAGE_KIND if policy.kind == "reject" else f"{MESSAGE_KIND}:{policy}"


def policy_of_kind(kind: str) -> InputPolicy | None:
    """The policy an inbox kind names (``None``: not a session message)."""
    if kind == MESSAGE_KIND:
        return InputPolicy.REJECT
    if not kind.startswith(MESSAGE_KIND + ":"):
        return None
    name = kind[len(MESSAGE_KIND) + 1 :]
    if name.startswith("debounce:"):  # kept before windows were bounded: the bound, then
        with contextlib.suppress(ValueError):
            if float(name.partition(":")[2]) > LONGEST_DEBOUNCE:
                return InputPolicy.debounce(LONGEST_DEBOUNCE)
    return InputPolicy.parse(name)
