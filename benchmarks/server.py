"""``treadle serve`` under load: runs listed, events streamed, answers given.

    python benchmarks/server.py [--repeat 5] [--baseline REF]

Fills a SQLite store with 1,000 small runs and one run whose event log holds
10,000 events, then serves it twice, each in a process of its own: with
``treadle serve`` and with the floor (``server_floor.py``: a bare Starlette
application reading the same file with ``sqlite3``). One HTTP client times
each question against each server in turn; the medians and their ratios
(server / floor) go into ``benchmarks/RESULTS.md``, between the markers of
their section, and ``benchmarks/server.json``.

Answers are timed against the server as it was before people had identities
and every action a record (``--baseline``, a commit of this repository, its
``src`` run by the same interpreter): the same waiting runs, answered one at
a time, each timed until its 202 (the answer is durable), by the server's
own token and, on today's server, by a named approver token (identity,
role, approvers and the record's event and audit entry).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TREADLE = REPO / ".venv" / "bin" / "treadle"
RUNS = 1000
ANSWERS = 40
"""Answers timed per server in each repetition."""
BASELINE = "df6b93a"
"""The last commit before accountable approvals (issue 29): answers without identity or record."""
PYTHON = REPO / ".venv" / "bin" / "python"
CLI = "from treadle._cli._app import main; main()"
TOKEN = "benchmark-token-0123456789"  # noqa: S105 - a throwaway server's, on loopback
START, END = "<!-- server benchmark -->", "<!-- /server benchmark -->"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def fill(store_path: Path) -> str:
    """The store: ``RUNS`` completed runs of ``tiny``, and one ``chatty`` run; its id."""
    sys.path.insert(0, str(BENCH))
    import server_app  # noqa: PLC0415 - beside this script

    from treadle.stores import SqliteStore  # noqa: PLC0415

    store = SqliteStore(store_path)
    try:
        for n in range(RUNS):
            await server_app.tiny.run(f"guest {n}", store=store, run_id=f"tiny-{n:04d}")
        result = await server_app.chatty.run(1, store=store, run_id="chatty")
        logged = len(await store.read_events(result.run_id))
    finally:
        await store.close()
    print(f"filled {store_path}: {RUNS} runs, and one whose log holds {logged} events")
    return result.run_id


class Served:
    """One server process on a free port, until :meth:`stop`."""

    def __init__(
        self,
        command: list[str],
        port: int,
        *,
        env: dict[str, str] | None = None,
        token: str = TOKEN,
    ) -> None:
        self.port = port
        self.token = token
        self.log = Path(tempfile.mkstemp(prefix="treadle-bench-server-", suffix=".log")[1])
        with self.log.open("w") as log:  # what it says, for when a request fails
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, cwd=BENCH, env=env
            )
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.base}/api/runs?limit=1", headers=self.headers, timeout=1)
            except httpx.TransportError:
                time.sleep(0.1)
            else:
                return
        self.stop()
        raise RuntimeError(f"{command[0]} did not answer on port {port}")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def list_runs(client: httpx.Client, served: Served) -> float:
    began = time.perf_counter()
    response = client.get(f"{served.base}/api/runs?limit={RUNS}", headers=served.headers)
    took = time.perf_counter() - began
    response.raise_for_status()
    listed = len(response.json()["runs"])
    assert listed == RUNS, listed  # noqa: S101 - a benchmark of nothing would mislead
    return took


def stream_events(client: httpx.Client, served: Served, run_id: str) -> tuple[float, int]:
    received = 0
    began = time.perf_counter()
    url = f"{served.base}/api/runs/{run_id}/events"
    with client.stream("GET", url, headers=served.headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("id:"):
                received += 1
            elif line == "event: end":
                break
    return time.perf_counter() - began, received


def measure(repeat: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as scratch:
        store_path = Path(scratch) / "served.sqlite"
        run_id = asyncio.run(fill(store_path))
        servers = {
            "treadle serve": Served(
                [
                    str(TREADLE),
                    "serve",
                    "--app",
                    "server_app",
                    "--store",
                    f"sqlite:///{store_path}",
                    "--port",
                    str(port := free_port()),
                    "--token",
                    TOKEN,
                ],
                port,
            ),
            "floor": Served(
                [sys.executable, "server_floor.py", str(store_path), str(port := free_port())],
                port,
            ),
        }
        times: dict[str, dict[str, list[float]]] = {
            name: {"list": [], "stream": []} for name in servers
        }
        counts: dict[str, int] = {}
        try:
            with httpx.Client(timeout=120) as client:
                for _ in range(repeat):
                    for name, served in servers.items():
                        times[name]["list"].append(list_runs(client, served))
                        took, counts[name] = stream_events(client, served, run_id)
                        times[name]["stream"].append(took)
        finally:
            for served in servers.values():
                served.stop()
    medians = {
        name: {what: statistics.median(values) for what, values in by.items()}
        for name, by in times.items()
    }
    return {"medians": medians, "events": counts, "repeat": repeat, "times": times}


def source_of(ref: str, scratch: Path) -> Path:
    """The ``src`` folder of this repository at ``ref``, unpacked into ``scratch``."""
    target = scratch / f"src-{ref}"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "src"


def code_env(source: Path) -> dict[str, str]:
    """The environment that makes the interpreter import treadle from ``source``."""
    return {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{BENCH}"}


FILL_WAITING = """
import asyncio, sys
import server_app
from treadle.stores import SqliteStore

async def main(path, count):
    store = SqliteStore(path)
    try:
        for n in range(count):
            await server_app.approval.run(n, store=store, run_id=f"approve-{n:04d}")
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def serve(source: Path, store_path: Path, extra: list[str] | None = None) -> list[str]:
    """The command serving ``store_path`` with the treadle of ``source``."""
    return [
        str(PYTHON), "-c", CLI, "serve", "--app", "server_app",
        "--store", f"sqlite:///{store_path}", "--port", "{port}", "--token", TOKEN,
        *(extra or []),
    ]  # fmt: skip


def started(command: list[str], env: dict[str, str], token: str = TOKEN) -> Served:
    port = free_port()
    return Served([part.format(port=port) for part in command], port, env=env, token=token)


def named_token(source: Path, store_path: Path) -> str:
    """A named approver token made with today's ``treadle tokens create``."""
    made = subprocess.run(
        [str(PYTHON), "-c", CLI, "tokens", "create", "bench-approver", "--role", "approver",
         "--store", f"sqlite:///{store_path}"],
        capture_output=True, text=True, check=True, env=code_env(source),
    )  # fmt: skip
    return next(word for word in made.stdout.split() if word.startswith("tdl_"))


def waiting_requests(client: httpx.Client, served: Served) -> list[tuple[str, str]]:
    """(run id, request id) of every request waiting on ``served``, in a fixed order."""
    response = client.get(f"{served.base}/api/requests?limit=1000", headers=served.headers)
    response.raise_for_status()
    found = [(r["run_id"], r["request_id"]) for r in response.json()["requests"]]
    return sorted(found)


def answer(client: httpx.Client, served: Served, run_id: str, request_id: str) -> float:
    began = time.perf_counter()
    response = client.post(
        f"{served.base}/api/runs/{run_id}/requests/{request_id}",
        headers=served.headers,
        json={"answer": True},
    )
    took = time.perf_counter() - began
    assert response.status_code == 202, response.text  # noqa: S101 - a refused answer is no figure
    return took


def measure_answers(repeat: int, baseline: str) -> dict[str, list[float]]:
    """Median answer latency per server and repetition, servers interleaved."""
    count = ANSWERS * repeat
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        sources = {"before": source_of(baseline, scratch), "today": REPO / "src"}
        stores = {}
        for name in ("before", "today server token", "today named token"):
            source = sources["before" if name == "before" else "today"]
            stores[name] = scratch / f"{name.replace(' ', '-')}.sqlite"
            fill = [str(PYTHON), "-c", FILL_WAITING, str(stores[name]), str(count)]
            subprocess.run(fill, check=True, env=code_env(source), cwd=BENCH)
        named = named_token(sources["today"], stores["today named token"])
        servers = {
            "before": started(
                serve(sources["before"], stores["before"]), code_env(sources["before"])
            ),
            "today server token": started(
                serve(sources["today"], stores["today server token"]), code_env(sources["today"])
            ),
            "today named token": started(
                serve(sources["today"], stores["today named token"]),
                code_env(sources["today"]),
                token=named,
            ),
        }  # fmt: skip
        try:
            with httpx.Client(timeout=120) as client:
                pending = {name: waiting_requests(client, s) for name, s in servers.items()}
                for name, found in pending.items():
                    assert len(found) == count, (name, len(found))  # noqa: S101
                    times[name] = []
                for round_ in range(repeat):
                    for name, served in servers.items():
                        batch = pending[name][round_ * ANSWERS : (round_ + 1) * ANSWERS]
                        took = [answer(client, served, run, req) for run, req in batch]
                        times[name].append(statistics.median(took))
        finally:
            for served in servers.values():
                served.stop()
    return times


def report(figures: dict[str, object]) -> str:
    medians: dict[str, dict[str, float]] = figures["medians"]  # type: ignore[assignment]
    events: dict[str, int] = figures["events"]  # type: ignore[assignment]
    served, floor = medians["treadle serve"], medians["floor"]
    streamed = events["treadle serve"]
    rows = [
        ("1,000 runs listed (`GET /api/runs?limit=1000`)", "list", RUNS),
        (f"1 run's {streamed:,} events streamed (SSE)", "stream", streamed),
    ]
    lines = [
        START,
        "## Server: runs listed, events streamed, answers given",
        "",
        (
            f"`python benchmarks/server.py` on {platform.machine()}, Python"
            f" {platform.python_version()}, {os.cpu_count()} cores; median of"
            f" {figures['repeat']} requests each, one client, server and floor in turn."
            " The floor is a bare Starlette app reading the same SQLite file with"
            " `sqlite3` (`benchmarks/server_floor.py`)."
        ),
        "",
        "| question | treadle serve | floor | ratio | items/s (treadle) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, what, items in rows:
        mine, base = served[what], floor[what]
        lines.append(
            f"| {label} | {mine * 1000:.1f} ms | {base * 1000:.1f} ms | {mine / base:.2f}x"
            f" | {items / mine:,.0f} |"
        )
    answers: dict[str, list[float]] = figures["answers"]  # type: ignore[assignment]
    before = statistics.median(answers["before"])
    lines += [
        "",
        (
            f"An answer (`POST /api/runs/{{id}}/requests/{{request_id}}` until its 202), the"
            f" median over {figures['repeat']} repetitions of the median of {ANSWERS}"
            f" answers to as many waiting runs, against the server at {figures['baseline']}"
            " (before identities and the record) run in the same benchmark:"
        ),
        "",
        "| answer | latency | ratio to before |",
        "|---|---:|---:|",
    ]
    for name, label in (
        ("before", f"before ({figures['baseline']}), server token"),
        ("today server token", "today, server token (admin), with the record"),
        ("today named token", "today, named approver token: identity, role, record"),
    ):
        mine = statistics.median(answers[name])
        lines.append(f"| {label} | {mine * 1000:.2f} ms | {mine / before:.2f}x |")
    lines += ["", END]
    return "\n".join(lines)


def write(section: str) -> None:
    results = BENCH / "RESULTS.md"
    text = results.read_text() if results.exists() else ""
    if START in text and END in text:
        before, rest = text.split(START, 1)
        text = before + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    results.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE, help="the commit answers are held to")
    arguments = parser.parse_args()
    figures = measure(arguments.repeat)
    figures["answers"] = measure_answers(arguments.repeat, arguments.baseline)
    figures["baseline"] = arguments.baseline
    (BENCH / "server.json").write_text(json.dumps(figures, indent=2) + "\n")
    section = report(figures)
    write(section)
    print(section)


if __name__ == "__main__":
    main()
