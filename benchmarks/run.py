"""Benchmark runner: peer venv, one subprocess per (engine, workload, repetition), tables.

    python benchmarks/run.py [--engines treadle,langgraph] [--workloads chain,loop]
                             [--repeat 5] [--quick]

Writes benchmarks/RESULTS.md and benchmarks/results.json. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import FLOOR, write_report
from _workload import WORKLOADS as SPECS

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV = BENCH / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".bench-requirements"
PEERS = [
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "agent-framework-core",
    "llama-index-workflows",
    "pydantic-graph",
    "dbos",
]
# display name -> (module in benchmarks/engines/, distribution); the floor is always run
ENGINES = {
    FLOOR: ("raw_asyncio", None),
    "treadle": ("treadle", "treadle"),
    "langgraph": ("langgraph", "langgraph"),
    "agent-framework": ("agent_framework", "agent-framework-core"),
    "llama-index-workflows": ("llama_index_workflows", "llama-index-workflows"),
    "pydantic-graph": ("pydantic_graph", "pydantic-graph"),
    "dbos": ("dbos", "dbos"),
}
OTHER_DISTRIBUTIONS = ["langgraph-checkpoint", "langgraph-checkpoint-sqlite", "pydantic"]
WORKLOADS = list(SPECS)


def ensure_venv() -> None:
    """Create benchmarks/.venv and install the peers plus treadle (editable); idempotent."""
    wanted = "\n".join(
        [
            *PEERS,
            f"-e {REPO}",
            "pyproject sha256 "
            + hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest(),
        ]
    )
    if PY.exists() and STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PY.exists():
        python3 = shutil.which("python3") or sys.executable
        print(f"creating {VENV} with {python3}", flush=True)
        subprocess.run([python3, "-m", "venv", str(VENV)], check=True)
    print(f"installing into {VENV}: {', '.join(PEERS)}, treadle (editable)", flush=True)
    for args in (["--upgrade", "pip"], [*PEERS, "-e", str(REPO)]):
        done = subprocess.run(
            [str(PY), "-m", "pip", "install", "--quiet", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"pip install failed:\n{done.stdout}\n{done.stderr}")
    STAMP.write_text(wanted)


def probe(code: str) -> Any:
    done = subprocess.run([str(PY), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def filesystem_of(path: str) -> str:
    """``device (type)`` of the mount holding ``path``, from /proc/mounts."""
    best = ("", "unknown", "unknown")
    with open("/proc/mounts") as f:  # noqa: PTH123
        for line in f:
            device, mount, fstype = line.split()[:3]
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best[0]):
                best = (mount, device, fstype)
    return f"{best[1]} ({best[2]}, mounted on {best[0]})"


def machine_facts() -> dict[str, Any]:
    cpu = "unknown"
    mem_kb = 0
    with open("/proc/cpuinfo") as f:  # noqa: PTH123
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    with open("/proc/meminfo") as f:  # noqa: PTH123
        mem_kb = next((int(ln.split()[1]) for ln in f if ln.startswith("MemTotal")), 0)
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kb / 2**20, 1),
        "python": probe("import json, sys; print(json.dumps(sys.version.split()[0]))"),
        "platform": platform.platform(),
    }


def installed_versions(distributions: list[str]) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m\n"
        "def v(d):\n"
        "    try:\n        return m.version(d)\n"
        "    except m.PackageNotFoundError:\n        return 'not installed'\n"
        f"print(json.dumps({{d: v(d) for d in {distributions!r}}}))"
    )
    return probe(code)


def run_child(engine: str, workload: str, quick: bool, scratch: str) -> dict[str, Any]:
    cmd = [str(PY), "-c", "import _workload; _workload.main()", ENGINES[engine][0], workload]
    if quick:
        cmd.append("--quick")
    env = os.environ | {"PYTHONHASHSEED": "0", "BENCH_SCRATCH": scratch}
    timeout = SPECS[workload].timeout_s
    try:
        done = subprocess.run(
            cmd,
            cwd=BENCH,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"timed out after {timeout} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.stderr.write(f"\n!!! {engine} / {workload} FAILED\n{done.stderr}\n")
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "error", "reason": last}
    return json.loads(lines[-1])


def describe(result: dict[str, Any]) -> str:
    if result["status"] == "ok":
        return f"{result['value']:10.2f} {result['unit']}"
    return f"{result['status']}: {result['reason']}"


def measure(
    engines: list[str], workloads: list[str], repeat: int, quick: bool, scratch: str
) -> list[dict]:
    """Repetition by repetition, workload by workload, engine by engine (round-robin)."""
    raw: list[dict[str, Any]] = []
    settled: dict[tuple[str, str], dict[str, Any]] = {}  # absent/unavailable/error: not retried
    for rep in range(1, repeat + 1):
        for workload in workloads:
            if rep > (SPECS[workload].max_repeat or repeat):
                continue
            for engine in engines:
                key = (engine, workload)
                if key in settled:
                    continue
                t0 = time.monotonic()
                result = run_child(engine, workload, quick, scratch)
                result |= {"engine": engine, "rep": rep}
                result["workload"] = workload
                raw.append(result)
                if result["status"] != "ok":
                    settled[key] = result
                took = time.monotonic() - t0
                where = f"[{rep}/{repeat}] {workload:<21} {engine:<22}"
                print(f"{where} {describe(result)}  ({took:.1f} s)", flush=True)
    return raw


def summarize(raw: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Median over repetitions of each (workload, engine); non-ok results pass through."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in raw:
        grouped.setdefault((r["workload"], r["engine"]), []).append(r)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (workload, engine), results in grouped.items():
        ok = [r for r in results if r["status"] == "ok"]
        if not ok:
            cell = {k: results[0][k] for k in ("status", "reason")}
        else:
            values = [r["value"] for r in ok]
            cell = {
                "status": "ok",
                "unit": ok[0]["unit"],
                "value": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "repetitions": len(ok),
                "maxrss_mb": statistics.median(r["maxrss_kb"] for r in ok) / 1024,
            }
            for key, _, _ in SPECS[workload].extra:
                if key in ok[0]:
                    cell[key] = statistics.median(r[key] for r in ok)
            if "note" in ok[0]:
                cell["note"] = ok[0]["note"]
        out.setdefault(workload, {})[engine] = cell
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated")
    parser.add_argument("--repeat", type=int, help="repetitions per cell (default 5, quick 2)")
    parser.add_argument("--quick", action="store_true", help="fewer timed runs per child")
    args = parser.parse_args()
    names = {n.replace("_", "-") for n in args.engines.split(",") if n}
    unknown = names - set(ENGINES) | {w for w in args.workloads.split(",") if w} - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown engine or workload: {', '.join(sorted(unknown))}")
    engines = [e for e in ENGINES if e in names or e == FLOOR]  # the floor anchors every ratio
    workloads = [w for w in WORKLOADS if w in args.workloads.split(",")]
    repeat = args.repeat or (2 if args.quick else 5)

    ensure_venv()

    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()[0]
    # One scratch directory for every child, so all SQLite files share one filesystem.
    with tempfile.TemporaryDirectory(prefix="treadle-bench-") as scratch:
        scratch_fs = filesystem_of(os.path.realpath(scratch))
        raw = measure(engines, workloads, repeat, args.quick, scratch)
    dists = [d for _, d in ENGINES.values() if d]
    versions = installed_versions(dists + OTHER_DISTRIBUTIONS)
    results = {
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "machine": machine_facts() | {"scratch_filesystem": scratch_fs},
        "engine_versions": {
            e: versions[dist] if dist else "hand-written floor"
            for e, (_, dist) in ENGINES.items()
            if e in engines
        },
        "other_versions": {d: versions[d] for d in OTHER_DISTRIBUTIONS},
        "repeat": repeat,
        "quick": args.quick,
        "engines": engines,
        "workloads": workloads,
        "medians": summarize(raw),
        "raw": raw,
    }
    (BENCH / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_report(results, BENCH / "RESULTS.md")
    print(f"\nwrote {BENCH / 'RESULTS.md'} and {BENCH / 'results.json'}")
    return 1 if any(r["status"] == "error" for r in raw) else 0


if __name__ == "__main__":
    sys.exit(main())
