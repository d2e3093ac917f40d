"""Error routes: a failure that has spent its retries, turned into a message.

An executor with an error route (``builder.add_error_edge(source, handler)``)
does not fail the run when its last attempt fails: the invocation ends
with an outcome whose only send is an :class:`ExecutorFailure` to the
handler, and the barrier commits the rest of the superstep as usual. The
failure travels as that send, stamped like one (the failed invocation's
superstep, rank, inbox position, send sequence 0), so the barrier, the
inboxes, the checkpoint and every execution mode treat it as any other
message: nothing on the path of an invocation that succeeds changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from treadle._engine._invocation import InvocationOutcome
from treadle._engine._routing import NOT_FAN_IN
from treadle._exceptions import RemoteHandlerError
from treadle._values._text import message_of, traceback_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from treadle._engine._events import WorkflowEvent
    from treadle._engine._invocation import Invocation


@dataclass(frozen=True, slots=True)
class ExecutorFailure:
    """An executor's failure, delivered along its error route to the handler.

    The failed invocation committed nothing of its own (what it sent, wrote
    or output is discarded, as for a failed attempt); the rest of its
    superstep committed, and this message arrives in the next superstep.
    It is checkpointed with the run like any pending message, so every
    field is plain text apart from ``input``.

    Attributes:
        executor_id: The executor whose handler failed.
        error_type: The exception's class, as ``module.QualName``
            (``builtins.ValueError``; for a handler that raised on an
            executor pool, the class it raised there).
        message: ``str()`` of the exception.
        traceback: The formatted traceback (for a pool, the worker's).
        input: The message the failed invocation was handling.
        attempts: How many attempts were made (the retry policy's count).
    """

    executor_id: str
    error_type: str
    message: str
    traceback: str
    input: Any
    attempts: int = 1


def routed_failure(
    invocation: Invocation,
    error: Exception,
    attempts: int,
    handler: str,
    events: Sequence[WorkflowEvent],
) -> InvocationOutcome:
    """The outcome of an invocation whose failure goes to ``handler``: that message only.

    ``events`` are the ones kept for the barrier's batch (every attempt's).
    """
    if isinstance(error, RemoteHandlerError):  # the worker's exception, never unpickled
        error_type = error.remote_type
        message = error.remote_message
        text = error.remote_traceback
    else:
        cls = type(error)
        error_type = f"{cls.__module__}.{cls.__qualname__}"
        message = message_of(error)
        text = traceback_of(error)
    failure = ExecutorFailure(
        invocation.executor.id, error_type, message, text, invocation.envelope.payload, attempts
    )
    return InvocationOutcome(((handler, NOT_FAN_IN, failure, None),), (), (), events, None, None)
