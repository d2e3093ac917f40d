"""Every error treadle raises on purpose, in one tree.

Catch :class:`TreadleError` to handle anything the runtime reports; catch a
leaf to handle one situation. Bad arguments to a public function raise the
built-in ``ValueError`` or ``TypeError`` instead, because they are bugs in the
calling code rather than conditions of a run. A class that also derives from
a built-in exception says so in brackets, so ``except TimeoutError`` and
``except LookupError`` catch those too.

::

    TreadleError
    ├── WorkflowValidationError      the builder found problems; lists them all
    ├── DefinitionError              a declarative definition has problems; file:line:col each
    ├── ExecutorInUseError           a non-shareable instance is in another run
    ├── FilterError                  a filter of runs cannot be read; names the column [ValueError]
    ├── RoutingError                 a message has no edge that can carry it
    ├── HandlerTimeoutError          a handler ran past its timeout [TimeoutError]
    ├── RemoteHandlerError           a handler on an executor pool raised; names the type
    ├── PoolError                    an executor pool could not run an invocation
    │   └── WorkerLostError          the worker running it died or left the cluster
    ├── PollTimeout                  poll_until_complete ran past max_duration [TimeoutError]
    ├── RequestTimeoutError          a request(timeout=) was not answered in time [TimeoutError]
    ├── JournalMismatchError         a re-executed handler took another path
    ├── SubWorkflowError             a sub-workflow stalled, or output an undeclared type
    ├── AppLoadError                 an import path holds no workflow [LookupError]
    ├── CommandError                 a CLI command cannot be done as asked
    │   └── LinkRefusedError         an answer link is tampered, expired, used or another's
    ├── MigrationError               a migration cannot move a run; lists every reason
    ├── ActionRefusedError           the actor may not do this; names who may [PermissionError]
    ├── StartRefusedError            a start policy refused: its key or queue is taken
    ├── ProviderBusyError            a limited call's provider answered 429; slows its limits
    ├── CallLimitError               a call limit can never admit a call; names the limit
    ├── RequestError                 respond / send_message cannot be applied
    │   ├── UnknownRequestError      no such request is waiting [LookupError]
    │   │   ├── RequestAlreadyAnsweredError  another answer won; names it
    │   │   └── RequestExpiredError  the request's timeout won; names the deadline
    │   ├── InvalidResponseError     the answer has the wrong type [TypeError]
    │   ├── RunBusyError             another process owns the run now
    │   │   └── SessionBusyError     a session's turn runs, and its policy is reject
    │   └── RunPausedError           the run is paused until it is unpaused
    ├── WorkflowRunError             the run stopped as FAILED
    │   ├── ExecutorFailedError      a handler raised (the cause is chained)
    │   ├── StateConflictError       two executors set one key in a superstep
    │   ├── OutcomeConflictError     two executors set different outcomes in a superstep
    │   ├── IterationLimitExceeded   max_supersteps / max_node_iterations hit
    │   ├── RunTimeoutError          the run passed its deadline [TimeoutError]
    │   └── UnanswerableWaitError    no store, so nothing can answer what it waits for
    ├── RunCancelledError            the run was cancelled while a caller waited
    └── DurabilityError              storing or restoring a run failed
        ├── SerializationError       a value cannot be stored or restored
        ├── CheckpointCorruptError   a stored checkpoint fails its checksum
        ├── EventLogCorruptError     a stored row of a run's event log cannot be read
        ├── RunNotFoundError         the store has no run with that id [LookupError]
        ├── CheckpointNotFoundError  the run has no such checkpoint [LookupError]
        ├── RunExistsError           a run with that id exists already
        ├── RunHasForksError         a run with forks cannot be deleted before them
        ├── ScheduleNotFoundError    the store has no schedule with that id [LookupError]
        ├── ScheduleExistsError      a schedule with that id exists already
        ├── LeaseLostError           this process no longer owns the run
        ├── WorkerStoppingError      the worker shut down and released the run
        └── GraphChangedError        the stored run was made by another graph
            └── VersionMismatchError another version of the workflow goes on with it

``WorkflowRunError`` and ``RunCancelledError`` carry the run's committed
``RunResult`` as ``result``. Internal control flow (suspension,
cancellation) derives from ``BaseException`` and is never exported: user
``except Exception`` blocks must not swallow it.
"""

from treadle._engine._errors import (
    ExecutorFailedError,
    IterationLimitExceeded,
    OutcomeConflictError,
    RunCancelledError,
    RunTimeoutError,
    StateConflictError,
    UnanswerableWaitError,
    WorkflowRunError,
)
from treadle._exceptions import (
    ActionRefusedError,
    AppLoadError,
    CallLimitError,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    CommandError,
    DefinitionError,
    DurabilityError,
    EventLogCorruptError,
    ExecutorInUseError,
    FilterError,
    GraphChangedError,
    HandlerTimeoutError,
    InvalidResponseError,
    JournalMismatchError,
    LeaseLostError,
    LinkRefusedError,
    MigrationError,
    PollTimeout,
    PoolError,
    ProviderBusyError,
    RemoteHandlerError,
    RequestAlreadyAnsweredError,
    RequestError,
    RequestExpiredError,
    RequestTimeoutError,
    RoutingError,
    RunBusyError,
    RunExistsError,
    RunHasForksError,
    RunNotFoundError,
    RunPausedError,
    ScheduleExistsError,
    ScheduleNotFoundError,
    SerializationError,
    SessionBusyError,
    StartRefusedError,
    SubWorkflowError,
    TreadleError,
    UnknownRequestError,
    VersionMismatchError,
    WorkerLostError,
    WorkerStoppingError,
    WorkflowValidationError,
)
from treadle._public import publish

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
    "ExecutorFailedError",
    "ExecutorInUseError",
    "FilterError",
    "GraphChangedError",
    "HandlerTimeoutError",
    "InvalidResponseError",
    "IterationLimitExceeded",
    "JournalMismatchError",
    "LeaseLostError",
    "LinkRefusedError",
    "MigrationError",
    "OutcomeConflictError",
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
    "RunCancelledError",
    "RunExistsError",
    "RunHasForksError",
    "RunNotFoundError",
    "RunPausedError",
    "RunTimeoutError",
    "ScheduleExistsError",
    "ScheduleNotFoundError",
    "SerializationError",
    "SessionBusyError",
    "StartRefusedError",
    "StateConflictError",
    "SubWorkflowError",
    "TreadleError",
    "UnanswerableWaitError",
    "UnknownRequestError",
    "VersionMismatchError",
    "WorkerLostError",
    "WorkerStoppingError",
    "WorkflowRunError",
    "WorkflowValidationError",
]

publish(__name__, globals(), __all__)
