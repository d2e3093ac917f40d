"""An invocation's context once its outcome was taken: what it refuses, and how it says so.

A handler may leave something behind that holds its context: a callback,
a task it started. What that does through the context after the handler
returned was once dropped without a word (the outcome had been taken),
while its caller went on as if it had sent, output or written. The
context closes its outbox, outputs and state writes once the outcome is
taken (``WorkflowContext.outcome``): the outbox becomes :data:`ENDED_OUTBOX`,
the outputs and the state's writes an empty tuple, none of them made anew,
so the handler's own calls cost nothing more; any later one is refused,
saying why (:func:`ended_error`).
"""

from __future__ import annotations

from typing import Any

ENDED_OUTBOX: Any = ((("", -1), -1, None, None),)
"""The outbox of an ended invocation: never empty, so a send goes the way of a second
send (``WorkflowContext._sends``), which refuses it."""


def ended_error(executor_id: str, what: str) -> RuntimeError:
    """The error of ``what`` (``"send a message"``...) tried after the invocation ended."""
    return RuntimeError(
        f"executor {executor_id!r} tried to {what} after its invocation ended (from a "
        f"callback or a task it left behind): nothing it does from here is committed; "
        f"do it before the handler returns"
    )
