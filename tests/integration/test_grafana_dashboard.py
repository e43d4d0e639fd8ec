"""docs/grafana/epochlog-dashboard.json queries only metrics a running node serves.

Each PromQL expression of the dashboard (panel targets and template variable queries) is reduced to the
metric names it selects, and each must be among the series a real `epochlog up` node (broker and
controller in one process, one metrics endpoint) declares on `metrics.port`. A dashboard naming a metric
no node serves would show an empty panel forever: the negative case checks the test catches one.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.broker_process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "epochlog-dashboard.json"
# Words that read like names in PromQL but are not metrics (binary operators, modifiers).
KEYWORDS = {"and", "or", "unless", "offset", "bool", "inf", "nan", "atan2", "group_left", "group_right"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
    "untyped": ("",),
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not its functions, labels, or durations)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values, which may hold anything
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range durations, Grafana's $__rate_interval included
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    # label_values(metric, label): its second argument is a label.
    expr = re.sub(r"\blabel_values\s*\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,[^)]*\)", r"\1", expr)
    names = set()
    for m in re.finditer(r"(?<![A-Za-z0-9_.$])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[m.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if m.group(0).lower() not in KEYWORDS:
            names.add(m.group(0))
    return names


def dashboard_exprs(dash: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, expr) for every panel target (rows' nested panels too) and template variable query."""
    out: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if v.get("type") == "query" and isinstance(q, str):
            out.append((f"${v['name']}", q))
    return out


def served_names(text: str) -> set[str]:
    """Every series name a Prometheus text page declares, from its TYPE lines (a labelled counter no one
    incremented yet has no sample, but it is declared)."""
    out = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        name, kind = m.groups()
        if kind == "counter":  # prometheus_client declares a counter under its _total name
            name = name.removesuffix("_total")
        out.update(name + s for s in SUFFIXES.get(kind, ("",)))
    return out


def missing_metrics(dash: dict[str, Any], served: set[str]) -> dict[str, set[str]]:
    missing: dict[str, set[str]] = {}
    for where, expr in dashboard_exprs(dash):
        names = metric_names(expr)
        gone = names - served if names else {"(queries no metric)"}
        if gone:
            missing.setdefault(where, set()).update(gone)
    return missing


def test_metric_names_of_promql() -> None:
    assert metric_names('sum by (topic) (rate(a_total{job=~"$job", x="y{z}"}[$__rate_interval]))') == {"a_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))") == {"h_bucket"}
    assert metric_names("a / on (instance) group_left b > 1e3 and c offset 5m") == {"a", "b", "c"}
    assert metric_names("label_values(g, job)") == {"g"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    from tests.broker_process import BrokerProcess

    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("grafana") / "data", settings={"metrics.port": str(port)}).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return served_names(r.read().decode())
    finally:
        b.stop()


def test_every_dashboard_metric_is_served(served: set[str]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = dashboard_exprs(dash)
    assert len(exprs) >= 20
    assert missing_metrics(dash, served) == {}
    # The dashboard covers the controller's metrics and the broker's.
    queried = set().union(*(metric_names(e) for _, e in exprs))
    assert "kafka_controller_kafkacontroller_activecontrollercount" in queried
    assert "kafka_server_brokertopicmetrics_bytesout_total" in queried


def test_a_dashboard_querying_a_missing_metric_fails(served: set[str]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    dash["panels"].append(
        {"title": "typo", "targets": [{"expr": "rate(kafka_server_brokertopicmetrics_bytesinn_total[1m])"}]}
    )
    # A counter queried without Prometheus's _total suffix is missing too.
    dash["panels"].append({"title": "bare counter", "targets": [{"expr": "kafka_server_replicamanager_isrshrinks"}]})
    assert missing_metrics(dash, served) == {
        "typo": {"kafka_server_brokertopicmetrics_bytesinn_total"},
        "bare counter": {"kafka_server_replicamanager_isrshrinks"},
    }
