"""docs/observing.md, the Grafana dashboard and the alert rules name only metrics that exist.

The catalogue (``treadle._engine._metrics.CATALOGUE``) is what the code
exposes (``test_metrics.py`` scrapes every name of it through the real
exporter); here the docs are held to it: the page's table lists exactly the
catalogue, and every ``treadle_*`` series the dashboard or the rules query
is one of its names (a histogram's with ``_bucket``, ``_sum`` or
``_count``). Debian's ``promtool`` (``make renderers`` installs it)
validates the rules.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from treadle._engine._metrics import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SERIES = re.compile(r"\btreadle_[a-z_]+\b")


def _exposed() -> set[str]:
    names = set()
    for spec in CATALOGUE:
        if spec.kind == "histogram":
            names |= {f"{spec.prometheus}_{part}" for part in ("bucket", "sum", "count")}
        else:
            names.add(spec.prometheus)
    return names


def _unknown(expressions: list[str]) -> set[str]:
    used = {name for expr in expressions for name in SERIES.findall(expr)}
    assert used, "no treadle metric is used at all"
    return used - _exposed()


def test_the_dashboard_queries_only_metrics_that_exist():
    dashboard = json.loads((DOCS / "grafana" / "treadle.json").read_text())
    expressions = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(expressions) >= len(dashboard["panels"])
    assert _unknown(expressions) == set()
    # Every metric of the catalogue has a panel.
    used = {n for e in expressions for n in SERIES.findall(e)}
    shown = {
        spec.prometheus for spec in CATALOGUE if any(n.startswith(spec.prometheus) for n in used)
    }
    assert shown == {spec.prometheus for spec in CATALOGUE}


def test_the_alert_rules_query_only_metrics_that_exist():
    rules = yaml.safe_load((DOCS / "prometheus" / "alerts.yml").read_text())
    expressions = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert _unknown(expressions) == set()
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {"TreadleApprovalWaitingOverADay", "TreadleRunsFailing", "TreadleSlowCommits"} <= alerts


def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    assert promtool, "Debian's promtool is missing: `make renderers` installs prometheus"
    checked = subprocess.run(
        [promtool, "check", "rules", str(DOCS / "prometheus" / "alerts.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_observing_md_documents_exactly_the_catalogue():
    text = (DOCS / "observing.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`treadle_"):
            rows[cells[0].strip("`")] = cells
    assert set(rows) == {spec.prometheus for spec in CATALOGUE}
    for spec in CATALOGUE:
        _, kind, labels, otel, _ = rows[spec.prometheus]
        assert kind.split()[0] == spec.kind, spec.prometheus
        assert re.findall(r"`(\w+)`", labels) == list(spec.attributes), spec.prometheus
        assert otel == f"`{spec.name}` (`{spec.unit}`)", spec.prometheus
    named = {spec.prometheus for spec in CATALOGUE}
    assert set(SERIES.findall(text)) - named - _exposed() == set()
