"""Charts of the evidence reports render as real SVG and PNG, the same report giving the same bytes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from curation.evidence.charts import probe_chart, temporal_split_chart
from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from curation.evidence.temporal_split import temporal_split_report
from schemas.evidence import ItemResult, ProbeCompletion, ProbeItem, ProbeReport, SimilarityMetric, TemporalSplitReport
from tests.support.images import assert_png, assert_svg

CUTOFF = date(2024, 1, 1)


@pytest.fixture(scope="module")
def temporal() -> TemporalSplitReport:
    rng = np.random.default_rng(0)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    results = [
        ItemResult(
            item_id=str(index),
            occurred_at=start + timedelta(days=int(day)),
            score=float(rng.beta(2, 2)) * (0.8 if day >= 365 else 1.0),
            human_success=bool(rng.random() < 0.6),
        )
        for index, day in enumerate(rng.integers(0, 730, 300))
    ]
    return temporal_split_report(results, cutoff=CUTOFF, model="example-model", corpus="incidents", rng=rng)


@pytest.fixture(scope="module")
def probe() -> ProbeReport:
    rng = np.random.default_rng(1)
    items = [
        ProbeItem(item_id=str(index), occurred_at=datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=index * 7), text=f"item {index} " + "word " * int(rng.integers(8, 30)))
        for index in range(100)
    ]
    plan = plan_probes(items, dataset="incidents", split="dev")
    completions = [
        ProbeCompletion(item_id=item_id, completion=cut.remainder if rng.random() < 0.5 and item_id < "5" else "unrelated text", attempts=1) for item_id, cut in plan.cuts.items()
    ]
    return probe_report(plan, completions, cutoff=CUTOFF, model="example-model")


def test_temporal_split_chart_renders_svg_and_png(temporal: TemporalSplitReport, tmp_path: Path) -> None:
    svg = temporal_split_chart(temporal)
    png = temporal_split_chart(temporal, image_format="png", dpi=80)
    (tmp_path / "temporal.svg").write_bytes(svg)
    (tmp_path / "temporal.png").write_bytes(png)
    root = assert_svg((tmp_path / "temporal.svg").read_bytes())
    assert root.get("width") and root.get("height")
    assert assert_png((tmp_path / "temporal.png").read_bytes()) == (720, 448)
    assert temporal_split_chart(temporal) == svg
    # Text stays text in the SVG: searchable, and the chart carries the report's caveat.
    assert b"training cutoff 2024-01-01" in svg and b"not an accusation" in svg


def test_probe_chart_renders_svg_and_png(probe: ProbeReport, tmp_path: Path) -> None:
    svg = probe_chart(probe)
    (tmp_path / "probe.svg").write_bytes(svg)
    assert_svg((tmp_path / "probe.svg").read_bytes())
    assert b"completion similarity (levenshtein)" in svg and b"not an accusation" in svg
    png = probe_chart(probe, metric=SimilarityMetric.LCS_RATIO, image_format="png", dpi=60)
    assert assert_png(png) == (600, 276)


def test_an_unknown_image_format_is_refused(temporal: TemporalSplitReport) -> None:
    with pytest.raises(ValueError, match="'svg' or 'png'"):
        temporal_split_chart(temporal, image_format="gif")  # type: ignore[arg-type]
