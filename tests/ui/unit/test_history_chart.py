"""The layout of a model's history chart (`service.ui.history_chart`): scores on a fixed [0, 1]
axis, one release wide per release number, runs of one release side by side, and intervals drawn
only where there is one."""

from __future__ import annotations

import pytest

from service.ui.history_chart import BOTTOM, HEIGHT, LEFT, MAX_RELEASE_LABELS, RIGHT, TOP, WIDTH, HistoryPoint, history_chart


def _point(release: int, mean: float, low: float | None = None, high: float | None = None, split: str = "dev") -> HistoryPoint:
    return HistoryPoint(release, mean, low, high, split, f"release {release}")


def test_nothing_to_draw_is_no_chart() -> None:
    assert history_chart([]) is None


def test_scores_map_onto_a_fixed_axis_and_releases_onto_equal_widths() -> None:
    chart = history_chart([_point(1, 0.0, 0.0, 0.5), _point(3, 1.0), _point(2, 0.5, 0.25, 0.75, "sealed")])
    assert chart is not None
    bottom, top = HEIGHT - BOTTOM, TOP
    by_label = {point.label: point for point in chart.points}
    first, second, third = by_label["release 1"], by_label["release 2"], by_label["release 3"]
    assert (first.y, third.y) == (bottom, top)
    assert second.y == pytest.approx((bottom + top) / 2) and second.split == "sealed"
    assert (second.y_low, second.y_high) == pytest.approx((bottom - (bottom - top) / 4, top + (bottom - top) / 4))
    assert third.y_low is None and third.y_high is None
    width = (WIDTH - LEFT - RIGHT) / 3
    assert [first.x, second.x, third.x] == pytest.approx([LEFT + width / 2, LEFT + 1.5 * width, LEFT + 2.5 * width], abs=0.01)
    assert [tick.label for tick in chart.release_ticks] == ["1", "2", "3"]
    assert [tick.label for tick in chart.score_ticks] == ["0.00", "0.25", "0.50", "0.75", "1.00"]


def test_runs_of_one_release_sit_side_by_side_around_it() -> None:
    chart = history_chart([_point(4, 0.2), _point(4, 0.4), _point(4, 0.6)])
    assert chart is not None
    xs = [point.x for point in chart.points]
    centre = LEFT + (WIDTH - LEFT - RIGHT) / 2
    assert xs == sorted(xs) and xs[1] == pytest.approx(centre, abs=0.01)
    assert xs[0] - LEFT > 0 and WIDTH - RIGHT - xs[2] > 0


def test_many_releases_get_a_readable_number_of_labels_the_last_always_among_them() -> None:
    chart = history_chart([_point(number, 0.5) for number in range(1, 41)])
    assert chart is not None
    labels = [tick.label for tick in chart.release_ticks]
    assert len(labels) <= MAX_RELEASE_LABELS + 1 and labels[0] == "1" and labels[-1] == "40"
