"""A real Prometheus scrapes `treadle serve` and two `treadle worker`s on PostgreSQL (issue 34).

Debian's ``prometheus`` (installed by ``make renderers``) is started on
127.0.0.1 with a configuration written here: it scrapes the server's
``/metrics`` with a bearer token and each worker's ``--metrics-port``
every half second. Runs are started through the server's API and driven
by the workers: loops that complete, approvals that wait (some answered),
runs that fail. Once the store has settled, what Prometheus' query API
answers equals what the store says: runs completed and failed (counted by
the workers that drove them, and read from the store by every process),
open requests, and the three processes agree on the store's gauges.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from postgres import drop_schemas, fresh_schema, postgres_dsn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")
TOKEN = "metrics-test-token-0123456789abcdef"  # noqa: S105 - the test's own
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LOOPS, APPROVALS, ANSWERED, FAILURES = 24, 9, 4, 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until(check, what: str, limit: float = 60.0):
    """Poll ``check`` (bounded) until it returns something true; that value."""
    deadline = time.monotonic() + limit
    last = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            last = check()
            if last:
                return last
        time.sleep(0.2)
    raise AssertionError(f"{what}: never happened (last: {last!r})")


@pytest.fixture
def schema():
    postgres_dsn()  # skip, saying why, without a PostgreSQL server
    name = fresh_schema()
    yield name
    import asyncio  # noqa: PLC0415

    asyncio.run(drop_schemas([name]))


@pytest.fixture
def processes(tmp_path):
    """Started subprocesses, each with its log; all SIGKILLed at the end."""
    started: list[tuple[subprocess.Popen, Path]] = []

    def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = tmp_path / f"{name}.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                args, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        started.append((process, log))
        return process

    yield start
    for process, _ in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def _env(schema: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    return {
        **inherited,
        "PYTHONPATH": str(HERE),
        "TREADLE_STORE": postgres_dsn(),
        "TREADLE_SCHEMA": schema,
    }


def _prometheus_config(serve_port: int, worker_ports: list[int]) -> str:
    workers = ", ".join(f"'127.0.0.1:{p}'" for p in worker_ports)
    return f"""
global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: treadle-serve
    authorization:
      credentials: {TOKEN}
    static_configs:
      - targets: ['127.0.0.1:{serve_port}']
  - job_name: treadle-worker
    static_configs:
      - targets: [{workers}]
"""


class Prometheus:
    """Prometheus' HTTP query API."""

    def __init__(self, port: int) -> None:
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def query(self, expr: str) -> list[dict]:
        answer = self.client.get("/api/v1/query", params={"query": expr})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The single value ``expr`` gives (``None``: no series)."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None


def test_prometheus_scraping_serve_and_two_workers_agrees_with_the_store(
    tmp_path, schema, processes
):
    prometheus_bin = shutil.which("prometheus")
    assert prometheus_bin, "Debian's prometheus is missing: `make renderers` installs it"
    env = _env(schema)
    serve_port, prometheus_port = _free_port(), _free_port()
    worker_ports = [_free_port(), _free_port()]
    serve = processes(
        "serve",
        [TREADLE, "serve", "--app", "metrics_app", "--port", str(serve_port),
         "--token", TOKEN, "--poll-interval", "0.1"],
        env,
    )  # fmt: skip
    for n, port in enumerate(worker_ports):
        processes(
            f"worker{n}",
            [TREADLE, "worker", "--app", "metrics_app", "--metrics-port", str(port),
             "--poll-interval", "0.1", "--lease", "5", "--worker-id", f"w{n}"],
            env,
        )  # fmt: skip
    config = tmp_path / "prometheus.yml"
    config.write_text(_prometheus_config(serve_port, worker_ports))
    processes(
        "prometheus",
        [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prometheus_port}"],
        env,
    )  # fmt: skip

    api = httpx.Client(base_url=f"http://127.0.0.1:{serve_port}", headers=AUTH, timeout=20)
    prometheus = Prometheus(prometheus_port)
    try:
        _drive_and_compare(api, prometheus, serve, tmp_path)
    finally:
        api.close()
        prometheus.client.close()


def _drive_and_compare(api, prometheus, serve, tmp_path):
    _wait_until(lambda: api.get("/api/workflows").status_code == 200, "treadle serve answers")
    assert serve.poll() is None
    # /metrics is behind the access rules: no token, no metrics.
    with httpx.Client(base_url=str(api.base_url)) as anonymous:
        assert anonymous.get("/metrics").status_code == 401

    # Load: loops that complete, approvals that wait, failures; the workers drive them all.
    started: list[str] = []
    for n in range(LOOPS):
        body = {"workflow": "looping", "input": {"to": 2 + n % 5}}
        started.append(api.post("/api/runs", json=body).json()["run"]["run_id"])
    for n in range(APPROVALS):
        body = {"workflow": "approval", "input": f"expense {n}"}
        started.append(api.post("/api/runs", json=body).json()["run"]["run_id"])
    for n in range(FAILURES):
        started.append(
            api.post("/api/runs", json={"workflow": "failing", "input": f"no {n}"}).json()["run"][
                "run_id"
            ]
        )

    def open_requests() -> list[dict]:
        return api.get("/api/requests", params={"limit": 500}).json()["requests"]

    _wait_until(lambda: len(open_requests()) == APPROVALS, "every approval asks")
    for request in open_requests()[:ANSWERED]:
        answered = api.post(
            f"/api/runs/{request['run_id']}/requests/{request['request_id']}",
            json={"answer": True},
        )
        assert answered.status_code in (200, 202), answered.text

    def settled() -> Counter | None:
        runs = api.get("/api/runs", params={"limit": 500}).json()["runs"]
        statuses = Counter(r["status"] for r in runs)
        done = LOOPS + ANSWERED
        wanted = {"completed": done, "failed": FAILURES, "awaiting_input": APPROVALS - ANSWERED}
        return statuses if statuses == Counter(wanted) else None

    statuses = _wait_until(settled, "the store settles")
    waiting = len(open_requests())
    assert waiting == APPROVALS - ANSWERED

    _wait_until(
        lambda: prometheus.value("count(up == 1)") == 3, "Prometheus scrapes all three targets"
    )

    def agrees() -> dict | None:
        answers = {
            # Counted by the processes that drove the runs (the workers), summed.
            "ended completed": prometheus.value(
                'sum(treadle_runs_ended_total{status="completed"})'
            ),
            "ended failed": prometheus.value('sum(treadle_runs_ended_total{status="failed"})'),
            # Read from the store at each scrape, by every process alike.
            "runs completed": prometheus.value(
                'max(sum by (instance) (treadle_runs{status="completed"}))'
            ),
            "runs failed": prometheus.value(
                'max(sum by (instance) (treadle_runs{status="failed"}))'
            ),
            "open requests": prometheus.value("max(sum by (instance) (treadle_requests_open))"),
            "instances agreeing": prometheus.value(
                'count(sum by (instance) (treadle_runs{status="completed"}) == '
                f"{statuses['completed']})"
            ),
        }
        expected = {
            "ended completed": statuses["completed"],
            "ended failed": statuses["failed"],
            "runs completed": statuses["completed"],
            "runs failed": statuses["failed"],
            "open requests": waiting,
            "instances agreeing": 3,
        }
        return answers if answers == expected else None

    try:
        answers = _wait_until(agrees, "Prometheus agrees with the store", limit=30)
    except AssertionError:
        for name in ("serve", "worker0", "worker1"):
            print(name, (tmp_path / f"{name}.log").read_text()[-3000:])
        raise
    assert answers["open requests"] == APPROVALS - ANSWERED
    # The workers drove every superstep; each reported its own.
    assert prometheus.value("count(treadle_supersteps_total > 0)") >= 1
    assert prometheus.value("sum(treadle_supersteps_total)") >= LOOPS * 3
    assert prometheus.value("sum(treadle_commit_duration_seconds_count)") > 0
