"""Charts of the common scale, drawn from the API's models alone: an eval's scale (each release's
difficulty index, and the models' equated scores by the release they ran on, with intervals), and
a score change split into the set and the model. Matplotlib's object API on the Agg canvas (no
pyplot, no global state), as `curation.evidence.charts`; SVG or PNG bytes, the same for the same
input."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from curation.evidence.charts import ImageFormat, render
from schemas.scale import EvalScale, ScoreChangeReport

MAX_MODELS = 8
"""Models drawn on a scale chart at most: those with the most runs (then by name)."""
FOOTNOTE = "Estimates on the eval's common scale with 95% intervals: evidence about scores, not a verdict."
_STYLE: dict[Any, Any] = {"svg.hashsalt": "goldenset-scale", "svg.fonttype": "none", "font.size": 9.0, "axes.spines.top": False, "axes.spines.right": False}


def scale_chart(scale: EvalScale, *, image_format: ImageFormat = "svg", dpi: int = 120) -> bytes:
    """Above, each release's difficulty index with its interval; below, the equated score on the
    reference release of the models with the most runs, by the release each run was on."""
    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=(9.0, 6.0), layout="constrained")
        upper, lower = figure.subplots(2, 1, sharex=True, height_ratios=[1, 2])
        assert isinstance(upper, Axes) and isinstance(lower, Axes)
        numbers = [release.number for release in scale.releases]
        indices = [release.difficulty_index for release in scale.releases]
        values = [index.value for index in indices]
        errors = [[index.value - index.low for index in indices], [index.high - index.value for index in indices]]
        upper.errorbar(numbers, values, yerr=errors, fmt="o", color="#444444", capsize=3)
        upper.set_ylabel("difficulty index\n(mean model's score)")
        runs_by_model: dict[str, list[Any]] = defaultdict(list)
        for run in scale.runs:
            runs_by_model[run.model].append(run)
        shown = sorted(runs_by_model, key=lambda name: (-len(runs_by_model[name]), name))[:MAX_MODELS]
        for name in shown:
            runs = sorted(runs_by_model[name], key=lambda run: run.release)
            x = [run.release for run in runs]
            y = [run.equated_score.value for run in runs]
            spread = [[run.equated_score.value - run.equated_score.low for run in runs], [run.equated_score.high - run.equated_score.value for run in runs]]
            lower.errorbar(x, y, yerr=spread, fmt="-o", capsize=3, label=name, markersize=4, linewidth=1)
        lower.set_ylabel(f"equated score on release {scale.reference_release}")
        lower.set_xlabel("release the run was on")
        lower.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=4, frameon=False, fontsize=8)
        figure.suptitle(f"{scale.eval}: common scale, version {scale.version}", fontsize=10, x=0.01, ha="left")
        figure.supxlabel(FOOTNOTE, fontsize=7.5, color="#555555", x=0.01, ha="left")
        return render(figure, image_format, dpi)


def score_change_chart(report: ScoreChangeReport, *, image_format: ImageFormat = "svg", dpi: int = 120) -> bytes:
    """The change and its two parts as bars with their intervals, and the observed change."""
    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=(7.0, 3.6), layout="constrained")
        axes = figure.subplots()
        assert isinstance(axes, Axes)
        parts = [("expected change", report.total, "#444444"), ("due to the set", report.set, "#e07b00"), ("due to the model", report.model, "#1f77b4")]
        labels = [label for label, _, _ in parts]
        values = [part.value for _, part, _ in parts]
        errors = [[part.value - part.low for _, part, _ in parts], [part.high - part.value for _, part, _ in parts]]
        axes.barh(labels, values, xerr=errors, color=[colour for _, _, colour in parts], capsize=4)
        axes.axvline(0, color="#888888", linewidth=0.8)
        axes.axvline(report.observed_change, color="#b2182b", linestyle=":", linewidth=1, label=f"observed change {report.observed_change:+.1f}")
        axes.invert_yaxis()
        axes.set_xlabel("points")
        axes.legend(loc="lower right", frameon=False, fontsize=8)
        first, second = report.run_a, report.run_b
        title = f"{report.eval}: run {first.id} ({first.model}, release {first.release}) to run {second.id} ({second.model}, release {second.release})"
        figure.suptitle(title, fontsize=10, x=0.01, ha="left")
        figure.supxlabel(FOOTNOTE, fontsize=7.5, color="#555555", x=0.01, ha="left")
        return render(figure, image_format, dpi)
