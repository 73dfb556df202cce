"""Charts of the evidence reports, drawn from the report models alone (so the service can redraw a
stored report): the temporal split as a monthly series around the cutoff, a completion probe
as the similarity of pre-cutoff items against the control band, and the public-inflation report as
the reference models' private and public scores with the fitted line and the model against it.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no global figure state: safe in
a server's threads). Returns SVG or PNG bytes; the same report gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from scipy.special import expit, logit, ndtr, ndtri

from curation.evidence.wording import chance_share, p_text, points, probe_test_name
from schemas.evidence import InflationFit, MonthHalf, ProbeReport, PublicInflationReport, TemporalSplitReport, cutoff_instant
from schemas.probe_tests import ProbeMetric, ProbeTest

ImageFormat = Literal["svg", "png"]

BEFORE_COLOUR = "#1f77b4"
AFTER_COLOUR = "#e07b00"
STRADDLE_COLOUR = "#8c8c8c"
FLAG_COLOUR = "#b2182b"
HALF_COLOURS: dict[MonthHalf, str] = {"before_cutoff": BEFORE_COLOUR, "after_cutoff": AFTER_COLOUR, "straddles_cutoff": STRADDLE_COLOUR}
FOOTNOTE = "Evidence about one score for one model, not an accusation. On a positive result, decide on items dated after the cutoff."
INFLATION_FOOTNOTE = "Evidence about one score for one model, not an accusation. On a positive result, decide on the private eval."
_STYLE: dict[Any, Any] = {
    "date.epoch": "1970-01-01T00:00:00",
    "svg.hashsalt": "goldenset-evidence",
    "svg.fonttype": "none",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def render(figure: Figure, image_format: ImageFormat, dpi: int) -> bytes:
    """The figure as SVG or PNG bytes, the same for the same figure (no date or software stamp)."""
    if image_format not in ("svg", "png"):
        raise ValueError(f"image_format must be 'svg' or 'png' (got {image_format!r})")
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    metadata: dict[str, str | None] = {"Date": None} if image_format == "svg" else {"Software": None}
    figure.savefig(buffer, format=image_format, dpi=dpi, metadata=metadata)
    return buffer.getvalue()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _num(moment: datetime) -> float:
    """A date as matplotlib's day number since its epoch, pinned to 1970-01-01 in `_STYLE` (the typed
    API takes numbers, not datetimes)."""
    return (moment - _EPOCH).total_seconds() / 86400.0


def _month_middle(month: str) -> float:
    year, number = (int(part) for part in month.split("-"))
    return _num(datetime(year, number, 15, tzinfo=UTC))


def _at(day: date) -> float:
    return _num(cutoff_instant(day))


def _date_axis(axes: Axes) -> None:
    """Dates on the x axis, at most a handful of ticks, labelled concisely (a short span shows days
    under one month label, a long one years and months) so the labels never overlap."""
    axes.xaxis_date(UTC)
    locator = AutoDateLocator(tz=UTC, minticks=3, maxticks=6)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]


def _titles(figure: Figure, headline: str, detail: str, flagged: bool, footnote: str = FOOTNOTE) -> None:
    figure.suptitle(f"{headline}\n{detail}", fontsize=10, color=FLAG_COLOUR if flagged else "black", x=0.01, ha="left")
    figure.supxlabel(footnote, fontsize=7.5, color="#555555", x=0.01, ha="left")


LEGEND_DROP = 2.6
"""How far the legend sits under the lower plot's edge, in font sizes: below its date labels."""
SCORE_MARGIN = 0.1
"""Room under the lowest score and over the highest, as a share of their range."""
SCORE_HEADROOM = 0.25
"""More room over the highest score, as a share of the range, for the cutoff's label."""


def score_limits(scores: Sequence[float]) -> tuple[float, float]:
    """The score axis's limits: the range of `scores` with a margin, so that scores close together
    (all under 0.1, say) fill the plot rather than a line at its foot; never past 0 or 1 when the
    scores lie within them. Equal scores get a range of their own around them."""
    low, high = min(scores), max(scores)
    span = high - low if high > low else max(abs(high) * 0.2, 0.01)
    bottom, top = low - SCORE_MARGIN * span, high + SCORE_HEADROOM * span
    if low >= 0.0:
        bottom = max(bottom, 0.0)
    if high <= 1.0:
        top = min(top, 1.0)
    return bottom, top


def temporal_split_chart(report: TemporalSplitReport, *, image_format: ImageFormat = "svg", dpi: int = 120) -> bytes:
    """The chart of `temporal_split_figure` as SVG or PNG bytes."""
    with matplotlib.rc_context(_STYLE):
        return render(_temporal_split(report), image_format, dpi)


def temporal_split_figure(report: TemporalSplitReport) -> Figure:
    """The monthly mean score (dot size by item count) with the cutoff, each half's mean across its
    dates, the human success rate where known, and items per month below; the score axis fitted
    to the scores (`score_limits`) and the legend under the plots, clear of the data and the dates. Returned
    laid out, so the places of its parts can be read."""
    with matplotlib.rc_context(_STYLE):
        figure = _temporal_split(report)
        figure.draw_without_rendering()
        return figure


def _temporal_split(report: TemporalSplitReport) -> Figure:
    figure = Figure(figsize=(9.0, 5.6), layout="constrained")
    score_axes, count_axes = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    assert isinstance(score_axes, Axes) and isinstance(count_axes, Axes)
    months = [_month_middle(point.month) for point in report.monthly]
    counts = np.array([point.n for point in report.monthly], dtype=np.float64)
    colours = [HALF_COLOURS[point.half] for point in report.monthly]
    score_axes.plot(months, [point.mean_score for point in report.monthly], color="#bbbbbb", linewidth=0.8, zorder=1)
    sizes = 12.0 + 140.0 * np.sqrt(counts / max(1.0, float(counts.max())))
    score_axes.scatter(months, [point.mean_score for point in report.monthly], s=sizes, c=colours, alpha=0.85, edgecolors="white", linewidths=0.5, zorder=2)
    human = [(month, point.human_success_rate) for month, point in zip(months, report.monthly, strict=True) if point.human_success_rate is not None]
    if human:
        score_axes.plot([m for m, _ in human], [rate for _, rate in human], linestyle=":", color="#555555", linewidth=1.0, label="people's success rate")
    for half, colour in ((report.before, BEFORE_COLOUR), (report.after, AFTER_COLOUR)):
        start, end = _num(half.first_occurred_at), _num(max(half.last_occurred_at, half.first_occurred_at + timedelta(days=1)))
        label = f"{'before' if half.label == 'before_cutoff' else 'after'} cutoff: mean {half.mean_score:.3f} (n = {half.n})"
        score_axes.hlines(half.mean_score, start, end, colors=colour, linewidth=2.2, label=label, zorder=3)
    cutoff = _at(report.cutoff)
    for axes in (score_axes, count_axes):
        axes.axvline(cutoff, color="black", linestyle="--", linewidth=1.0)
    score_axes.annotate(
        f"training cutoff {report.cutoff.isoformat()}",
        xy=(cutoff, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, -12),
        textcoords="offset points",
        fontsize=8,
    )
    shown = [point.mean_score for point in report.monthly] + [report.before.mean_score, report.after.mean_score] + [rate for _, rate in human]
    score_axes.set_ylim(*score_limits(shown))
    score_axes.set_ylabel(f"mean {report.score_name} per month")
    verdict = "older items score higher than chance explains" if report.flagged else "no gap beyond chance"
    _titles(
        figure,
        f"{report.model} on {report.corpus}, {report.score_name} before and after the training cutoff: {verdict}",
        f"difference {points(report.difference)} (95% interval {report.interval.low * 100:+.1f} to {report.interval.high * 100:+.1f}), permutation {p_text(report.p_value)}",
        report.flagged,
    )
    count_axes.bar(months, counts, width=20.0, color=colours, alpha=0.85)
    count_axes.set_ylabel("items")
    _date_axis(count_axes)
    # Under the plots, past the dates: a legend inside the score plot would cover its dots.
    handles, labels = score_axes.get_legend_handles_labels()
    count_axes.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=LEGEND_DROP, ncols=len(labels), fontsize=8, frameon=False)
    return figure


def _padded_range(values: np.ndarray) -> tuple[float, float]:
    """The values' range with a twentieth of it added on each side (a unit around a single value)."""
    low, high = float(np.min(values)), float(np.max(values))
    pad = (high - low) / 20 if high > low else 0.5
    return low - pad, high + pad


def _metric_label(metric: ProbeMetric, *, completion: bool) -> str:
    if metric is ProbeMetric.LEVENSHTEIN_MARGIN:
        return "margin over items of similar length (levenshtein_margin)"
    return f"similarity to the true remainder ({metric.value})" if completion else f"{metric.value} (higher: more like a text the model has seen)"


def probe_chart(report: ProbeReport, *, metric: ProbeMetric | None = None, image_format: ImageFormat = "svg", dpi: int = 120) -> bytes:
    """Left: the distributions of the metric (a similarity, or a membership score for the
    log-probability tests) over pre-cutoff items and the control band, with the control's 95th
    percentile and both medians. Right: each item's score by date, with the cutoff and the same
    threshold, so the items that stand out can be found. The title names the test."""
    metric = metric or report.primary_metric
    comparison = report.comparison(metric)
    pre = np.array([item.similarity[metric] for item in report.items if item.band == "pre_cutoff"], dtype=np.float64)
    control = np.array([item.similarity[metric] for item in report.items if item.band == "control"], dtype=np.float64)
    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=(10.0, 4.6), layout="constrained")
        hist_axes, time_axes = figure.subplots(1, 2, width_ratios=[1, 1.3])
        assert isinstance(hist_axes, Axes) and isinstance(time_axes, Axes)
        completion = report.test is ProbeTest.COMPLETION
        bounded = metric in (ProbeMetric.LEVENSHTEIN, ProbeMetric.LCS_RATIO)  # in [0, 1]; a margin can be below 0
        low, high = (0.0, 1.0) if bounded else _padded_range(np.concatenate([pre, control]))
        bins = np.linspace(low, high, 26)
        hist_axes.hist(control, bins=bins.tolist(), density=True, histtype="stepfilled", alpha=0.45, color=AFTER_COLOUR, label=f"control: after cutoff (n = {control.size})")
        hist_axes.hist(pre, bins=bins.tolist(), density=True, histtype="step", linewidth=1.8, color=BEFORE_COLOUR, label=f"before cutoff (n = {pre.size})")
        hist_axes.axvline(comparison.control_p95, color="black", linestyle="--", linewidth=1.0, label=f"control 95th percentile ({comparison.control_p95:.2f})")
        hist_axes.axvline(comparison.pre_median, color=BEFORE_COLOUR, linewidth=1.0, linestyle=":", label=f"medians: {comparison.pre_median:.2f} before")
        hist_axes.axvline(comparison.control_median, color=AFTER_COLOUR, linewidth=1.0, linestyle=":", label=f"{comparison.control_median:.2f} control")
        hist_axes.set_xlim(low, high)
        hist_axes.set_xlabel(_metric_label(metric, completion=completion))
        hist_axes.set_ylabel("density")
        hist_axes.legend(fontsize=7.5, frameon=False, loc="upper center")

        for band, colour in (("pre_cutoff", BEFORE_COLOUR), ("control", AFTER_COLOUR)):
            members = [item for item in report.items if item.band == band]
            time_axes.scatter([_num(item.occurred_at) for item in members], [item.similarity[metric] for item in members], s=10, color=colour, alpha=0.6, edgecolors="none")
        time_axes.axhline(comparison.control_p95, color="black", linestyle="--", linewidth=1.0)
        time_axes.axvline(_at(report.cutoff), color="black", linestyle="--", linewidth=1.0)
        time_axes.annotate(
            f"training cutoff {report.cutoff.isoformat()}",
            xy=(_at(report.cutoff), 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=8,
        )
        time_axes.set_ylim(low - 0.02 * (high - low), high + 0.02 * (high - low))
        time_axes.set_ylabel(("margin" if metric is ProbeMetric.LEVENSHTEIN_MARGIN else "similarity") + " per item" if completion else f"{metric.value} per item")
        time_axes.set_xlabel("item date")
        _date_axis(time_axes)
        seen = "reproduced more closely" if completion else "likelier"
        verdict = f"older items {seen} than chance explains" if comparison.flagged else "no gap beyond chance"
        against = f" against {report.reference_model}" if report.reference_model else ""
        _titles(
            figure,
            f"{report.model}{against} on {report.dataset} ({report.split}), {probe_test_name(report.test)} ({metric.value}): {verdict}",
            f"median gap {comparison.median_gap:+.2f}; {comparison.share_above_control_p95:.0%} of pre-cutoff items above the control's 95th percentile "
            f"({chance_share(comparison.expected_share_length_matched)})\n"
            f"Mann–Whitney {p_text(comparison.p_value)}; comparing items of similar length, {p_text(comparison.length_matched_p_value)}",
            comparison.flagged,
        )
        return render(figure, image_format, dpi)


def _line_at(fit: InflationFit, private: np.ndarray) -> np.ndarray:
    """The fitted public score at each private score (as `curation.scale.inflation` fits it)."""
    if fit.link == "identity":
        return np.asarray(np.clip(fit.intercept + fit.slope * private, 0.0, 1.0))
    forward, back = (ndtri, ndtr) if fit.link == "probit" else (logit, expit)
    return np.asarray(back(fit.intercept + fit.slope * forward(private)))


def public_inflation_chart(report: PublicInflationReport, *, image_format: ImageFormat = "svg", dpi: int = 120) -> bytes:
    """Each reference model's private score against its public score, the line fitted through them,
    and the model: its observed public score, the score the line predicts for it, and the gap."""
    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=(7.5, 5.6), layout="constrained")
        axes = figure.subplots()
        assert isinstance(axes, Axes)
        private = np.array([reference.private_score for reference in report.references])
        public = np.array([reference.public_score for reference in report.references])
        low = max(0.005, min(float(private.min()), report.private_score) - 0.05)
        high = min(0.995, max(float(private.max()), report.private_score) + 0.05)
        grid = np.linspace(low, high, 200)
        axes.plot(grid, _line_at(report.fit, grid), color="#777777", linewidth=1.2, label=f"line through {len(report.references)} reference models ({report.fit.link})", zorder=1)
        axes.scatter(private, public, s=28, color=BEFORE_COLOUR, alpha=0.85, edgecolors="white", linewidths=0.5, label="reference models", zorder=2)
        for reference in report.references:
            axes.annotate(reference.model, xy=(reference.private_score, reference.public_score), xytext=(4, 3), textcoords="offset points", fontsize=7, color="#444444")
        colour = FLAG_COLOUR if report.flagged else AFTER_COLOUR
        axes.vlines(report.private_score, report.predicted_public_score, report.public_score, colors=colour, linewidth=1.4, zorder=3)
        at = ([report.private_score], [report.predicted_public_score])
        axes.scatter(*at, s=46, facecolors="white", edgecolors=colour, linewidths=1.4, label="predicted for the model", zorder=4)
        axes.scatter([report.private_score], [report.public_score], s=56, color=colour, marker="D", label=f"{report.model}: observed", zorder=5)
        axes.set_ylim(*score_limits([*public.tolist(), report.public_score, report.predicted_public_score]))
        axes.set_xlabel(f"score on the private eval {report.eval}")
        axes.set_ylabel(f"score on the public corpus {report.corpus}")
        axes.legend(fontsize=7.5, frameon=False, loc="lower right")
        verdict = "public score higher than chance explains" if report.flagged else "no gap beyond chance"
        _titles(
            figure,
            f"{report.model} on {report.corpus} against {report.eval}: {verdict}",
            f"difference {points(report.difference)} ({report.interval.level:.0%} interval {report.interval.low * 100:+.1f} to {report.interval.high * 100:+.1f}), "
            f"one-sided bootstrap {p_text(report.p_value)}",
            report.flagged,
            INFLATION_FOOTNOTE,
        )
        return render(figure, image_format, dpi)

