"""deploy/grafana/goldenset-dashboard.json: valid JSON, its data source a variable, and every
metric it queries one that `/metrics` serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from service.core.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "goldenset-dashboard.json"
METRIC_NAME = re.compile(r"\bgoldenset_[a-z0-9_]+")
# What Prometheus's text format adds to a family's name in its samples.
SAMPLE_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def _walk(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [node, *(child for value in node.values() for child in _walk(value))]
    if isinstance(node, list):
        return [child for value in node for child in _walk(value)]
    return []


def _served_families(engine: Engine) -> set[str]:
    text = Metrics(engine).render().decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}


def _family(name: str, served: set[str]) -> str:
    if name in served:
        return name
    for suffix in SAMPLE_SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in served:
            return name.removesuffix(suffix)
    return name


def test_dashboard_queries_only_metrics_that_are_served(engine: Engine) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    nodes = _walk(dashboard)
    expressions = [node["expr"] for node in nodes if "expr" in node]
    assert len(expressions) >= 10
    referenced = {name for expression in expressions for name in METRIC_NAME.findall(expression)}
    served = _served_families(engine)
    missing = sorted(name for name in referenced if _family(name, served) not in served)
    assert not missing, f"the dashboard queries metrics /metrics does not serve: {missing}"
    for wanted in ("goldenset_review_backlog_items", "goldenset_candidates_pending", "goldenset_source_last_success_age_seconds", "goldenset_sealed_reads_left"):
        assert wanted in referenced


def test_every_panel_uses_the_prometheus_variable(engine: Engine) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert [variable["name"] for variable in dashboard["templating"]["list"] if variable["type"] == "datasource"] == ["DS_PROMETHEUS"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert all(target["datasource"]["uid"] == "${DS_PROMETHEUS}" for target in panel["targets"]), panel["title"]
