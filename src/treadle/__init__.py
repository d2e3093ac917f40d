"""treadle: a durable workflow runtime for Python.

A workflow is a graph of executors exchanging typed messages over edges,
advanced in supersteps: every executor with messages runs, then a barrier
commits state and routes messages. See ``docs/semantics.md`` for the exact
guarantees.
"""

from treadle._engine._clock import Clock, SystemClock
from treadle._engine._context import WorkflowContext
from treadle._engine._delivery import HandoffContext, HandoffRefused, StalledFanIn
from treadle._engine._errors import (
    ExecutorFailedError,
    IterationLimitExceeded,
    RunCancelledError,
    RunTimeoutError,
    StateConflictError,
    WorkflowRunError,
)
from treadle._engine._events import (
    CheckpointSaved,
    CustomEvent,
    ExecutorCompleted,
    ExecutorFailed,
    ExecutorInvoked,
    ExecutorSuspended,
    OutputEvent,
    ProgressEvent,
    RequestEvent,
    RunStarted,
    StatusChanged,
    SuperstepCompleted,
    SuperstepStarted,
    WorkflowEvent,
)
from treadle._engine._result import RunResult, RunStatus
from treadle._engine._spawn import SpawnResult
from treadle._engine._state import SharedState
from treadle._engine._waits import PendingRequest
from treadle._exceptions import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    DurabilityError,
    ExecutorInUseError,
    GraphChangedError,
    HandlerTimeoutError,
    InvalidResponseError,
    JournalMismatchError,
    LeaseLostError,
    PollTimeout,
    RequestAlreadyAnsweredError,
    RequestError,
    RoutingError,
    RunBusyError,
    RunExistsError,
    RunNotFoundError,
    SerializationError,
    TreadleError,
    UnknownRequestError,
    WorkflowValidationError,
)
from treadle._graph._edges import Case, Default
from treadle._graph._executor import Executor, executor, handler
from treadle._graph._policies import ExponentialBackoff, RetryPolicy
from treadle._scaleout._apps import AppLoadError
from treadle._scaleout._client import Client, connect
from treadle._scaleout._worker import Worker, WorkerStoppingError
from treadle._workflow._builder import WorkflowBuilder
from treadle._workflow._runs import RunHistory
from treadle._workflow._service import Runtime
from treadle._workflow._stream import ExecutionMode, WorkflowStream
from treadle._workflow._sync import SyncEventStream
from treadle._workflow._workflow import Workflow

__all__ = [
    "AppLoadError",
    "Case",
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "CheckpointSaved",
    "Client",
    "Clock",
    "CustomEvent",
    "Default",
    "DurabilityError",
    "ExecutionMode",
    "Executor",
    "ExecutorCompleted",
    "ExecutorFailed",
    "ExecutorFailedError",
    "ExecutorInUseError",
    "ExecutorInvoked",
    "ExecutorSuspended",
    "ExponentialBackoff",
    "GraphChangedError",
    "HandlerTimeoutError",
    "HandoffContext",
    "HandoffRefused",
    "InvalidResponseError",
    "IterationLimitExceeded",
    "JournalMismatchError",
    "LeaseLostError",
    "OutputEvent",
    "PendingRequest",
    "PollTimeout",
    "ProgressEvent",
    "RequestAlreadyAnsweredError",
    "RequestError",
    "RequestEvent",
    "RetryPolicy",
    "RoutingError",
    "RunBusyError",
    "RunCancelledError",
    "RunExistsError",
    "RunHistory",
    "RunNotFoundError",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "RunTimeoutError",
    "Runtime",
    "SerializationError",
    "SharedState",
    "SpawnResult",
    "StalledFanIn",
    "StateConflictError",
    "StatusChanged",
    "SuperstepCompleted",
    "SuperstepStarted",
    "SyncEventStream",
    "SystemClock",
    "TreadleError",
    "UnknownRequestError",
    "Worker",
    "WorkerStoppingError",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowContext",
    "WorkflowEvent",
    "WorkflowRunError",
    "WorkflowStream",
    "WorkflowValidationError",
    "connect",
    "executor",
    "handler",
]
