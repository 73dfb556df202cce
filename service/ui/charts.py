"""Chart images on pages: the formats a page's chart comes in and the answer that carries one."""

from __future__ import annotations

from typing import Literal

from fastapi import Response

from service.ui.pages import UiRefused

ChartFormat = Literal["svg", "png"]
MEDIA_TYPES: dict[str, str] = {"svg": "image/svg+xml", "png": "image/png"}


def chart_format(value: str) -> ChartFormat:
    """The format named by a chart address's suffix; 404 for any but `svg` and `png`."""
    if value not in MEDIA_TYPES:
        raise UiRefused(404, "No such chart", f"charts come as .svg or .png, not .{value}")
    return value  # type: ignore[return-value]


def chart_answer(image: bytes, image_format: ChartFormat, filename: str) -> Response:
    """The image, shown inline, named `filename.<format>`, never cached (it shows live results)."""
    return Response(image, media_type=MEDIA_TYPES[image_format], headers={"Cache-Control": "no-store", "Content-Disposition": f'inline; filename="{filename}.{image_format}"'})
