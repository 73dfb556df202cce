"""Text normalisation for fingerprints. Stored text stays exactly as ingested; only hashes see this.

`NORMALISATION_VERSION` names the recipe; it is stored with every fingerprint, so a changed recipe
is detected instead of silently mixing incomparable hashes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

NORMALISATION_VERSION = "n1"
_WHITESPACE = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Unicode NFKC, case-folded, whitespace collapsed to single spaces, trimmed."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def item_text(title: str, input_text: str, reference: str) -> str:
    """The text an item is compared by: title, input and reference, one per line."""
    return "\n".join(part for part in (title, input_text, reference) if part)


def content_hash(title: str, input_text: str, reference: str) -> str:
    """sha256 (hex) of the normalised item text."""
    return hashlib.sha256(normalise_text(item_text(title, input_text, reference)).encode("utf-8")).hexdigest()
