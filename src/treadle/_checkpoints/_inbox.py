"""A run's inbox as its owner reads it, and request timeouts kept there as answers.

The store keeps the first answer to each request id and refuses every later
one; that is where concurrent answers are decided. A request's deadline is
decided in the same place: the owner that finds it passed delivers a
*timeout marker* as the request's answer (:class:`InboxLedger`). If the
store keeps it, the request timed out and every later answer is refused
(``RequestExpiredError``, see :func:`expired_instead`); if an answer was
kept first, the answer wins. A marker is an ``"answer"`` item whose payload
no serializer writes (it starts with a NUL byte), so it is told apart
without being decoded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from treadle._engine._deadlines import InboxRead
from treadle._engine._errors import RunCancelledError
from treadle._exceptions import RequestAlreadyAnsweredError, RequestError, RequestExpiredError
from treadle._values._actors import Actor

TIMER = Actor.service("timer", "timer")
"""Who decides a request's timeout: the store records it as ``request_timed_out``."""

if TYPE_CHECKING:
    from collections.abc import Container, Sequence

    from treadle._checkpoints._ownership import Ownership
    from treadle._stores._lease_roles import Deliveries
    from treadle._stores._store import InboxItem
    from treadle._values._serialization import Serializer

_MARKER = "\x00timed out at "


def timeout_marker(deadline_at: float) -> bytes:
    """The payload of the answer that records a request's timeout."""
    return f"{_MARKER}{deadline_at!r}".encode()


def marker_deadline(answer: bytes | str) -> float | None:
    """The deadline a stored answer records, if it is a timeout marker (else ``None``).

    Takes the payload, or its preview as ``RequestAlreadyAnsweredError``
    and ``Store.answer_of`` show it.
    """
    text = answer.decode("utf-8", errors="replace") if isinstance(answer, bytes) else answer
    if not text.startswith(_MARKER):
        return None
    try:
        return float(text.removeprefix(_MARKER))
    except ValueError:
        return None


def expired_instead(
    error: RequestAlreadyAnsweredError,
) -> RequestAlreadyAnsweredError | RequestExpiredError:
    """The error to raise for an answer the store refused: expired, if a timeout won."""
    deadline = marker_deadline(error.answer)
    if deadline is None:
        return error
    return RequestExpiredError(error.run_id, error.request_id, deadline)


def applicable(items: Sequence[InboxItem], *, hold_messages: bool) -> Sequence[InboxItem]:
    """The items an owner applies at once: those before the first session message held back.

    A message sent under an input policy (``message:enqueue``, ...) is held
    back for the run's session inbox (``_checkpoints/_session_inbox.py``),
    which takes it when the policy lets it; ``hold_messages`` (a workflow
    whose sessions take input while a turn runs) holds back every message.
    What follows a held message waits behind it, so the store's order holds.
    """
    for index, item in enumerate(items):
        if item.kind.startswith("message:") or (hold_messages and item.kind == "message"):
            return items[:index]
    return items


def sort_inbox(
    items: Sequence[InboxItem],
    serializer: Serializer,
    pending: Container[str] | None = None,
    *,
    inputs: bool = True,
) -> InboxRead:
    """Sort a run's inbox items: answers, timeouts, session messages.

    With ``pending``, answers to any other request are left out (each was
    answered, or timed out, on another branch of the run's history);
    ``inputs=False`` leaves session messages out.
    """
    answers: dict[str, Any] = {}
    messages: list[tuple[Any, str | None]] = []
    expired: set[str] = set()
    for item in items:
        if item.kind == "answer":
            if pending is not None and item.target not in pending:
                continue
            if marker_deadline(item.payload) is not None:
                expired.add(str(item.target))
            else:
                answers[str(item.target)] = serializer.loads(item.payload)
        elif item.kind == "message" and inputs:
            messages.append((serializer.loads(item.payload), item.target))
    return InboxRead(answers, tuple(messages), frozenset(expired))


class InboxLedger:
    """The store deciding a run's request deadlines against its answers (``AnswerLedger``).

    Args:
        store: Where the run lives.
        run_id: The run.
        serializer: Decodes what the inbox holds.
        ownership: The lease the run is held under: what the owner reads
            here is marked applied with its next commit.
    """

    def __init__(
        self,
        store: Deliveries,
        run_id: str,
        serializer: Serializer,
        ownership: Ownership | None,
        *,
        hold_messages: bool = False,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._serializer = serializer
        self._ownership = ownership
        self._hold_messages = hold_messages

    async def expire(
        self, deadlines: Sequence[tuple[str, float]], *, whole: bool = True
    ) -> InboxRead:
        """Deliver a timeout marker for each request, then read the whole inbox.

        A marker the store refuses lost to an answer kept first, which the
        inbox then holds. Everything read is the caller's to apply: the
        run's next commit marks it applied. With ``whole=False`` only the
        answers and timeouts of these requests are returned and nothing is
        marked applied (a sub-workflow deciding its own requests' deadlines
        mid-superstep leaves the rest of the inbox to the run's next owner,
        who drops these as answered).

        Raises:
            RunCancelledError: the run was cancelled meanwhile (its inbox is closed).
            DurabilityError: the store failed.
        """
        store, run_id = self._store, self._run_id
        for request_id, deadline_at in deadlines:
            try:
                marker = [("answer", request_id, timeout_marker(deadline_at))]
                await store.deliver(run_id, marker, actor=TIMER)
            except RequestAlreadyAnsweredError:
                continue  # an answer was kept first: it wins, and is in the inbox
            except RequestError:
                raise RunCancelledError(run_id) from None  # the one way an owned run ends
        items = applicable(await store.inbox(run_id), hold_messages=self._hold_messages)
        if not whole:
            return sort_inbox(items, self._serializer, {key for key, _ in deadlines}, inputs=False)
        if items and self._ownership is not None:
            self._ownership.consumed = max(self._ownership.consumed or 0, items[-1].seq)
        return sort_inbox(items, self._serializer)
