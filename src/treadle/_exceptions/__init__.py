"""Every error treadle raises on purpose, defined in this package.

``_core`` holds the errors of building, running and steering workflows;
``_flow`` those of call limits; ``_durability`` those of stores and checkpoints.

The tree, rooted at :class:`TreadleError`, is drawn and exported by
``treadle.errors``. Only the errors that end a run (``WorkflowRunError`` and
its kin, ``RunCancelledError``) live elsewhere, in ``treadle._engine._errors``,
because they carry the run's ``RunResult``; this package imports nothing else
of treadle, so every floor may raise what it defines.

Internal control flow (suspension, cancellation) derives from ``BaseException``
and is never exported: user ``except Exception`` blocks must not swallow it.
"""

from treadle._exceptions._core import (
    ActionRefusedError,
    AppLoadError,
    CommandError,
    DefinitionError,
    ExecutorInUseError,
    FilterError,
    HandlerTimeoutError,
    InvalidResponseError,
    JournalMismatchError,
    LinkRefusedError,
    MigrationError,
    PollTimeout,
    PoolError,
    RemoteHandlerError,
    RequestAlreadyAnsweredError,
    RequestError,
    RequestExpiredError,
    RequestTimeoutError,
    RoutingError,
    RunBusyError,
    RunPausedError,
    SessionBusyError,
    StartRefusedError,
    SubWorkflowError,
    TreadleError,
    UnknownRequestError,
    WorkerLostError,
    WorkflowValidationError,
)
from treadle._exceptions._durability import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    DurabilityError,
    EventLogCorruptError,
    GraphChangedError,
    LeaseLostError,
    RunExistsError,
    RunHasForksError,
    RunNotFoundError,
    ScheduleExistsError,
    ScheduleNotFoundError,
    SerializationError,
    VersionMismatchError,
    WorkerStoppingError,
)
from treadle._exceptions._flow import CallLimitError, ProviderBusyError

__all__ = [
    "ActionRefusedError",
    "AppLoadError",
    "CallLimitError",
    "CheckpointCorruptError",
    "CheckpointNotFoundError",
    "CommandError",
    "DefinitionError",
    "DurabilityError",
    "EventLogCorruptError",
    "ExecutorInUseError",
    "FilterError",
    "GraphChangedError",
    "HandlerTimeoutError",
    "InvalidResponseError",
    "JournalMismatchError",
    "LeaseLostError",
    "LinkRefusedError",
    "MigrationError",
    "PollTimeout",
    "PoolError",
    "ProviderBusyError",
    "RemoteHandlerError",
    "RequestAlreadyAnsweredError",
    "RequestError",
    "RequestExpiredError",
    "RequestTimeoutError",
    "RoutingError",
    "RunBusyError",
    "RunExistsError",
    "RunHasForksError",
    "RunNotFoundError",
    "RunPausedError",
    "ScheduleExistsError",
    "ScheduleNotFoundError",
    "SerializationError",
    "SessionBusyError",
    "StartRefusedError",
    "SubWorkflowError",
    "TreadleError",
    "UnknownRequestError",
    "VersionMismatchError",
    "WorkerLostError",
    "WorkerStoppingError",
    "WorkflowValidationError",
]
