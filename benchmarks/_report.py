"""Renders the runner's results as benchmarks/RESULTS.md: medians, ratios, treadle vs peers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from _workload import GROWING_QUICK_STEPS, WORKLOADS

if TYPE_CHECKING:
    from pathlib import Path

FLOOR = "raw-asyncio"
TREADLE = "treadle"
TIMES = "\N{MULTIPLICATION SIGN}"
TIME_KEYS = ("value", "wake_s", "park_us", "early_us")  # the other figures are sizes
NONE = "\N{EN DASH}"

Cell = dict[str, Any]
Medians = dict[str, dict[str, Cell]]  # workload -> engine -> cell


class Notes:
    """Numbered footnotes, so a table cell can say briefly why it has no number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def render(self) -> list[str]:
        return [f"{i}. {t}" for i, t in enumerate(self.texts, 1)]


def _table(header: list[str], rows: list[list[str]], numeric: bool = True) -> list[str]:
    align = "---:" if numeric else "---"
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + [align] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}" if x < 1 else f"{x:.1f}"


def _ok(cell: Cell | None) -> bool:
    return cell is not None and cell["status"] == "ok"


def _value(cell: Cell | None, engine: str, workload: str, notes: Notes, key: str = "value") -> str:
    if cell is None:
        return "not run"
    if key != "value" and (not _ok(cell) or key not in cell):
        return NONE  # the workload's own row says why
    if not _ok(cell):
        label = {"absent": "absent", "unavailable": "not available", "error": "FAILED"}
        where = engine if cell["status"] == "unavailable" else f"{engine}, `{workload}`"
        ref = notes.ref(f"{where}: {cell['reason']}")
        return f"{label[cell['status']]} {ref}"
    text = _num(cell[key])
    if "note" in cell and key == "value":  # once per cell, on the workload's own row
        text += " " + notes.ref(f"{engine}, `{workload}`: {cell['note']}")
    return text


def _ratio(cell: Cell | None, ref: Cell | None, key: str = "value") -> str:
    if _ok(cell) and _ok(ref) and key in cell and ref.get(key, 0) > 0:
        return f"{cell[key] / ref[key]:.2f}{TIMES}"
    return NONE


def _rows(medians: Medians, ratios: bool = False) -> list[tuple[str, str, str]]:
    """(label, workload, key) for every row: one per workload, plus its extra figures.

    With ``ratios``, only the rows whose ratio to the floor means something.
    """
    rows = []
    for workload in medians:
        spec = WORKLOADS[workload]
        rows.append((f"`{workload}` ({spec.unit})", workload, "value"))
        rows += [
            (f"`{workload}` ({label})", workload, key)
            for key, label, has_ratio in spec.extra
            if has_ratio or not ratios
        ]
    return rows


def _medians_table(medians: Medians, engines: list[str], notes: Notes) -> list[str]:
    rows = [
        [label] + [_value(medians[w].get(e), e, w, notes, key) for e in engines]
        for label, w, key in _rows(medians)
    ]
    return _table(["workload (unit)", *engines], rows)


def _floor_table(medians: Medians, engines: list[str]) -> list[str]:
    rows = [
        [label] + [_ratio(medians[w].get(e), medians[w].get(FLOOR), key) for e in engines]
        for label, w, key in _rows(medians, ratios=True)
    ]
    return _table(["workload", *engines], rows)


def _treadle_table(medians: Medians, engines: list[str]) -> list[str]:
    peers = [e for e in engines if e not in (FLOOR, TREADLE)]
    if TREADLE not in engines or not peers:
        return ["treadle or its peers were not part of this run."]
    rows = []
    for label, workload, key in _rows(medians, ratios=True):
        row = [label]
        less, more = ("faster", "slower") if key in TIME_KEYS else ("less", "more")
        for peer in peers:
            t, p = medians[workload].get(TREADLE), medians[workload].get(peer)
            if _ok(t) and _ok(p) and key in t and p.get(key, 0) > 0 and t[key] > 0:
                r = t[key] / p[key]
                verdict = f"{1 / r:.1f}{TIMES} {less}" if r < 1 else f"{r:.1f}{TIMES} {more}"
                row.append(f"{r:.3f} ({verdict})")
            else:
                row.append(NONE)
        rows.append(row)
    return [
        "treadle's median divided by the peer's (below 1: treadle is faster, or uses less; the",
        "words say by how much). A dash means one of the two has no figure for that row.",
        "",
        *_table(["workload", *peers], rows),
    ]


def _spread_table(medians: Medians, engines: list[str]) -> list[str]:
    rows = []
    for workload, cells in medians.items():
        row = [f"`{workload}`"]
        for e in engines:
            c = cells.get(e)
            if _ok(c) and c["repetitions"] == 1:
                row.append("1 repetition")
            elif _ok(c):
                row.append(f"\N{PLUS-MINUS SIGN}{50 * (c['max'] - c['min']) / c['value']:.0f}%")
            else:
                row.append(NONE)
        rows.append(row)
    return _table(["workload", *engines], rows)


def _durability_notes(medians: Medians) -> list[str]:
    durable = {"ckpt_chain", "ckpt_chain_background", "ckpt_chain_batched", "idle_runs"}
    if not (durable | {"many_durable_runs", "growing_state"}) & set(medians):
        return []
    out = ["## Durability modes, parked runs, many durable runs, growing state", ""]
    if "ckpt_chain" in medians:
        out.append(
            '- `ckpt_chain` is the default mode, `durability="sync"` in treadle and '
            "LangGraph: a step starts only once the previous step's checkpoint is fsync'd, "
            "so a crash loses nothing committed."
        )
    if "ckpt_chain_background" in medians:
        out.append(
            "- `ckpt_chain_background` is treadle's `durability=\"background\"` (LangGraph's "
            'row: `durability="async"`): a step\'s commit overlaps the next step, at most '
            "one commit in flight, so a crash loses at most the last superstep's checkpoint. "
            "The floor's row is the same fsync'd insert per step as in `ckpt_chain`."
        )
    if "ckpt_chain_batched" in medians:
        out.append(
            '- `ckpt_chain_batched` is treadle\'s `durability="batched"`: steps go on while up '
            "to 16 commits queue, and the store writes what has queued in one transaction "
            "(one fsync), so a crash loses at most the last 16 steps' checkpoints. The floor "
            "inserts a checkpoint every step and commits every 16th."
        )
    if "idle_runs" in medians:
        spec = WORKLOADS["idle_runs"]
        out.append(
            f"- `idle_runs` is measured once per engine ({spec.max_repeat} repetition, no "
            "warm-up) whatever the repetition count above, because parking and waking "
            f"{spec.units:,} runs takes minutes. Its parked-runs row gives each engine's N; "
            "per-run times are comparable across engines, totals only at equal N. Peak RSS "
            "growth is sampled after every batch and includes one-time costs (the store's "
            "connection, its page cache, its thread), which weigh more per run at a smaller "
            "N; the last-90% row is the slope."
        )
    if "many_durable_runs" in medians:
        out.append(
            "- `many_durable_runs`: durable supersteps/s is the headline (higher is better; "
            "5 supersteps per run divided by the wall time of all the runs together). Every "
            'engine commits each superstep before that run goes on (`durability="sync"`); '
            "the floor commits each one in its own fsync'd transaction, so an engine that "
            "shares fsyncs between runs (group commit) can beat it."
        )
    if "growing_state" in medians:
        spec = WORKLOADS["growing_state"]
        out.append(
            "- `growing_state` is one run per engine (no warm-up, one repetition). Its "
            "supersteps row gives the run's length ("
            f"{spec.units:,}; {GROWING_QUICK_STEPS:,} with `--quick`), so the last-100 row covers "
            "the supersteps before the run's end. A superstep's cost runs from its node's "
            "entry to the next one's, so it includes the barrier and the checkpoint commit. "
            "A growth ratio near 1 and a store near the items' own size (the floor: one "
            "row per item) mean the checkpoint writes what changed; a store near half the "
            "square of the step count times 1 KB means every checkpoint rewrote the whole "
            "list."
        )
    return [*out, ""]


def write_report(results: dict[str, Any], path: Path) -> None:
    engines: list[str] = results["engines"]
    medians: Medians = results["medians"]
    machine = results["machine"]
    notes = Notes()
    quick = " (**quick mode**: fewer timed runs per subprocess)" if results["quick"] else ""
    out = [
        "# Benchmark results",
        "",
        "Generated by `benchmarks/run.py`; do not edit by hand. `benchmarks/README.md` says",
        "what each workload measures and how to read these tables.",
        "",
        f"- Date: {results['date']} (the run took {results['duration_s']:.0f} s)",
        f"- Machine: {machine['cores']} cores, {machine['cpu']}, {machine['memory_gib']} GiB RAM",
        f"- OS: {machine['platform']}; Python {machine['python']}",
        *(
            [
                (
                    "- Load average (1 min) when the run started and ended: "
                    f"{results['load_start']:.2f}, {results['load_end']:.2f} (other work on "
                    "the machine widens the spread)"
                )
            ]
            if "load_start" in results
            else []
        ),
        *(
            [
                (
                    "- Every SQLite file (the floor's, treadle's, LangGraph's, DBOS's) is made "
                    f"in one scratch directory on {machine['scratch_filesystem']}."
                )
            ]
            if "scratch_filesystem" in machine
            else []
        ),
        (
            f"- Repetitions per cell: {results['repeat']}{quick}. Each repetition is a fresh "
            "subprocess reporting the median of its timed runs after warm-up; repetitions are "
            "interleaved engine by engine; a cell is the median over repetitions."
        ),
        "",
        *_table(
            ["engine", "version"],
            [[e, v] for e, v in results["engine_versions"].items()],
            numeric=False,
        ),
        "",
        "Also installed: "
        + ", ".join(f"{d} {v}" for d, v in results["other_versions"].items())
        + ".",
        "",
        "## Medians (lower is better, except runs/s and durable supersteps/s)",
        "",
        *_medians_table(medians, engines, notes),
        "",
        *([*notes.render(), ""] if notes.texts else []),
        f"## Ratio to the {FLOOR} floor (engine / floor; lower is better)",
        "",
        *_floor_table(medians, engines),
        "",
        "## treadle vs each peer",
        "",
        *_treadle_table(medians, engines),
        "",
        *_durability_notes(medians),
        "## Spread across repetitions (half the max-min range, as % of the median)",
        "",
        *_spread_table(medians, engines),
        "",
        "## Workloads",
        "",
        *[f"- `{w}`: {WORKLOADS[w].description} ({WORKLOADS[w].unit})." for w in medians],
    ]
    # Sections other scripts write (benchmarks/server.py) stay, between their markers.
    kept = path.read_text() if path.exists() else ""
    start, end = "<!-- server benchmark -->", "<!-- /server benchmark -->"
    if start in kept and end in kept:
        out += ["", start + kept.split(start, 1)[1].split(end, 1)[0] + end]
    path.write_text("\n".join(out) + "\n")
