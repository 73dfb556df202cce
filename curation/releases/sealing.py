"""The sealed slice: which items of an eval are kept for final decisions only.

An item is sealed when `HMAC-SHA256(seal key, str(item id))`, its first 8 bytes read as a
big-endian integer divided by 2**64 (a number in [0, 1)), is below the eval's sealed fraction.
The key is secret and per eval, so nobody can tell from an item id whether it is sealed, and the
answer never changes: an item is sealed in every release of the eval or in none.
"""

from __future__ import annotations

import hashlib
import hmac

SEAL_KEY_BYTES = 32
_SCALE = float(2**64)


def seal_position(seal_key: bytes, item_id: int) -> float:
    """Where the item falls in [0, 1) under `seal_key` (uniform over items, fixed per key)."""
    if len(seal_key) < 16:
        raise ValueError("a seal key must be at least 16 bytes; generate one with secrets.token_bytes(32)")
    digest = hmac.new(seal_key, str(item_id).encode("ascii"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def is_sealed(seal_key: bytes, item_id: int, fraction: float) -> bool:
    """True when the item belongs to the sealed slice of an eval sealing `fraction` of its items."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the sealed fraction must be between 0 and 1, not {fraction}")
    return seal_position(seal_key, item_id) < fraction
