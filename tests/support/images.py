"""Checks that chart bytes are real images: SVG that parses as XML with an `svg` root, PNG with a
valid signature and header that decodes to pixels."""

from __future__ import annotations

import io
import struct
import xml.etree.ElementTree as ET

from matplotlib import image as mpimg


def assert_svg(data: bytes) -> ET.Element:
    """Parse `data` as SVG and return its root; fails unless it is well-formed SVG with drawing in it."""
    root = ET.fromstring(data)  # noqa: S314 - our own matplotlib output, not untrusted XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    assert len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 10  # axes, lines and markers are drawn
    return root


def assert_png(data: bytes) -> tuple[int, int]:
    """Check the PNG signature and header, decode it, and return (width, height)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    pixels = mpimg.imread(io.BytesIO(data), format="png")
    assert pixels.shape[:2] == (height, width)
    assert float(pixels.std()) > 0.01  # not a blank canvas
    return width, height
