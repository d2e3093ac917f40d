"""treadle: a durable workflow runtime for Python.

A workflow is a graph of executors exchanging typed messages over edges,
advanced in supersteps: every executor with messages runs, then a barrier
commits state and routes messages. See ``docs/semantics.md`` for the exact
guarantees.

This namespace holds what you build and run workflows with. The rest lives
in secondary namespaces, one home per name: ``treadle.errors`` (the whole
exception tree, rooted at ``TreadleError``), ``treadle.events`` (what a run
reports), ``treadle.stores`` (where runs live), ``treadle.workers`` (many
processes on PostgreSQL), ``treadle.dask`` (executors on a Dask cluster),
``treadle.serialization``, ``treadle.testing``, ``treadle.otel`` and
``treadle.declarative`` (workflows written in YAML or JSON: ``treadle.load``)
and ``treadle.versions`` (migrations that move runs between versions).
"""

from treadle._declarative._entry import load
from treadle._engine._clock import Clock, SystemClock
from treadle._engine._context import WorkflowContext
from treadle._engine._delivery import HandoffContext, HandoffRefused, StalledFanIn
from treadle._engine._failure import ExecutorFailure
from treadle._engine._later import ScheduledHandle
from treadle._engine._options import Durability, RunOptions
from treadle._engine._result import RunResult, RunStatus
from treadle._engine._spawn import SpawnResult
from treadle._engine._state import SharedState
from treadle._engine._tracing import TraceSpan, Tracing
from treadle._engine._waits import PendingRequest
from treadle._graph._edges import Case, Default
from treadle._graph._executor import Executor, handler
from treadle._graph._function_executor import executor
from treadle._graph._input_policy import InputPolicy
from treadle._graph._limits import CallLimit, LimitCall, Rate, TokenRate
from treadle._graph._policies import ExponentialBackoff, RetryPolicy
from treadle._public import publish
from treadle._values._actors import Actor, Role
from treadle._values._schedules import Schedule
from treadle._workflow._builder import WorkflowBuilder
from treadle._workflow._history import RunHistory
from treadle._workflow._schedule_actions import ScheduleBackfill, ScheduleInfo, Schedules
from treadle._workflow._service import Runtime
from treadle._workflow._start_policy import StartPolicy
from treadle._workflow._stream import ExecutionMode, WorkflowStream
from treadle._workflow._sync import SyncEventStream
from treadle._workflow._workflow import Workflow

__all__ = [
    "Actor",
    "CallLimit",
    "Case",
    "Clock",
    "Default",
    "Durability",
    "ExecutionMode",
    "Executor",
    "ExecutorFailure",
    "ExponentialBackoff",
    "HandoffContext",
    "HandoffRefused",
    "InputPolicy",
    "LimitCall",
    "PendingRequest",
    "Rate",
    "RetryPolicy",
    "Role",
    "RunHistory",
    "RunOptions",
    "RunResult",
    "RunStatus",
    "Runtime",
    "Schedule",
    "ScheduleBackfill",
    "ScheduleInfo",
    "ScheduledHandle",
    "Schedules",
    "SharedState",
    "SpawnResult",
    "StalledFanIn",
    "StartPolicy",
    "SyncEventStream",
    "SystemClock",
    "TokenRate",
    "TraceSpan",
    "Tracing",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowContext",
    "WorkflowStream",
    "executor",
    "handler",
    "load",
]

publish(__name__, globals(), __all__)
