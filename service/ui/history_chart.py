"""A model's scores over an eval's releases as a small chart: one point per scored run at its
release number, with a bar for its interval, laid out here and drawn as inline SVG by the
template `_history_chart.html` (no script, no image request).

The score axis always spans [0, 1], the range every score lies in, so two charts read alike.
Runs of one release sit side by side around its number, in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 14, 40
"""The plot's margins: room for the score labels on the left and the release labels below."""
SPREAD = 0.6
"""The share of one release's width that the runs of that release spread over."""
MAX_RELEASE_LABELS = 12
SCORE_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class HistoryPoint:
    """One run to draw: its release, its mean and interval (None: no interval), its split and a
    label saying what it is."""

    release: int
    mean: float
    low: float | None
    high: float | None
    split: str
    label: str


@dataclass(frozen=True)
class PlacedPoint:
    """A point in the chart's pixels: `x`, `y` the mean; `y_low`, `y_high` its interval's ends."""

    x: float
    y: float
    y_low: float | None
    y_high: float | None
    split: str
    label: str


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class HistoryChart:
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    points: list[PlacedPoint]
    release_ticks: list[Tick]
    score_ticks: list[Tick]


def _y(score: float) -> float:
    return TOP + (1.0 - min(1.0, max(0.0, score))) * (HEIGHT - TOP - BOTTOM)


def history_chart(points: Sequence[HistoryPoint]) -> HistoryChart | None:
    """The chart of `points`, or None when there is nothing to draw. Releases run from the
    smallest to the largest number given, each one release wide; at most `MAX_RELEASE_LABELS`
    release numbers are labelled (evenly, the first and last always)."""
    if not points:
        return None
    first, last = min(point.release for point in points), max(point.release for point in points)
    span = (WIDTH - LEFT - RIGHT) / (last - first + 1)

    def x_of(release: float) -> float:
        return LEFT + (release - first + 0.5) * span

    by_release: dict[int, list[HistoryPoint]] = {}
    for point in points:
        by_release.setdefault(point.release, []).append(point)
    placed = []
    for release, group in sorted(by_release.items()):
        step = SPREAD / len(group)
        for index, point in enumerate(group):
            x = x_of(release + (index - (len(group) - 1) / 2) * step)
            low = _y(point.low) if point.low is not None else None
            high = _y(point.high) if point.high is not None else None
            placed.append(PlacedPoint(round(x, 2), round(_y(point.mean), 2), _round(low), _round(high), point.split, point.label))
    every = max(1, -(-(last - first + 1) // MAX_RELEASE_LABELS))
    labelled = [number for number in range(first, last + 1) if (number - first) % every == 0 or number == last]
    release_ticks = [Tick(round(x_of(number), 2), str(number)) for number in labelled]
    score_ticks = [Tick(round(_y(score), 2), f"{score:.2f}") for score in SCORE_TICKS]
    return HistoryChart(WIDTH, HEIGHT, LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM, placed, release_ticks, score_ticks)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
