"""What an embedding model cannot read, as dedup reads it: per text, the share of its characters
that the model's own tokenizer maps to the unknown token or can only spell out piece by piece,
measured by the encoder the caller hands in (the service's: `embedding.readability`).

Two unrelated texts that the model cannot read (Chinese titles under an English vocabulary,
Russian words spelled out a letter at a time) embed close together: an embedding match between
them is no evidence, and the rules set it aside above a share (`curation.dedup.rules`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class MeasuresUnreadable(Protocol):
    """An encoder that can say, per text, the share of it its model cannot read (0 to 1; None
    where it cannot tell)."""

    def unreadable(self, texts: Sequence[str]) -> Sequence[float | None]: ...


def unreadable_shares(encoder: object, texts: Sequence[str]) -> list[float | None]:
    """The unreadable share of each text by `encoder`'s model, or None for each when the encoder
    cannot measure it (a test double, an embedding server without a tokenizer configured)."""
    if isinstance(encoder, MeasuresUnreadable):
        return list(encoder.unreadable(texts))
    return [None] * len(texts)


@dataclass(frozen=True)
class Unreadable:
    """The unreadable shares of an item's two embedded texts (None: not measured)."""

    body: float | None = None
    title: float | None = None

    def beyond(self, limit: float) -> dict[str, float]:
        """The fields whose share is above `limit`, by name, rounded for a decision's details."""
        shares = {"body": self.body, "title": self.title}
        return {name: round(share, 2) for name, share in shares.items() if share is not None and share > limit}
