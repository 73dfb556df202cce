"""Release content: the canonical JSON of a released item, its digest, and the Merkle root of a
split.

Canonical JSON: `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
encoded as UTF-8; a content digest is the sha256 of those bytes, in hex. A sealed item's digest
is keyed instead (`keyed_digest`): HMAC-SHA256 of the same bytes under a key derived from the
eval's seal key, so that someone who knows or guesses a sealed item's exact text, and holds the
manifest, cannot confirm the guess without the key. Releases written before keyed digests used
the plain sha256 for sealed items too; each release records which (`sealed_digest`).

Merkle root (RFC 6962's Merkle Tree Hash, so inclusion proofs can be added without changing any
root): the leaves are the split's items sorted by item id, each leaf's data the ASCII bytes of
`"<item id>:<content digest>"`. With `H` = sha256, the root of no leaves is `H(b"")`, of one leaf
`d` is `H(b"\\x00" + d)`, and of n > 1 leaves is `H(b"\\x01" + root(first k) + root(rest))` where
k is the largest power of two below n. Roots are reported in hex.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

CONTENT_FIELDS = ("id", "source", "external_id", "occurred_at", "title", "input", "reference", "metadata", "tags")


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON text (sorted keys, no spaces, non-ASCII kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_digest(canonical: str) -> str:
    """sha256 (hex) of canonical JSON text encoded as UTF-8."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


SEALED_DIGEST_CONTEXT = b"goldenset sealed content digest v1"
"""Derives the digest key from a seal key, so the key that decides membership never keys anything else directly."""


def keyed_digest(canonical: str, *, seal_key: bytes) -> str:
    """HMAC-SHA256 (hex) of canonical JSON text encoded as UTF-8, under the digest key derived
    from `seal_key` (the eval's seal key, at least 16 bytes)."""
    if len(seal_key) < 16:
        raise ValueError("a seal key must be at least 16 bytes")
    digest_key = hmac.new(seal_key, SEALED_DIGEST_CONTEXT, hashlib.sha256).digest()
    return hmac.new(digest_key, canonical.encode("utf-8"), hashlib.sha256).hexdigest()


def released_content(
    *, item_id: int, source: str, external_id: str, occurred_at: datetime, title: str, input: str, reference: str, metadata: dict[str, Any], tags: list[str]
) -> dict[str, Any]:
    """The content of an item as a release freezes it (dates as ISO 8601 in UTC)."""
    if occurred_at.tzinfo is None:
        raise ValueError("occurred_at must be tz-aware")
    return {
        "id": item_id,
        "source": source,
        "external_id": external_id,
        "occurred_at": occurred_at.isoformat(),
        "title": title,
        "input": input,
        "reference": reference,
        "metadata": metadata,
        "tags": list(tags),
    }


def _leaf_hash(item_id: int, digest: str) -> bytes:
    return hashlib.sha256(b"\x00" + f"{item_id}:{digest}".encode("ascii")).digest()


def _tree_hash(leaves: Sequence[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _tree_hash(leaves[:split]) + _tree_hash(leaves[split:])).digest()


def merkle_root(entries: Iterable[tuple[int, str]]) -> str:
    """The Merkle root (hex) of `(item_id, content_digest)` pairs, in any order (they are sorted
    by item id). Item ids must be unique."""
    ordered = sorted(entries)
    ids = [item_id for item_id, _ in ordered]
    if len(set(ids)) != len(ids):
        raise ValueError("a split lists an item twice")
    if not ordered:
        return hashlib.sha256(b"").hexdigest()
    return _tree_hash([_leaf_hash(item_id, digest) for item_id, digest in ordered]).hex()
