"""The facts a dedup decision reads from the database about the few items it weighs: their texts,
whether they are guarded (exposed or released), the pairs people ruled apart, and the lines each
source shares across its items. Read on demand for the neighbours of a batch and kept for it, so
the index holds no text.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence

import numpy as np
from sqlalchemy import func
from sqlmodel import Session, col, select

from curation.dedup.boilerplate import SAMPLE, CommonLines, common_lines
from curation.dedup.embeddings import EmbeddingCache, Vectors, body_text, text_hash, title_text
from curation.dedup.readability import Unreadable, unreadable_shares
from curation.dedup.rule_evidence import ItemText
from schemas.dedup import DedupOverride, Embedding, OverrideKind
from schemas.evals import EvalItem
from schemas.item import Item

# A source's common lines are counted again once it has grown by this share since last counted.
RECOUNT_GROWTH = 0.1
MEMO_LIMIT = 20_000


class SourceMemory:
    """What decisions keep between batches, shared by the threads of one `Deduplicator`: each
    source's common lines (`curation.dedup.boilerplate`) and the vectors of texts encoded for a
    comparison (the part of two texts left once their common lines are out; not stored)."""

    def __init__(self, embeddings: EmbeddingCache) -> None:
        self.embeddings = embeddings
        self._lock = threading.Lock()
        self._lines: dict[int, tuple[int, CommonLines]] = {}
        self._vectors: dict[str, Vectors] = {}

    def common_lines(self, session: Session, source_id: int) -> CommonLines:
        count = session.exec(select(func.count()).select_from(Item).where(Item.source_id == source_id)).one()
        with self._lock:
            known = self._lines.get(source_id)
        if known is not None and known[0] <= count <= known[0] * (1 + RECOUNT_GROWTH):
            return known[1]
        query = select(Item.input).where(Item.source_id == source_id).order_by(col(Item.id).desc()).limit(SAMPLE)
        lines = common_lines(session.exec(query))
        with self._lock:
            self._lines[source_id] = (count, lines)
        return lines

    def vectors(self, session: Session, texts: Sequence[str]) -> Vectors:
        """Vectors of `texts` (rows in order): from this memory, the database cache, or encoded now."""
        keys = [text_hash(text) for text in texts]
        with self._lock:
            missing = [text for key, text in zip(keys, texts, strict=True) if key not in self._vectors]
        if missing:
            found_keys, matrix, _ = self.embeddings.lookup(session, missing)
            with self._lock:
                if len(self._vectors) > MEMO_LIMIT:
                    self._vectors.clear()
                self._vectors.update(zip(found_keys, matrix, strict=True))
        with self._lock:
            return np.vstack([self._vectors[key] for key in keys]).astype(np.float32)


class StoredFacts:
    """`curation.dedup.rules.Facts` read through `session` (kept for the life of this object:
    make one per batch, so what it read is current for the batch). Without a `memory`, no source
    has common lines and `embed` is unavailable (texts are then compared whole)."""

    def __init__(self, session: Session, memory: SourceMemory | None = None) -> None:
        self.session = session
        self.memory = memory
        self._texts: dict[int, ItemText] = {}
        self._guarded: dict[int, bool] = {}
        self._apart: dict[int, set[int]] | None = None
        self._joined: dict[int, int] | None = None
        self._lines: dict[int, CommonLines] = {}

    def texts(self, item_ids: Collection[int]) -> dict[int, ItemText]:
        missing = sorted(set(item_ids) - set(self._texts))
        if missing:
            rows = self.session.exec(select(Item.id, Item.source_id, Item.title, Item.input).where(col(Item.id).in_(missing))).all()
            self._texts.update((item_id, ItemText(source_id, title, input_text)) for item_id, source_id, title, input_text in rows if item_id is not None)
        return {item_id: self._texts[item_id] for item_id in item_ids if item_id in self._texts}

    def common_lines(self, source_id: int) -> CommonLines:
        if self.memory is None:
            return CommonLines()
        if source_id not in self._lines:
            self._lines[source_id] = self.memory.common_lines(self.session, source_id)
        return self._lines[source_id]

    def embed(self, texts: Sequence[str]) -> Vectors | None:
        return None if self.memory is None else self.memory.vectors(self.session, texts)

    def unreadable(self, keys: Mapping[int, tuple[str | None, str | None]]) -> dict[int, Unreadable]:
        """The shares of items' body and title texts (`keys`: each item's body and title text
        hashes) stored with their vectors under the encoder's model; a text stored before shares
        were measured is measured now from the item's text. Without a `memory`, nothing is measured."""
        if self.memory is None or not keys:
            return {}
        encoder = self.memory.embeddings.encoder
        hashes = sorted({key for pair in keys.values() for key in pair if key})
        stored: dict[str, float] = {}
        for start in range(0, len(hashes), 500):
            query = select(Embedding.text_hash, Embedding.unreadable).where(
                Embedding.model_id == encoder.model_id, col(Embedding.text_hash).in_(hashes[start : start + 500]), col(Embedding.unreadable).is_not(None)
            )
            stored.update((key, float(share)) for key, share in self.session.exec(query).all() if share is not None)
        found = {item_id: Unreadable(stored.get(body or ""), stored.get(title or "")) for item_id, (body, title) in keys.items()}
        unmeasured = [item_id for item_id, shares in found.items() if shares.body is None or shares.title is None]
        texts = self.texts(unmeasured) if unmeasured else {}
        if texts:
            ordered = list(texts.items())
            measured = unreadable_shares(encoder, [body_text(t.title, t.input) for _, t in ordered] + [title_text(t.title, t.input) for _, t in ordered])
            for position, (item_id, _) in enumerate(ordered):
                known = found[item_id]
                body_share = known.body if known.body is not None else measured[position]
                title_share = known.title if known.title is not None else measured[len(ordered) + position]
                found[item_id] = Unreadable(body_share, title_share)
        return found

    def guarded(self, item_ids: Collection[int]) -> set[int]:
        missing = sorted(set(item_ids) - set(self._guarded))
        if missing:
            exposed = set(self.session.exec(select(Item.id).where(col(Item.id).in_(missing), col(Item.exposed_at).is_not(None))).all())
            released = set(self.session.exec(select(EvalItem.item_id).where(col(EvalItem.item_id).in_(missing))).all())
            self._guarded.update((item_id, item_id in exposed or item_id in released) for item_id in missing)
        return {item_id for item_id in item_ids if self._guarded.get(item_id)}

    def kept_apart(self, item_id: int) -> set[int]:
        return self._rulings()[0].get(item_id, set())

    def ruled_duplicate_of(self, item_id: int) -> int | None:
        """The item a person ruled `item_id` a duplicate of, if that ruling is in force."""
        return self._rulings()[1].get(item_id)

    def _rulings(self) -> tuple[dict[int, set[int]], dict[int, int]]:
        """Pairs ruled apart (both ways) and items ruled duplicates, the newest ruling of a pair in force."""
        if self._apart is None or self._joined is None:
            newest: dict[frozenset[int], tuple[int, int, int, str]] = {}
            query = select(DedupOverride.id, DedupOverride.item_id, DedupOverride.other_id, DedupOverride.kind).order_by(col(DedupOverride.id))
            for ruling, item, other, kind in self.session.exec(query).all():
                assert ruling is not None
                newest[frozenset((item, other))] = (ruling, item, other, kind)
            self._apart, self._joined = {}, {}
            # In the order they were made, so that the newest "duplicate of" ruling of an item wins.
            for _, item, other, kind in sorted(newest.values()):
                if kind == OverrideKind.NOT_DUPLICATE.value:
                    self._apart.setdefault(item, set()).add(other)
                    self._apart.setdefault(other, set()).add(item)
                elif kind == OverrideKind.DUPLICATE_OF.value:
                    self._joined[item] = other
        return self._apart, self._joined
