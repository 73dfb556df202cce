"""Equivalent embedding backends: when the embedding model id changes to another backend of the
same model (the caller tells which ids are: `embedding.backends.same_model`), the stored texts tell whether the new one's vectors are
the old ones' to rounding; if so, the stored vectors are adopted under the new id instead of
re-encoding every text (`goldenset curate --refingerprint`).

Contracts:
- a check compares, text by text, vectors the current encoder makes now with those stored under
  the other model id, for a sample of items spread evenly over the pool; the texts are rebuilt
  as curation embeds them and a text whose hash is not the stored key is left out;
- two ids are equivalent when at least one text was compared and every compared text's cosine
  is at least `EQUIVALENT_COSINE` (fp32 exports of one model agree to ~0.99999; int8 ones fall
  to ~0.99 at worst, so they are never equivalent to fp32);
- only a passed check adopts anything, in the caller's transaction: the vectors are copied under
  the new id (keys already there are kept), fingerprints name the new id, and the switch is
  recorded (`EmbeddingEquivalence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import and_, exists, func, insert, literal, update
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from curation.dedup.embeddings import Encoder, Vectors, body_text, text_hash, title_text
from curation.dedup.fingerprints import MinHashRecipe
from schemas.common import UTCDateTime
from schemas.dedup import Embedding, EmbeddingEquivalence, ItemFingerprint
from schemas.item import Item

EQUIVALENT_COSINE = 0.999
DEFAULT_SAMPLE = 256
_CHUNK = 500


@dataclass(frozen=True)
class EquivalenceCheck:
    """How the vectors `to_model_id` makes of `texts` stored texts compare with those stored under
    `from_model_id`: the lowest and the mean cosine (both -1 when nothing could be compared)."""

    from_model_id: str
    to_model_id: str
    texts: int
    min_cosine: float
    mean_cosine: float

    @property
    def equivalent(self) -> bool:
        return self.texts > 0 and self.min_cosine >= EQUIVALENT_COSINE


def stored_model_ids(session: Session) -> dict[str, int]:
    """The embedding model ids that embedded fingerprints carry, with how many each."""
    model = col(ItemFingerprint.model_id)
    query = sa_select(model, func.count()).where(col(ItemFingerprint.body_key).is_not(None), model.is_not(None)).group_by(model)
    return {str(model_id): int(count) for model_id, count in session.execute(query).all()}


def other_model_ids(session: Session, *, recipe: MinHashRecipe, model_id: str) -> dict[str, int]:
    """The model ids other than `model_id` that embedded fingerprints made with `recipe` name, and
    how many fingerprints each. Fingerprints of another recipe are not counted: they need a
    re-fingerprint whatever their vectors."""
    fingerprint_model = col(ItemFingerprint.model_id)
    query = (
        sa_select(fingerprint_model, func.count())
        .where(col(ItemFingerprint.recipe) == recipe.key, col(ItemFingerprint.body_key).is_not(None), fingerprint_model != model_id)
        .group_by(fingerprint_model)
    )
    return {str(other): int(count) for other, count in session.execute(query).all() if other is not None}


def check_equivalence(session: Session, encoder: Encoder, from_model_id: str, *, sample: int = DEFAULT_SAMPLE) -> EquivalenceCheck:
    """Compare `encoder`'s vectors with those stored under `from_model_id` for the body and title
    texts of up to `sample` items embedded under it, spread evenly over them by id; the texts are
    encoded in one call. Vectors of another dimension are never equivalent (nothing is encoded)."""
    to_model_id = encoder.model_id
    nothing = EquivalenceCheck(from_model_id, to_model_id, 0, -1.0, -1.0)
    embedded = and_(col(ItemFingerprint.model_id) == from_model_id, col(ItemFingerprint.body_key).is_not(None))
    ids = [int(row[0]) for row in session.execute(sa_select(col(ItemFingerprint.item_id)).where(embedded).order_by(col(ItemFingerprint.item_id))).all()]
    if not ids or sample <= 0:
        return nothing
    picked = sorted({ids[int(position)] for position in np.linspace(0, len(ids) - 1, num=min(sample, len(ids)))})
    texts: dict[str, str] = {}
    for start in range(0, len(picked), _CHUNK):
        query = (
            sa_select(col(Item.title), col(Item.input), col(ItemFingerprint.body_key), col(ItemFingerprint.title_key))
            .join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id))
            .where(col(Item.id).in_(picked[start : start + _CHUNK]))
        )
        for title, input_text, body_key, title_key in session.execute(query).all():
            for text, key in ((body_text(title, input_text), body_key), (title_text(title, input_text), title_key)):
                if key is not None and text_hash(text) == key:
                    texts[key] = text
    stored: dict[str, tuple[int, bytes]] = {}
    keys = list(texts)
    for start in range(0, len(keys), _CHUNK):
        vectors = sa_select(col(Embedding.text_hash), col(Embedding.dim), col(Embedding.vector)).where(
            col(Embedding.model_id) == from_model_id, col(Embedding.text_hash).in_(keys[start : start + _CHUNK])
        )
        stored.update({key: (int(dim), bytes(vector)) for key, dim, vector in session.execute(vectors).all()})
    keys = [key for key in keys if key in stored]
    if not keys or any(stored[key][0] != encoder.dim for key in keys):
        return nothing
    before = np.vstack([np.frombuffer(stored[key][1], dtype=np.float32) for key in keys])
    now = np.asarray(encoder.encode([texts[key] for key in keys]), dtype=np.float32)
    if now.shape != before.shape:
        return nothing
    cosines = np.sum(_unit(now) * _unit(before), axis=1)
    return EquivalenceCheck(from_model_id, to_model_id, len(keys), float(cosines.min()), float(cosines.mean()))


def adopt_vectors(session: Session, check: EquivalenceCheck, *, now: datetime) -> tuple[int, int]:
    """Adopt the vectors stored under `check.from_model_id` as `check.to_model_id`'s, when the
    check found them equivalent (ValueError otherwise): copy them under the new id (keys already
    stored under it are kept, the copies dated `now`), point every fingerprint of the old id at the new one, and record
    the switch. Writes in `session` only; the caller commits. Returns the vectors copied and the
    fingerprints moved."""
    if not check.equivalent:
        raise ValueError(
            f"{check.to_model_id} is not equivalent to {check.from_model_id} (min cosine {check.min_cosine:.5f} over {check.texts} texts, "
            f"{EQUIVALENT_COSINE} needed): its vectors cannot be adopted"
        )
    present = aliased(Embedding)
    already = exists().where(col(present.text_hash) == col(Embedding.text_hash), col(present.model_id) == check.to_model_id)
    # The same weights run another way read with the same tokenizer: the unreadable shares hold too.
    copies = sa_select(
        col(Embedding.text_hash), literal(check.to_model_id), col(Embedding.dim), col(Embedding.vector), literal(now, UTCDateTime()), col(Embedding.unreadable)
    ).where(col(Embedding.model_id) == check.from_model_id, ~already)
    columns = ["text_hash", "model_id", "dim", "vector", "created_at", "unreadable"]
    connection = session.connection()
    copied = connection.execute(insert(Embedding).from_select(columns, copies)).rowcount
    moved = connection.execute(update(ItemFingerprint).where(col(ItemFingerprint.model_id) == check.from_model_id).values(model_id=check.to_model_id)).rowcount
    session.add(
        EmbeddingEquivalence(
            from_model_id=check.from_model_id,
            to_model_id=check.to_model_id,
            texts=check.texts,
            min_cosine=check.min_cosine,
            mean_cosine=check.mean_cosine,
        )
    )
    session.flush()
    return int(copied or 0), int(moved or 0)


def _unit(vectors: Vectors) -> Vectors:
    unit: Vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit
