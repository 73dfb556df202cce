"""`goldenset curate --refingerprint`: after a model or recipe change, stored fingerprints are
recomputed (exact duplicates still never encoded), the index loads again and curation goes on."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import EmbeddingCache, Vectors
from curation.dedup.fingerprints import MinHashRecipe
from curation.dedup.index import MixedRecipeError, SimilarityIndex
from curation.dedup.refingerprint import refingerprint, stale_count
from schemas.common import utcnow
from schemas.dedup import ItemFingerprint
from schemas.item import Item, ItemStatus
from service.core.db import write_transaction
from service.core.settings import Settings
from service.dedup.runner import run_curation, run_refingerprint
from tests.dedup_support import MemoEncoder, hadoop_reports, ingest, planted


class AnotherModel:
    """The same vectors under another model id (as after `GOLDENSET_EMBEDDING_MODEL` changes),
    recording what it is asked to encode."""

    def __init__(self, inner: MemoEncoder) -> None:
        self.inner = inner
        self.model_id = f"{inner.model_id}+other"
        self.dim = inner.dim
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return self.inner.encode(texts)


def test_a_model_change_is_refingerprinted_and_exact_copies_stay_unencoded(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    reports = hadoop_reports(60)
    exact = planted(reports)["exact"]
    ingest(engine, "hadoop", [*reports[:5], next(r for r in reports if r["id"] == exact["of"]), exact])
    first = run_curation(engine, settings, encoder=encoder)
    assert first.duplicate == 1 and first.by_stage.get("exact") == 1

    other = AnotherModel(encoder)
    with Session(engine) as session:
        assert stale_count(session, recipe=MinHashRecipe(), model_id=other.model_id) == 7
        with pytest.raises(MixedRecipeError, match="--refingerprint"):
            Deduplicator(clock=utcnow, encoder=other).load(session)

    summary = run_refingerprint(engine, settings, encoder=other)
    assert summary.items == 7
    assert summary.encoded == len(other.texts) == 12  # body and title of the 6 originals; the copy takes its original's
    assert not any("bytesPendingUpload=5531" in text for text in other.texts)

    with Session(engine) as session:
        assert stale_count(session, recipe=MinHashRecipe(), model_id=other.model_id) == 0
        copy = session.exec(select(Item).where(Item.external_id == "PLANT-EXACT")).one()
        fingerprints = {f.item_id: f for f in session.exec(select(ItemFingerprint))}
        assert copy.duplicate_of is not None
        assert fingerprints[copy.id or 0].body_key == fingerprints[copy.duplicate_of].body_key
        assert {f.model_id for f in fingerprints.values()} == {other.model_id}
    assert run_refingerprint(engine, settings, encoder=other).items == 0

    # Curation goes on under the new model, with the old decisions kept.
    ingest(engine, "hadoop", [planted(reports)["near"], next(r for r in reports if r["id"] == planted(reports)["near"]["of"])])
    again = run_curation(engine, settings, encoder=other)
    assert again.decided == 2 and again.duplicate == 1
    with Session(engine) as session:
        assert session.exec(select(Item).where(Item.external_id == "PLANT-EXACT")).one().status == ItemStatus.DUPLICATE.value


def test_a_recipe_change_is_refingerprinted_without_encoding(engine: Engine, settings: Settings, encoder: MemoEncoder) -> None:
    ingest(engine, "hadoop", hadoop_reports(4))
    run_curation(engine, settings, encoder=encoder)
    smaller = MinHashRecipe(num_perm=64, shingle_words=2)
    cache = EmbeddingCache(encoder, clock=utcnow)
    summary = refingerprint(lambda: Session(engine), lambda: write_transaction(engine), recipe=smaller, embeddings=cache, batch_size=3)
    assert (summary.items, summary.encoded) == (4, 0)
    with Session(engine) as session:
        index = SimilarityIndex.load(session, recipe=smaller, model_id=encoder.model_id, dim=encoder.dim, lsh_threshold=0.6)
        assert len(index) == 4
        with pytest.raises(MixedRecipeError):
            Deduplicator(clock=utcnow, encoder=encoder).load(session)
