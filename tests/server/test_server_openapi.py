"""``/openapi.json`` is a valid OpenAPI 3.1 document that describes every route the server has."""

from __future__ import annotations

import re

from openapi_spec_validator import validate
from starlette.routing import Mount, Route

from treadle._server._app import ENDPOINTS


async def test_the_document_is_valid_openapi_3_1_and_lists_every_route(api):
    response = await api.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema
    assert document["openapi"] == "3.1.0"

    documented = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method in operations
    }
    routed = set()
    for route in api.app.routes:
        if isinstance(route, Route):
            routed |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
        elif isinstance(route, Mount):
            routed.add(("GET", route.path + "/{path}"))
    assert routed == documented
    assert {(e.method, e.path) for e in ENDPOINTS} <= documented


async def test_each_operation_names_its_parameters_bodies_and_errors(api):
    document = (await api.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for endpoint in ENDPOINTS:
        operation = document["paths"][endpoint.path][endpoint.method.lower()]
        in_path = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
        assert in_path == set(re.findall(r"{(\w+)}", endpoint.path))
        responses = operation["responses"]
        assert str(endpoint.status) in responses
        assert {"401", "413"} <= set(responses)
        if endpoint.body is not None:
            reference = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert reference.rsplit("/", 1)[-1] in schemas
    answer = document["paths"]["/api/runs/{run_id}/requests/{request_id}"]["post"]
    assert {"202", "409", "422"} <= set(answer["responses"])
    events = document["paths"]["/api/runs/{run_id}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    assert any(p["name"] == "Last-Event-ID" for p in events["parameters"])


async def test_a_missing_static_file_answers_a_documented_404(api):
    document = (await api.get("/openapi.json")).json()
    static = document["paths"]["/static/{path}"]["get"]["responses"]
    missing = await api.get("/static/no-such-file.js")
    assert missing.status_code == 404
    assert str(missing.status_code) in static, f"the 404 is not documented: {sorted(static)}"
    documented = static["404"]["content"]
    assert missing.headers["content-type"].split(";")[0] in documented
    assert missing.json()["error"]["type"] == "NotFound"


def _filled(path: str) -> str:
    return re.sub(r"{\w+}", "x", path)


async def test_a_405_allows_every_method_its_route_takes(api):
    """Over the app's whole route table: a route added later is covered too."""
    taken: dict[str, set[str]] = {}
    for route in api.app.routes:
        if isinstance(route, Route):
            taken.setdefault(route.path, set()).update(route.methods or ())
    assert "DELETE" in taken["/api/runs/{run_id}"]  # the route that showed the bug
    for path, methods in taken.items():
        for method in {"GET", "POST", "DELETE", "PUT", "PATCH"} - methods:
            refused = await api.request(method, _filled(path))
            assert refused.status_code == 405, (method, path, refused.text)
            allowed = {m.strip() for m in refused.headers["allow"].split(",")}
            assert allowed == methods, (method, path)
            assert refused.json()["error"]["type"] == "MethodNotAllowed"
