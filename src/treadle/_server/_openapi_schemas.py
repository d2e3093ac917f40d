"""The shapes the HTTP API takes and gives: the component schemas of ``/openapi.json``.

Written once here, named by the operations of the document
(:mod:`treadle._server._openapi`) through :func:`ref`. OpenAPI 3.1 schemas
are JSON Schema 2020-12; the bodies the server takes are closed (no
properties beyond those listed), so a misspelt field is refused, not
ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def object_schema(required: Iterable[str] = (), **properties: Any) -> dict[str, Any]:
    """An object with these properties, of which ``required`` must be there."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _closed(required: Iterable[str] = (), **properties: Any) -> dict[str, Any]:
    """A body the server takes: an object with these properties and no others."""
    return object_schema(required, **properties) | {"additionalProperties": False}


ANY: Final[Mapping[str, Any]] = {}  # any JSON value

_TIME: Final[Mapping[str, Any]] = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 in UTC, with its offset (+00:00).",
}
_MAYBE_TIME: Final[Mapping[str, Any]] = {**_TIME, "type": ["string", "null"]}

_RUN = object_schema(
    ("run_id", "workflow", "status", "superstep", "created_at", "updated_at"),
    run_id={"type": "string"},
    workflow={"type": "string"},
    status={"type": "string"},
    superstep={"type": "integer"},
    checkpoint_id=_nullable("string"),
    parent_run_id=_nullable("string"),
    parent_checkpoint_id=_nullable("string"),
    created_at=_TIME,
    updated_at=_TIME,
    error=_nullable("string"),
    wake_at=_MAYBE_TIME,
    deadline_at=_MAYBE_TIME,
    owner=_nullable("string"),
    lease_until=_MAYBE_TIME,
    parked=_nullable("string"),
    pause_requested=_MAYBE_TIME,
    version={"type": "integer", "description": "The version of its workflow it goes on with."},
    outcome=_nullable("string") | {"description": "How it ended for the business (approved, ...)."},
    outcome_summary=_nullable("string"),
    started_by={
        "type": ["object", "null"],
        "description": "Who started it: kind, name, label, door, role, groups (null: a service's"
        " own run, such as a worker taking up a queued one).",
    },
)

_WAITING_FOR: Final[Mapping[str, Any]] = {
    "type": "array",
    "description": "Its calls waiting for slots of call limits (docs/flow-control.md).",
    "items": object_schema(
        ("limit", "call", "key", "position", "waiting_since", "next_slot_at"),
        limit={"type": "string"},
        call={"type": "string"},
        key={"type": "string"},
        position={"type": "integer", "description": "Calls ahead of it (0: next)."},
        waiting_since=_MAYBE_TIME,
        next_slot_at=_MAYBE_TIME,
    ),
}

_GRAPH = object_schema(
    ("nodes", "edges", "start"),
    nodes={
        "type": "array",
        "items": object_schema(
            ("id", "kind", "rank"),
            id={"type": "string"},
            kind={"enum": ["start", "executor", "workflow"]},
            rank={"type": "integer"},
            graph=ref("Graph"),
        ),
    },
    edges={
        "type": "array",
        "items": object_schema(
            ("source", "target", "kind"),
            source={"type": "string"},
            target={"type": "string"},
            kind={
                "enum": ["plain", "conditional", "fan-out", "fan-in", "switch", "handoff", "error"]
            },
            label={"type": "string"},
        ),
    },
    start={"type": "string"},
)

_REQUEST = object_schema(
    ("run_id", "request_id", "executor_id", "payload", "response_type", "answer_schema"),
    run_id={"type": "string"},
    request_id={"type": "string"},
    executor_id={"type": "string"},
    payload=ANY,
    response_type=_nullable("string"),
    answer_schema={"type": "object", "description": "The JSON schema the answer must fit."},
    deadline_at=_MAYBE_TIME,
    approvers={
        "type": "array",
        "items": {"type": "string"},
        "description": "Who may answer: user names, role:R, group:G (empty: any approver).",
    },
    four_eyes={"type": "boolean", "description": "Whether the run's starter may not answer."},
    answered={
        "type": "boolean",
        "description": "An answer is kept for it, applied when the run goes on: none other.",
    },
)

_CHECKPOINT = object_schema(
    ("checkpoint_id", "superstep", "status", "created_at", "kind"),
    checkpoint_id={"type": "string"},
    run_id={"type": "string"},
    superstep={"type": "integer"},
    status={"type": "string"},
    parent_checkpoint_id=_nullable("string"),
    created_at=_TIME,
    wake_at=_MAYBE_TIME,
    kind={
        "enum": ["start", "fork", "barrier", "progress", "migration"],
        "description": (
            "start: a new run's first; fork: a fork's first; barrier: a superstep's commit;"
            " progress: the last barrier saved again during the next superstep (saved steps,"
            " sub-workflow barriers); migration: rewritten for another version"
        ),
    },
)

_EVENT = object_schema(
    ("seq", "run_id", "superstep", "type", "at", "data"),
    seq={"type": "integer", "description": "Its place in the run's log: the SSE id."},
    run_id={"type": "string"},
    superstep={"type": "integer"},
    type={"type": "string", "description": "The event's kind: the SSE event name."},
    executor_id=_nullable("string"),
    at=_TIME,
    data={"type": "object"},
)

_DURATION: Final[Mapping[str, Any]] = {
    "type": ["string", "number"],
    "description": "Seconds, or text: 90s, 5m, 1h30m, 2d.",
}
_SCHEDULE = object_schema(
    ("id", "workflow", "tz", "overlap", "paused", "next_times", "description"),
    id={"type": "string"},
    workflow={"type": "string"},
    cron=_nullable("string"),
    every=_nullable("number"),
    tz={"type": "string"},
    input=ANY,
    overlap={"enum": ["skip", "buffer_one", "buffer_all", "cancel_other", "allow"]},
    catchup={"type": "number"},
    jitter={"type": "number"},
    version=_nullable("integer"),
    paused={"type": "boolean"},
    note=_nullable("string"),
    next_tick=_nullable("string"),
    next_times={"type": "array", "items": {"type": "string", "format": "date-time"}},
    buffered={"type": "array", "items": {"type": "string"}},
    last_run_id=_nullable("string"),
    created_at=_TIME,
    created_by={"type": "string"},
    updated_at=_TIME,
    updated_by={"type": "string"},
    revision={"type": "integer"},
    description={"type": "string"},
    ticks={
        "type": "array",
        "items": object_schema(
            ("nominal", "source", "action"),
            nominal={"type": "string"},
            source={"enum": ["schedule", "trigger", "backfill"]},
            action={"enum": ["started", "skipped", "missed"]},
            run_id=_nullable("string"),
            run_status=_nullable("string"),
            run_outcome=_nullable("string"),
            decided_at=_TIME,
            detail={"type": "string"},
        ),
    },
)
_SCHEDULES: Final[Mapping[str, dict[str, Any]]] = {
    "ScheduleList": object_schema(("schedules",), schedules={"type": "array", "items": _SCHEDULE}),
    "ScheduleOne": object_schema(("schedule",), schedule=_SCHEDULE),
    "ScheduleCreate": _closed(
        ("workflow",),
        id={"type": "string"},
        workflow={"type": "string"},
        cron={"type": "string"},
        every=_DURATION,
        tz={"type": "string"},
        input=ANY,
        overlap={"enum": ["skip", "buffer_one", "buffer_all", "cancel_other", "allow"]},
        catchup=_DURATION,
        jitter=_DURATION,
        version={"type": "integer"},
        paused={"type": "boolean"},
    ),
    "ScheduleUpdate": _closed(
        cron=_nullable("string"),
        every={**_DURATION, "type": ["string", "number", "null"]},
        tz={"type": "string"},
        input=ANY,
        overlap={"enum": ["skip", "buffer_one", "buffer_all", "cancel_other", "allow"]},
        catchup=_DURATION,
        jitter=_DURATION,
        version=_nullable("integer"),
    ),
    "SchedulePause": _closed(note={"type": "string"}),
    "ScheduleTriggered": object_schema(("run_id",), run_id={"type": "string"}),
    "ScheduleBackfill": _closed(
        ("start", "end"),
        start={"type": "string", "format": "date-time"},
        end={"type": "string", "format": "date-time"},
        dry_run={"type": "boolean"},
    ),
    "ScheduleBackfilled": object_schema(
        ("ticks", "run_ids", "started", "dry_run"),
        ticks={"type": "array", "items": {"type": "string"}},
        run_ids={"type": "array", "items": {"type": "string"}},
        started={"type": "array", "items": {"type": "string"}},
        dry_run={"type": "boolean"},
    ),
    "ScheduleDeleted": object_schema(("deleted",), deleted={"type": "string"}),
}

SCHEMAS: Final[Mapping[str, dict[str, Any]]] = {  # the document's components, by name
    "Error": object_schema(
        ("error",),
        error=object_schema(
            ("type", "message"),
            type={"type": "string"},
            message={"type": "string"},
            fields={
                "type": "array",
                "items": object_schema(
                    ("loc", "message"), loc={"type": "string"}, message={"type": "string"}
                ),
            },
        ),
    ),
    "Run": _RUN,
    "RunOnly": object_schema(("run",), run=ref("Run")),
    "RunPage": object_schema(
        ("runs", "next_cursor"),
        runs={
            "type": "array",
            "items": {
                "allOf": [ref("Run"), object_schema(("waiting_for",), waiting_for=_WAITING_FOR)]
            },
        },
        next_cursor=_nullable("string"),
    ),
    "BulkReport": object_schema(
        ("action", "dry_run", "matched", "acted", "skipped"),
        action={"type": "string"},
        dry_run={"type": "boolean"},
        matched={"type": "integer", "description": "Runs the filter kept when listed."},
        acted={"type": "integer", "description": "Runs acted on (0 in a dry run)."},
        skipped={
            "type": "array",
            "items": object_schema(
                ("run_id", "reason"), run_id={"type": "string"}, reason={"type": "string"}
            ),
        },
    ),
    "Graph": _GRAPH,
    "Workflow": object_schema(
        ("name", "version", "start", "input_schema", "graph"),
        name={"type": "string"},
        version={"type": "integer", "description": "The newest version served."},
        versions={"type": "array", "items": {"type": "integer"}},
        start={"type": "string"},
        input_schema={"type": "object"},
        graph=ref("Graph"),
    ),
    "WorkflowList": object_schema(
        ("workflows",), workflows={"type": "array", "items": ref("Workflow")}
    ),
    "Request": _REQUEST,
    "Me": object_schema(
        ("actor", "sign_in"),
        actor=object_schema(
            ("kind", "name", "label", "door", "role", "groups"),
            kind={"type": "string"},
            name={"type": "string"},
            label={"type": "string", "description": "How the record names it."},
            door={"type": "string"},
            role={"enum": ["viewer", "approver", "operator", "admin"]},
            groups={"type": "array", "items": {"type": "string"}},
        ),
        sign_in={"type": "boolean", "description": "Whether people sign in (and may sign out)."},
    ),
    "RequestList": object_schema(
        ("requests",), requests={"type": "array", "items": ref("Request")}
    ),
    "RunDetail": object_schema(
        ("run", "outputs", "state", "pending_requests", "wake_at", "traceback", "graph"),
        run=ref("Run"),
        outputs={"type": "array"},
        state={"type": "object"},
        pending_requests={"type": "array", "items": ref("Request")},
        wake_at=_MAYBE_TIME,
        traceback=_nullable("string"),
        graph={"oneOf": [ref("Graph"), {"type": "null"}]},
        detail=_nullable("string"),
        waiting_for=_WAITING_FOR,
        conversations={
            "type": "array",
            "description": "Its agents' conversations (state keys), a message per entry.",
            "items": object_schema(
                ("key", "agents", "messages"),
                key={"type": "string"},
                agents={"type": "array", "items": {"type": "string"}},
                messages={
                    "type": "array",
                    "items": object_schema(
                        ("role", "text", "tool_calls", "tool_results"),
                        role={"enum": ["user", "assistant", "system", "tool", "unknown"]},
                        text=_nullable("string"),
                        tool_calls={"type": "array", "items": {"type": "object"}},
                        tool_results={"type": "array", "items": {"type": "object"}},
                    ),
                },
            ),
        },
    ),
    "Checkpoint": _CHECKPOINT,
    "History": object_schema(
        ("run", "checkpoints", "forks"),
        run=ref("Run"),
        checkpoints={"type": "array", "items": ref("Checkpoint")},
        forks={"type": "array", "items": ref("Run")},
    ),
    "Steered": object_schema(
        ("run",),
        run=ref("Run"),
        outcome={"enum": ["paused", "requested"], "description": "pause: now, or at a barrier."},
        was_paused={"type": "boolean", "description": "unpause: false if a pause was withdrawn."},
    ),
    "Event": _EVENT,
    "EventStream": {
        "type": "string",
        "description": (
            "text/event-stream: per event `id: <seq>`, `event: <type>`, `data: <Event as JSON>`;"
            " a last `event: end` once the run has ended"
        ),
    },
    "StartRun": _closed(
        ("workflow",),
        workflow={"type": "string"},
        version={"type": "integer", "minimum": 1, "description": "Default: the newest served."},
        input=ANY,
        run_id={"type": "string", "pattern": "^[A-Za-z0-9._~:@+-]{1,200}$"},
        deduplication_id={
            "type": "string",
            "minLength": 1,
            "description": "A second start with this id starts nothing: it joins the first run.",
        },
        start_policy=_closed(
            (),
            key={"type": "string", "minLength": 1, "description": "The policy's key, as is."},
            singleton={"type": "boolean"},
            concurrency={"type": "integer", "minimum": 1},
            when_busy={"type": "string", "enum": ["queue", "refuse"]},
            debounce={"type": "number", "exclusiveMinimum": 0, "description": "Seconds."},
        ),
    ),
    "StartedRun": object_schema(
        ("run", "joined"),
        run=ref("Run"),
        joined={
            "type": "boolean",
            "description": (
                "The start joined a run that was there: the first of its deduplication id, "
                "or a debounced run waiting for its key (docs/flow-control.md)"
            ),
        },
    ),
    "Bulk": _closed(
        ("action", "where"),
        action={
            "type": "string",
            "enum": ["cancel", "pause", "unpause", "resume", "respond", "delete"],
        },
        where={"type": "string", "maxLength": 2000, "description": "A filter (docs/search.md)."},
        dry_run={"type": "boolean", "description": "Only count the runs it would act on."},
        rate={
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "At most this many runs a second.",
        },
        executor={"type": "string", "description": "respond: whose pending request is answered."},
        answer=ANY,
    ),
    "Fork": _closed(
        ("checkpoint_id",),
        checkpoint_id={"type": "string", "description": "Its id, or a prefix naming one."},
        state_patch={"type": "object"},
        run_id={"type": "string", "pattern": "^[A-Za-z0-9._~:@+-]{1,200}$"},
    ),
    "Resume": _closed(checkpoint_id={"type": "string"}),
    "Answer": _closed(("answer",), answer=ANY),
    "DeadLetter": object_schema(
        ("message_id", "webhook_id", "endpoint_id", "run_id", "seq", "type", "attempts"),
        message_id={"type": "integer"},
        webhook_id={"type": "string", "description": "The same on every retry and re-send."},
        endpoint_id={"type": "string"},
        run_id={"type": "string"},
        seq={"type": "integer", "description": "The causing event's place in the run's log."},
        type={"type": "string", "description": "request.created, run.failed, ..."},
        state={"enum": ["dead"]},
        attempts={"type": "integer"},
        due_at={**_TIME, "description": "When it was last tried."},
        last_error=_nullable("string"),
    ),
    "DeadLetters": object_schema(("dead",), dead={"type": "array", "items": ref("DeadLetter")}),
    "Resend": _closed(
        message_ids={"type": "array", "items": {"type": "integer"}},
        all={"type": "boolean", "description": "Every dead letter (instead of message_ids)."},
    ),
    "Resent": object_schema(("resent",), resent={"type": "integer"}),
    "MakeLink": _closed(
        ("for",),
        **{"for": {"type": "string", "description": "Who the link answers as."}},
        expires_in={"type": "number", "exclusiveMinimum": 0, "default": 86400},
        groups={"type": "array", "items": {"type": "string"}},
    ),
    "LinkMade": object_schema(
        ("link", "url"),
        link=object_schema(
            ("run_id", "request_id", "principal", "expires_at", "groups"),
            run_id={"type": "string"},
            request_id={"type": "string"},
            principal={"type": "string"},
            expires_at=_TIME,
            groups={"type": "array", "items": {"type": "string"}},
        ),
        url={"type": "string", "description": "GET shows the question, POST answers it."},
    ),
    "Message": _closed(
        ("message",),
        message=ANY,
        target={"type": "string"},
        policy={
            "type": "string",
            "description": (
                "How it meets a running turn: reject, enqueue, merge, interrupt, rollback "
                "or debounce:SECONDS (on a workflow whose own input policy is not reject)"
            ),
        },
    ),
    **_SCHEDULES,
}
