"""Item statuses in the web UI's stylesheet: each status has a colour pair of its own, its text
readable on its background (WCAG AA: a contrast of at least 4.5:1), and `unique` (waiting for
review) never wears the green of `approved`."""

from __future__ import annotations

import re

from schemas.item import ItemStatus
from service.ui.pages import STATIC

AA_TEXT = 4.5
RULE = re.compile(r"^\.state-(?P<status>[a-z_]+) \{ background: (?P<background>#[0-9a-f]{6}); color: (?P<colour>#[0-9a-f]{6}); \}$", re.MULTILINE)


def _luminance(colour: str) -> float:
    """Relative luminance of an sRGB colour written #rrggbb (WCAG 2.x)."""
    channels = [int(colour[index : index + 2], 16) / 255 for index in (1, 3, 5)]
    linear = [value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4 for value in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    lighter, darker = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def _colours() -> dict[str, tuple[str, str]]:
    css = (STATIC / "app.css").read_text(encoding="utf-8")
    return {match["status"]: (match["background"], match["colour"]) for match in RULE.finditer(css)}


def test_the_contrast_of_known_pairs() -> None:
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48


def test_every_item_status_has_a_readable_colour_pair_of_its_own() -> None:
    colours = _colours()
    statuses = [status.value for status in ItemStatus]
    assert sorted(set(statuses) - set(colours)) == []
    pairs = [colours[status] for status in statuses]
    assert len(set(pairs)) == len(pairs), "two statuses share a colour pair"
    assert len({background for background, _ in pairs}) == len(pairs), "two statuses share a background"
    unreadable = {status: round(contrast(*colours[status]), 2) for status in statuses if contrast(*colours[status]) < AA_TEXT}
    assert unreadable == {}


def test_waiting_for_review_is_not_the_green_of_approved() -> None:
    colours = _colours()
    assert colours["unique"] != colours["approved"]
    background = colours["unique"][0]
    red, green, blue = (int(background[index : index + 2], 16) for index in (1, 3, 5))
    assert red >= green > blue, f"unique's background {background} is not amber"
