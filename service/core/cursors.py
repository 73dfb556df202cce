"""Opaque page cursors: the position after a page's last row, handed to the client as a URL-safe
string and read back when it asks for the next page.

A cursor is a JSON array (the kind of list it pages through, then the values of its position)
encrypted and authenticated with the server's secret key (`service.core.crypto`): a client can
neither read a position (the date of a row it was not shown) nor make one up. Reading a cursor
checks the kind and every value's type and range, so a cursor from another list, a truncated,
altered or forged one is a 422 problem telling the client to start again, never a server error.
"""

from __future__ import annotations

import json
from datetime import datetime

from schemas.common import MAX_ROW_ID
from service.core.crypto import decrypt, encrypt
from service.core.problems import ProblemError


def _invalid() -> ProblemError:
    return ProblemError(422, "Invalid cursor", "the cursor is not one this API returned; start again without it", reason="invalid_cursor")


def encode_cursor(kind: str, *position: str | int, secret_key: str) -> str:
    """The cursor of `position` in the list `kind`."""
    return encrypt(json.dumps([kind, *position], separators=(",", ":")), secret_key=secret_key)


def _position(cursor: str, kind: str, *shape: type, secret_key: str) -> list[object]:
    try:
        decoded = json.loads(decrypt(cursor, secret_key=secret_key))
    except ValueError as exc:  # not ours, altered, or not JSON
        raise _invalid() from exc
    if not isinstance(decoded, list) or len(decoded) != len(shape) + 1 or decoded[0] != kind:
        raise _invalid()
    position = decoded[1:]
    if any(type(value) is not expected for value, expected in zip(position, shape, strict=True)):
        raise _invalid()
    return position


def _id(value: object) -> int:
    assert isinstance(value, int)
    if not 0 <= value <= MAX_ROW_ID:
        raise _invalid()
    return value


def decode_id_cursor(cursor: str, kind: str, *, secret_key: str) -> int:
    """The row id a cursor of `kind` made by `encode_cursor(kind, id)` holds; 422 otherwise."""
    (value,) = _position(cursor, kind, int, secret_key=secret_key)
    return _id(value)


def decode_time_id_cursor(cursor: str, kind: str, *, secret_key: str) -> tuple[datetime, int]:
    """The (tz-aware time, row id) a cursor of `kind` made by `encode_cursor(kind, time.isoformat(), id)`
    holds; 422 otherwise."""
    text, value = _position(cursor, kind, str, int, secret_key=secret_key)
    assert isinstance(text, str)
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise _invalid() from exc
    if at.tzinfo is None:
        raise _invalid()
    return at, _id(value)
