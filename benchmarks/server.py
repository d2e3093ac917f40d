"""``treadle serve`` under load: 1,000 runs listed, one run's 10,000 events streamed.

    python benchmarks/server.py [--repeat 5]

Fills a SQLite store with 1,000 small runs and one run whose event log holds
10,000 events, then serves it twice, each in a process of its own: with
``treadle serve`` and with the floor (``server_floor.py``: a bare Starlette
application reading the same file with ``sqlite3``). One HTTP client times
each question against each server in turn; the medians and their ratios
(server / floor) go into ``benchmarks/RESULTS.md``, between the markers of
their section, and ``benchmarks/server.json``.
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

    def __init__(self, command: list[str], port: int) -> None:
        self.port = port
        self.log = Path(tempfile.mkstemp(prefix="treadle-bench-server-", suffix=".log")[1])
        with self.log.open("w") as log:  # what it says, for when a request fails
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, cwd=BENCH
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
        return {"Authorization": f"Bearer {TOKEN}"}

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
        "## Server: runs listed, events streamed",
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
    figures = measure(parser.parse_args().repeat)
    (BENCH / "server.json").write_text(json.dumps(figures, indent=2) + "\n")
    section = report(figures)
    write(section)
    print(section)


if __name__ == "__main__":
    main()
