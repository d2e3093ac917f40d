"""`treadle serve --definitions DIR` serves every definition of a folder as a workflow."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from server.conftest import ServeProcess

pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]


def test_serve_lists_the_definitions_of_a_folder_and_runs_them(write, tmp_path):
    folder = tmp_path / "flows"
    folder.mkdir()
    for name in ("greet", "shout"):
        (folder / f"{name}.yaml").write_text(
            f"name: {name}\nstart: up\nnodes:\n"
            '  up: {executor: "declarative.steps:shout"}\n  done: {step: output}\n'
            "edges:\n  - {from: up, to: done}\n",
            encoding="utf-8",
        )
    (folder / "notes.txt").write_text("not a definition", encoding="utf-8")
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), PYTHONPATH=str(TESTS))
    server.args = ["serve", "--definitions", str(folder), "--port", "0", "--poll-interval", "0.05"]
    server.start()
    try:
        server.ready()
        with server.client(headers=server.auth) as client:
            listed = client.get("/api/workflows").json()
            names = sorted(w["name"] for w in listed["workflows"])
            assert names == ["greet", "shout"]
            started = client.post("/api/runs", json={"workflow": "greet", "input": "hi"})
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            for _ in range(500):
                detail = client.get(f"/api/runs/{run_id}").json()
                if detail["run"]["status"] == "completed":
                    break
                time.sleep(0.02)
            assert detail["run"]["status"] == "completed"
    finally:
        server.stop()


def test_serve_reports_a_bad_definition_of_its_folder_and_serves_the_others(tmp_path):
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "greet.yaml").write_text(
        "name: greet\nstart: up\nnodes:\n"
        '  up: {executor: "declarative.steps:shout"}\n  done: {step: output}\n'
        "edges:\n  - {from: up, to: done}\n",
        encoding="utf-8",
    )
    deep = folder / "deep.json"
    nested = '{"k": ' * 10_000 + "1" + "}" * 10_000
    node = f'{{"step": "output", "input": {nested}}}'
    deep.write_text(f'{{"name": "deep", "start": "a", "nodes": {{"a": {node}}}}}', encoding="utf-8")
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), PYTHONPATH=str(TESTS))
    server.args = ["serve", "--definitions", str(folder), "--port", "0", "--poll-interval", "0.05"]
    server.start()
    try:
        server.ready()
        with server.client(headers=server.auth) as client:
            listed = client.get("/api/workflows").json()
            assert [w["name"] for w in listed["workflows"]] == ["greet"]
    finally:
        _, _, log = server.stop()
    assert "RecursionError" not in log
    assert f"{deep}:1:" in log
    assert "nests more than 64 levels deep" in log


COSTLY = """\
name: costly
start: first
nodes:
  first: {executor: "declarative.steps:echo"}
  done: {step: output}
edges:
  - {from: first, to: done, when: "size(message.map(x, message.map(y, x + y))) > 0"}
"""


def test_a_costly_condition_fails_on_its_budget_and_the_server_answers_meanwhile(tmp_path):
    folder = tmp_path / "flows"
    folder.mkdir()
    (folder / "costly.yaml").write_text(COSTLY, encoding="utf-8")
    server = ServeProcess(tmp_path, str(tmp_path / "runs.sqlite"), PYTHONPATH=str(TESTS))
    server.args = ["serve", "--definitions", str(folder), "--port", "0", "--poll-interval", "0.05"]
    server.start()
    words = [f"word-{i:03d}-" + "x" * 90 for i in range(300)]  # 300 short strings, 31 KB
    try:
        server.ready()
        with server.client(headers=server.auth) as client:
            started = client.post("/api/runs", json={"workflow": "costly", "input": words})
            assert started.status_code == 201, started.text
            run_id = started.json()["run"]["run_id"]
            # durable before answered: the run is there to read at once
            assert client.get(f"/api/runs/{run_id}").status_code == 200
            slowest = 0.0
            for _ in range(400):
                began = time.perf_counter()
                listed = client.get("/api/runs")
                slowest = max(slowest, time.perf_counter() - began)
                assert listed.status_code == 200
                run = client.get(f"/api/runs/{run_id}").json()["run"]
                if run["status"] not in {"pending", "running"}:
                    break
                time.sleep(0.02)
    finally:
        server.stop()
    assert slowest < 0.5, f"GET /api/runs took {slowest:.2f} s while the condition ran"
    assert run["status"] == "failed"
    assert "node 'first': the condition 'size(message.map(" in run["error"]
    assert "went over its budget of 20,000 evaluation steps" in run["error"]
