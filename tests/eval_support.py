"""Shared by the eval tests: a cheap deterministic encoder (hashed word counts, projected) so that
real curation runs over thousands of items in seconds, and helpers that ingest and curate the
CISA KEV catalogue, or a slice of it."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Vectors
from curation.dedup.rules import DedupConfig
from schemas.common import utcnow
from schemas.item import Item
from service.core.db import write_session
from tests.dedup_support import KEV_MAPPING, ingest

REPO_ROOT = Path(__file__).resolve().parent.parent
KEV_FILE = REPO_ROOT.parent / "shared" / "data" / "cisa_kev" / "known_exploited_vulnerabilities.json"
_WORD = re.compile(r"[a-z0-9]+")


class HashingEncoder:
    """Bag of words hashed into 256 buckets, L2-normalised: an `Encoder` with no model, so tests of
    rotation and releases curate real data through the real dedup code quickly."""

    model_id = "test-hashing-256"
    dim = 256

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                bucket = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
                vectors[row, bucket % self.dim] += 1.0 if bucket & 0x80000000 else -1.0
            norm = float(np.linalg.norm(vectors[row]))
            if norm:
                vectors[row] /= norm
        return vectors


def kev_records(*, since: str | None = None, until: str | None = None) -> list[dict[str, Any]]:
    """CISA KEV records (dateAdded in [since, until) when given), in catalogue order."""
    records: list[dict[str, Any]] = json.loads(KEV_FILE.read_text(encoding="utf-8"))["vulnerabilities"]
    return [record for record in records if (since is None or record["dateAdded"] >= since) and (until is None or record["dateAdded"] < until)]


def ingest_and_curate(engine: Engine, source: str, records: list[dict[str, Any]]) -> None:
    """Ingest KEV records into `source` (one JSON object a record) and curate them with the hashing encoder."""
    from ingest.mapping import load_mapping

    mapping = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    summary = ingest(engine, source, records, mapping)
    assert summary.rejected == 0, summary.errors[:3]
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=DedupConfig()).curate(session)
        session.commit()


def item_ids_by_external_id(engine: Engine) -> dict[str, int]:
    """Every stored item's id by its external id."""
    with Session(engine) as session:
        return {item.external_id: item.id for item in session.exec(select(Item)) if item.id is not None}


def distinct_words(number: int, count: int = 12) -> str:
    """`count` made-up words, letters only, that differ from number to number: test records that
    differ only in numbers are copies once dedup masks numbers, so near-linked into one group (and
    so on one side of the dev/sealed split)."""
    letters = "".join(chr(ord("a") + int(char, 16)) for char in hashlib.sha256(str(number).encode()).hexdigest())
    return " ".join(letters[start : start + 5] for start in range(0, 5 * count, 5))
