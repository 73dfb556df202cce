"""Paraphrase embeddings as dedup uses them: the encoder protocol curation is handed (the service
builds the encoder: `embedding`), the texts that stand for an item, and a cache keyed by (sha256 of
the embedded text, model id) so a text is encoded once.

The model is almost all of the per-item cost: callers batch, never encode an exact duplicate,
and never encode inside a request handler's event loop.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NotRequired, Protocol, TypedDict

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import insert
from sqlmodel import Session, col, select

from curation.clock import Clock
from curation.dedup.readability import unreadable_shares
from schemas.dedup import Embedding

Vectors = NDArray[np.float32]
BODY_CHARACTERS = 1000
TITLE_CHARACTERS = 300


class Encoder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text. `model_id` names the
    vectors it makes (two encoders with one id make the same vectors); `dim` is their width."""

    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> Vectors: ...


def body_text(title: str, input_text: str) -> str:
    """The text whose embedding stands for an item's content: title and the start of the input."""
    text = input_text if title and input_text.startswith(title) else f"{title}\n{input_text}" if title else input_text
    return text[: BODY_CHARACTERS + len(title) + 1]


def title_text(title: str, input_text: str) -> str:
    """The text whose embedding stands for what an item is about: its title, else the input's start."""
    return (title or input_text)[:TITLE_CHARACTERS]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class NewEmbedding(TypedDict):
    """A row of `Embedding` not yet stored (plain values: building ORM objects costs more than encoding's
    bookkeeping should)."""

    text_hash: str
    model_id: str
    dim: int
    vector: bytes
    created_at: datetime
    unreadable: NotRequired[float | None]


def store_embeddings(session: Session, rows: Sequence[NewEmbedding], *, skip_stored: bool = False) -> None:
    """Insert `rows` into the `embedding` table in one statement (the caller commits). Each must
    be absent (`EmbeddingCache.lookup` returns only vectors it did not find), unless
    `skip_stored`: then rows whose key is stored already, or repeated, are left out."""
    if skip_stored:
        unique = {(row["text_hash"], row["model_id"]): row for row in rows}
        for model_id in {model for _, model in unique}:
            keys = [key for key, model in unique if model == model_id]
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                query = select(Embedding.text_hash).where(Embedding.model_id == model_id, col(Embedding.text_hash).in_(chunk))
                for stored in session.exec(query):
                    unique.pop((stored, model_id), None)
        rows = list(unique.values())
    if rows:
        session.execute(insert(Embedding), [{**row, "unreadable": row.get("unreadable")} for row in rows])


@dataclass(frozen=True)
class LookedUp:
    """What `EmbeddingCache.read` found for texts, row for row: their keys, vectors and unreadable
    shares (None: not measured), and the rows of those just encoded (not stored yet)."""

    keys: list[str]
    vectors: Vectors
    fresh: list[NewEmbedding]
    unreadable: list[float | None]


class EmbeddingCache:
    """Embeddings through the database cache: `vectors(texts)` encodes only texts never seen by
    this model, in one batch, and stores them, dated by `clock`. `encoded` counts texts sent to the
    encoder."""

    def __init__(self, encoder: Encoder, *, clock: Clock) -> None:
        self.encoder = encoder
        self.clock = clock
        self.encoded = 0
        self._encoding = threading.Lock()  # one encode at a time: curation prepares a batch ahead in a thread

    def vectors(self, session: Session, texts: Sequence[str]) -> tuple[list[str], Vectors]:
        """The keys and vectors of `texts` (rows in order); missing ones are encoded and added to
        the session (the caller commits)."""
        keys, matrix, fresh = self.lookup(session, texts)
        store_embeddings(session, fresh)
        return keys, matrix

    def lookup(self, session: Session, texts: Sequence[str]) -> tuple[list[str], Vectors, list[NewEmbedding]]:
        """The keys and vectors of `texts` (rows in order), and the rows of those just encoded,
        which the caller stores with `store_embeddings` (nothing is written here: `session` may be
        a read-only one)."""
        found = self.read(session, texts)
        return found.keys, found.vectors, found.fresh

    def read(self, session: Session, texts: Sequence[str]) -> LookedUp:
        """`lookup`, with each text's unreadable share (`curation.dedup.readability`): measured
        with the model's tokenizer as a text is encoded and stored with its vector; a text stored
        before shares were measured is measured again here (tokenizing costs about 1 ms a text,
        encoding 20-50 ms). None where the encoder cannot measure it."""
        keys = [text_hash(text) for text in texts]
        wanted = set(keys)
        found: dict[str, Vectors] = {}
        shares: dict[str, float | None] = {}
        unique_keys = list(wanted)
        for start in range(0, len(unique_keys), 500):
            chunk = unique_keys[start : start + 500]
            query = select(Embedding).where(Embedding.model_id == self.encoder.model_id, col(Embedding.text_hash).in_(chunk))
            for row in session.exec(query):
                found[row.text_hash] = np.frombuffer(row.vector, dtype=np.float32)
                shares[row.text_hash] = row.unreadable
        missing: dict[str, str] = {}
        unmeasured: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found and key not in missing:
                missing[key] = text
            elif key in found and shares.get(key) is None:
                unmeasured[key] = text
        fresh: list[NewEmbedding] = []
        if missing:
            with self._encoding:
                encoded = self.encoder.encode(list(missing.values()))
                measured = unreadable_shares(self.encoder, list(missing.values()))
                self.encoded += len(missing)
            now = self.clock()
            for (key, vector), share in zip(zip(missing, encoded, strict=True), measured, strict=True):
                found[key] = vector
                shares[key] = share
                fresh.append(
                    {
                        "text_hash": key,
                        "model_id": self.encoder.model_id,
                        "dim": self.encoder.dim,
                        "vector": vector.astype(np.float32).tobytes(),
                        "created_at": now,
                        "unreadable": share,
                    }
                )
        if unmeasured:
            with self._encoding:
                shares.update(zip(unmeasured, unreadable_shares(self.encoder, list(unmeasured.values())), strict=True))
        matrix = np.vstack([found[key] for key in keys]).astype(np.float32) if keys else np.zeros((0, self.encoder.dim), dtype=np.float32)
        return LookedUp(keys, matrix, fresh, [shares.get(key) for key in keys])
