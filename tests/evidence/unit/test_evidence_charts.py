"""Charts of the evidence reports render as real SVG and PNG, the same report giving the same bytes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from curation.evidence.charts import probe_chart, public_inflation_chart, score_limits, temporal_split_chart, temporal_split_figure
from curation.evidence.probe_report import probe_report
from curation.evidence.probing import plan_probes
from curation.evidence.temporal_split import temporal_split_report
from curation.scale.inflation import public_inflation_report
from schemas.evidence import ItemResult, ProbeCompletion, ProbeItem, ProbeReport, TemporalSplitReport
from schemas.probe_tests import ProbeMetric
from tests.support.images import assert_png, assert_svg
from tests.support.inflation_world import inflation_world

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
    assert b"completion similarity (levenshtein_margin)" in svg and b"not an accusation" in svg
    assert b"margin over items of similar length" in svg and b"margin per item" in svg
    png = probe_chart(probe, metric=ProbeMetric.LCS_RATIO, image_format="png", dpi=60)
    assert assert_png(png) == (600, 276)


def test_public_inflation_chart_renders_svg_and_png(tmp_path: Path) -> None:
    world = inflation_world(np.random.default_rng(3), references=8, inflation=0.15, target_ability=0.0)
    report = public_inflation_report(
        world.reference_private, world.reference_public, world.target_private, world.target_public,
        reference_models=world.reference_models, model="example-model", eval_name="ops", corpus="public-bench", rng=np.random.default_rng(4),
    )  # fmt: skip
    svg = public_inflation_chart(report)
    (tmp_path / "inflation.svg").write_bytes(svg)
    assert_svg((tmp_path / "inflation.svg").read_bytes())
    assert public_inflation_chart(report) == svg
    assert b"example-model on public-bench against ops" in svg and b"ref-07" in svg and b"not an accusation" in svg and b"decide on the private eval" in svg
    assert assert_png(public_inflation_chart(report, image_format="png", dpi=60)) == (450, 336)


def test_an_unknown_image_format_is_refused(temporal: TemporalSplitReport) -> None:
    with pytest.raises(ValueError, match="'svg' or 'png'"):
        temporal_split_chart(temporal, image_format="gif")  # type: ignore[arg-type]


def _small_scores() -> TemporalSplitReport:
    """Scores all under 0.1 (a pass rate on a hard eval): 0.06 before the cutoff, 0.03 after."""
    rng = np.random.default_rng(2)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    results = [
        ItemResult(item_id=str(index), occurred_at=start + timedelta(days=int(day)), score=float(rng.uniform(0.04, 0.08) if day < 365 else rng.uniform(0.01, 0.05)))
        for index, day in enumerate(rng.integers(0, 730, 200))
    ]
    return temporal_split_report(results, cutoff=CUTOFF, model="example-model", corpus="incidents", rng=rng)


def test_the_score_axis_fits_the_scores_with_a_margin() -> None:
    assert score_limits([0.2, 0.6]) == pytest.approx((0.16, 0.7))
    assert score_limits([0.0, 1.0]) == (0.0, 1.0)  # never past 0 or 1 for scores within them
    low, high = score_limits([0.5, 0.5])
    assert low < 0.5 < high
    assert score_limits([-2.0, 3.0]) == pytest.approx((-2.5, 4.25))


def test_small_scores_fill_the_plot_and_the_legend_covers_no_data() -> None:
    report = _small_scores()
    figure = temporal_split_figure(report)
    score_axes = figure.axes[0]
    low, high = score_axes.get_ylim()
    monthly = [point.mean_score for point in report.monthly]
    assert 0.0 <= low <= min(monthly) and max(monthly) <= high < 0.15, (low, high)
    count_axes = figure.axes[1]
    drawn = count_axes.get_legend()
    assert score_axes.get_legend() is None and drawn is not None
    legend = drawn.get_window_extent()
    # Each plot with its tick labels and axis labels, the legend itself left out.
    plots = [axes.get_tightbbox(bbox_extra_artists=[]) for axes in figure.axes]
    assert all(plot is not None for plot in plots)
    for plot in plots:
        assert plot is not None and not legend.overlaps(plot), "the legend lies over a plot or its labels"
    assert all(plot is not None and legend.y1 <= plot.y0 for plot in plots), "the legend is not under the plots"
    for text in figure.texts:  # the titles and the footnote
        assert not legend.overlaps(text.get_window_extent()), f"the legend lies over {text.get_text()[:40]!r}"
    shown = [text.get_text() for text in drawn.get_texts()]
    assert shown[:2] == [f"before cutoff: mean {report.before.mean_score:.3f} (n = {report.before.n})", f"after cutoff: mean {report.after.mean_score:.3f} (n = {report.after.n})"]
