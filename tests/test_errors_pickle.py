"""Every public error survives pickling: the same type, message and attributes.

An error crosses processes in a pickle: a ``concurrent.futures`` process pool's,
a task queue's (Celery, RQ), a Dask worker's. Pickle remakes an exception by
calling its class with its message; treadle's errors take what their message is
made of instead (a run id, a deadline), so 38 of the 53 came back wrong or not at
all: ``TypeError: missing ... required positional arguments``, another message, or
(a ``TimeoutError``, a ``PermissionError``) none. ``TreadleError.__reduce__``
remakes them without that call.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from treadle import errors

# One instance of each public error, made as the runtime makes it.
MADE = {
    "ActionRefusedError": lambda: errors.ActionRefusedError("ann", "cancel", "r1", "not hers"),
    "AppLoadError": lambda: errors.AppLoadError("no module named 'app'"),
    "CallLimitError": lambda: errors.CallLimitError("llm", "the queue is full"),
    "CheckpointCorruptError": lambda: errors.CheckpointCorruptError("r1", "c1", "bad digest"),
    "CheckpointNotFoundError": lambda: errors.CheckpointNotFoundError("r1", "c1", "pruned"),
    "CommandError": lambda: errors.CommandError("no such run"),
    "DefinitionError": lambda: errors.DefinitionError(["nodes.a: unknown kind", "edges: empty"]),
    "DurabilityError": lambda: errors.DurabilityError("the disk is full"),
    "EventLogCorruptError": lambda: errors.EventLogCorruptError("r1", 7, "not JSON"),
    "ExecutorFailedError": lambda: errors.ExecutorFailedError("charge", 3, ValueError("declined")),
    "ExecutorInUseError": lambda: errors.ExecutorInUseError("charge", "r2"),
    "FilterError": lambda: errors.FilterError("unknown field 'stauts'", 5),
    "GraphChangedError": lambda: errors.GraphChangedError("r1", ["executor 'b' is gone"]),
    "HandlerTimeoutError": lambda: errors.HandlerTimeoutError("charge", 2.5),
    "InvalidResponseError": lambda: errors.InvalidResponseError("expected a bool"),
    "IterationLimitExceeded": lambda: errors.IterationLimitExceeded("too many", ["loop"], 100),
    "JournalMismatchError": lambda: errors.JournalMismatchError("agent", 2, "search", "fetch"),
    "LeaseLostError": lambda: errors.LeaseLostError("r1", 4),
    "LinkRefusedError": lambda: errors.LinkRefusedError("this link is spent", "used"),
    "MigrationError": lambda: errors.MigrationError(["no executor 'c'", "bad state"], "r1"),
    "OutcomeConflictError": lambda: errors.OutcomeConflictError(["a", "b"], ["won", "lost"], 2),
    "PollTimeout": lambda: errors.PollTimeout("no answer in 30 s"),
    "PoolError": lambda: errors.PoolError("charge", "the scheduler is gone"),
    "ProviderBusyError": lambda: errors.ProviderBusyError(1.5, "429 Too Many Requests"),
    "RemoteHandlerError": lambda: errors.RemoteHandlerError(
        "charge", ["app.Declined", "builtins.Exception"], "declined", "Traceback ..."
    ),
    "RequestAlreadyAnsweredError": lambda: errors.RequestAlreadyAnsweredError(
        "r1", "q1", "true", 1_700_000_000.0, answered_by="ann"
    ),
    "RequestError": lambda: errors.RequestError("no such request"),
    "RequestExpiredError": lambda: errors.RequestExpiredError("r1", "q1", 1_700_000_000.0),
    "RequestTimeoutError": lambda: errors.RequestTimeoutError("review", "q1", 1_700_000_000.0),
    "RoutingError": lambda: errors.RoutingError("nowhere to go"),
    "RunBusyError": lambda: errors.RunBusyError("r1", "worker-1", 1_700_000_000.0),
    "RunCancelledError": lambda: errors.RunCancelledError("r1"),
    "RunExistsError": lambda: errors.RunExistsError("r1"),
    "RunHasForksError": lambda: errors.RunHasForksError("r1", ["r2", "r3"]),
    "RunNotFoundError": lambda: errors.RunNotFoundError("r1"),
    "RunPausedError": lambda: errors.RunPausedError("r1"),
    "RunTimeoutError": lambda: errors.RunTimeoutError("r1", 1_700_000_000.0, 4),
    "ScheduleExistsError": lambda: errors.ScheduleExistsError("nightly"),
    "ScheduleNotFoundError": lambda: errors.ScheduleNotFoundError("nightly"),
    "SerializationError": lambda: errors.SerializationError("cannot encode a socket"),
    "SessionBusyError": lambda: errors.SessionBusyError("r1", "a turn runs", "w1", 5.0),
    "StartRefusedError": lambda: errors.StartRefusedError("orders", "c42", ["r1"], "one at once"),
    "StateConflictError": lambda: errors.StateConflictError("total", ["a", "b"], 2),
    "SubWorkflowError": lambda: errors.SubWorkflowError("the child failed"),
    "TreadleError": lambda: errors.TreadleError("something"),
    "UnanswerableWaitError": lambda: errors.UnanswerableWaitError("r1", [("review", "q1")]),
    "UnknownRequestError": lambda: errors.UnknownRequestError("no request 'q9'"),
    "VersionMismatchError": lambda: errors.VersionMismatchError("r1", "orders", 1, 2),
    "WorkerLostError": lambda: errors.WorkerLostError("charge", "the worker died"),
    "WorkerStoppingError": lambda: errors.WorkerStoppingError("the worker stops"),
    "WorkflowRunError": lambda: errors.WorkflowRunError("the run failed"),
    "WorkflowValidationError": lambda: errors.WorkflowValidationError(["no start"]),
}


def test_every_public_error_has_an_instance_here():
    exported = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert exported == set(MADE)


def _same(back: BaseException, error: BaseException) -> None:
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    # Attributes compared by repr: an error an attribute holds equals only itself.
    assert repr(sorted(vars(back).items())) == repr(sorted(vars(error).items()))


@pytest.mark.parametrize("name", sorted(MADE))
@pytest.mark.parametrize("protocol", [0, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
def test_a_public_error_pickles_to_the_same_type_message_and_attributes(name, protocol):
    error = MADE[name]()
    dumped = pickle.dumps(error, protocol=protocol)
    assert b"treadle._" not in dumped  # named by its public path
    _same(pickle.loads(dumped), error)  # noqa: S301 - our own bytes


_CHILD = """
import pickle, sys
from treadle import errors
error = errors.RunBusyError("r1", "worker-1", 1700000000.0)
sys.stdout.buffer.write(pickle.dumps(error))
"""


def test_an_error_raised_in_another_process_arrives_whole():
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, check=True)
    error = pickle.loads(done.stdout)  # noqa: S301 - our own child's bytes
    assert isinstance(error, errors.RunBusyError)
    assert error.run_id == "r1"
    assert error.owner == "worker-1"
    assert "worker-1" in str(error)
