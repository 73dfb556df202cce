"""Opaque page cursors: the position after a page's last row, handed to the client as a short
URL-safe string and read back when it asks for the next page.

A cursor is the base64url (unpadded) text of a JSON array: the kind of list it pages through,
then the values of its position. Reading one checks the kind and every value's type, so a cursor
from another list, a truncated one or a forged one is a 422 problem telling the client to start
again, never a server error.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from service.core.problems import ProblemError

MAX_CURSOR_ID = 2**63 - 1


def _invalid() -> ProblemError:
    return ProblemError(422, "Invalid cursor", "the cursor is not one this API returned; start again without it")


def encode_cursor(kind: str, *position: str | int) -> str:
    """The cursor of `position` in the list `kind`."""
    raw = json.dumps([kind, *position], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _position(cursor: str, kind: str, *shape: type) -> list[object]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError) as exc:  # bad base64, bad UTF-8 or bad JSON
        raise _invalid() from exc
    if not isinstance(decoded, list) or len(decoded) != len(shape) + 1 or decoded[0] != kind:
        raise _invalid()
    position = decoded[1:]
    if any(type(value) is not expected for value, expected in zip(position, shape, strict=True)):
        raise _invalid()
    return position


def _id(value: object) -> int:
    assert isinstance(value, int)
    if not 0 <= value <= MAX_CURSOR_ID:
        raise _invalid()
    return value


def decode_id_cursor(cursor: str, kind: str) -> int:
    """The row id a cursor of `kind` made by `encode_cursor(kind, id)` holds; 422 otherwise."""
    (value,) = _position(cursor, kind, int)
    return _id(value)


def decode_time_id_cursor(cursor: str, kind: str) -> tuple[datetime, int]:
    """The (tz-aware time, row id) a cursor of `kind` made by `encode_cursor(kind, time.isoformat(), id)`
    holds; 422 otherwise."""
    text, value = _position(cursor, kind, str, int)
    assert isinstance(text, str)
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise _invalid() from exc
    if at.tzinfo is None:
        raise _invalid()
    return at, _id(value)
