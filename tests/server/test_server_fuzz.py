"""No input makes the server fail: hypothesis sends it odd paths, queries, headers and bodies.

Every answer must be a deliberate one (a status below 500, in the one
error shape when it is an error); an exception escaping a route would fail
the test itself (the ASGI transport raises it). The server holds a run
awaiting an answer, so ids that exist are among those tried.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from treadle._server._app import ENDPOINTS

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_known_keys = st.sampled_from(
    ["workflow", "input", "run_id", "answer", "message", "target", "checkpoint_id", "state_patch"]
)
_bodies = st.one_of(
    st.dictionaries(_known_keys | st.text(max_size=8), _json_values, max_size=4),
    _json_values,
    st.fixed_dictionaries(
        {
            "workflow": st.sampled_from(["approval", "failing", "chat", "nope"]),
            "input": _json_values,
        },
        optional={"run_id": st.text(max_size=12)},
    ),
    st.fixed_dictionaries({"answer": _json_values}),
    st.fixed_dictionaries(
        {"answer": st.fixed_dictionaries({"approved": _json_values, "note": _json_values})}
    ),
)
_segments = st.text(st.characters(codec="utf-8"), max_size=16).map(
    lambda text: quote(text, safe="")  # as a client must send it; the server decodes it
) | st.sampled_from(["fz1", "fz", "", "..", "%2F", "%00", "req-nope", "approval"])
_paths = st.one_of(
    st.builds(
        lambda endpoint, run_id, request_id, name: endpoint.path.format(
            run_id=run_id, request_id=request_id, name=name, schedule_id=name
        ),
        st.sampled_from(ENDPOINTS),
        _segments,
        _segments,
        _segments,
    ),
    st.lists(_segments, max_size=4).map(lambda parts: "/" + "/".join(parts)),
)
_queries = st.dictionaries(
    st.sampled_from(["status", "workflow", "limit", "cursor", "after", "token"])
    | st.text(max_size=6),
    st.text(max_size=12) | st.integers(-5, 2000).map(str),
    max_size=3,
)
_headers = st.fixed_dictionaries(
    {},
    optional={
        "Last-Event-ID": st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=8),
        "Content-Type": st.sampled_from(
            ["application/json", "text/plain", "application/json; charset=utf-8", ""]
        ),
    },
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH"]),
    path=_paths,
    query=_queries,
    headers=_headers,
    body=_bodies | st.binary(max_size=40).map(lambda raw: ("raw", raw)),
)
async def test_no_request_makes_the_server_fail(api, method, path, query, headers, body):
    if not await api.store.list_runs():
        await api.start("approval", {"topic": "fuzz", "words": 1}, run_id="fz1")
    content = body[1] if isinstance(body, tuple) else json.dumps(body).encode()
    if (
        path.endswith("/events") and method == "GET"
    ):  # a live stream never ends: ask for an ended run's
        path, query = "/api/runs/none/events", {}
    response = await api.request(
        method,
        "http://testserver" + path,
        params=query,
        headers=headers,
        content=content if method != "GET" else b"",
    )
    assert response.status_code < 500, (method, path, query, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["type"], str)
        assert isinstance(error["message"], str)
