"""Re-fingerprinting: bring stored fingerprints to the current recipe and embedding model.

After an upgrade changes the normalisation or MinHash recipe, or `GOLDENSET_EMBEDDING_MODEL`
names another model, the stored sketches and vectors can no longer share an index with new ones
(`SimilarityIndex.load` refuses them). This recomputes them for every decided item, in batches:
sketches are cheap; texts are encoded only when no vector of theirs is cached under the model,
and an exact duplicate takes its original's vectors, as at curation. Decisions are kept as they
are: they were made, and explained, under the recipe stored with them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import rehash
from curation.dedup.embeddings import EmbeddingCache, body_text, store_embeddings, title_text
from curation.dedup.fingerprints import MinHashRecipe, sketch_texts, to_bytes
from curation.dedup.index import made_differently
from ingest.normalisation import dedup_text
from schemas.dedup import ItemFingerprint
from schemas.item import Item


@dataclass
class RefingerprintSummary:
    items: int = 0
    encoded: int = 0


def stale_count(session: Session, *, recipe: MinHashRecipe, model_id: str) -> int:
    """How many stored fingerprints were made with another recipe or model."""
    return int(session.exec(select(func.count()).select_from(ItemFingerprint).where(made_differently(recipe, model_id))).one())


def refingerprint(
    read: Callable[[], AbstractContextManager[Session]],
    write: Callable[[], AbstractContextManager[Session]],
    *,
    recipe: MinHashRecipe,
    embeddings: EmbeddingCache,
    batch_size: int = 256,
    on_batch: Callable[[RefingerprintSummary], None] | None = None,
) -> RefingerprintSummary:
    """Recompute every stale fingerprint under `recipe` and `embeddings.encoder`, computing in
    `read()` sessions and writing each batch in a `write()` session whose context the caller makes
    commit when it closes (`service.core.db.write_transaction`), so a run that stops part way keeps
    what it finished and the next run goes on from there. Items that kept their originals' vectors
    (exact duplicates) are done after every original."""
    model_id = embeddings.encoder.model_id
    summary = RefingerprintSummary()
    encoded_before = embeddings.encoded
    while True:
        with read() as reader:
            # Originals first: an exact duplicate copies its original's fresh keys.
            query = (
                select(Item, ItemFingerprint)
                .join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id))
                .where(made_differently(recipe, model_id))
                .order_by(col(Item.duplicate_of).is_not(None), col(Item.id))
                .limit(batch_size)
            )
            rows = list(reader.exec(query).all())
            if not rows:
                break
            items = [item for item, _ in rows]
            for item in items:
                rehash(item)
            sketches = sketch_texts((dedup_text(item.title, item.input) for item in items), recipe)
            originals = _original_keys(reader, items, model_id)
            in_batch = {item.id: item for item in items}
            # Exact copies of an original in this same batch take its keys once they are computed.
            copies_here = {
                item.id: item.duplicate_of
                for item, fingerprint in rows
                if fingerprint.body_key is not None
                and item.id not in originals
                and item.duplicate_of in in_batch
                and in_batch[item.duplicate_of].content_hash == item.content_hash
            }
            to_embed = [item for item, fingerprint in rows if fingerprint.body_key is not None and item.id not in originals and item.id not in copies_here]
            texts = [body_text(item.title, item.input) for item in to_embed] + [title_text(item.title, item.input) for item in to_embed]
            keys, _, fresh = embeddings.lookup(reader, texts)
            half = len(to_embed)
            new_keys = {item.id: (keys[position], keys[half + position]) for position, item in enumerate(to_embed)}
            new_keys.update(originals)
            new_keys.update({copy: new_keys[original] for copy, original in copies_here.items() if original in new_keys})
            updates = []
            for (item, fingerprint), sketch in zip(rows, sketches, strict=True):
                body_key, title_key = new_keys.get(item.id, (None, None)) if fingerprint.body_key is not None else (None, None)
                updates.append((item.id, item.content_hash, item.hash_recipe, to_bytes(sketch), body_key, title_key))
        with write() as writer:
            store_embeddings(writer, fresh)
            for item_id, hashed, hash_recipe, sketch_bytes, body_key, title_key in updates:
                assert item_id is not None
                stored = writer.get(Item, item_id)
                if stored is not None and (stored.content_hash, stored.hash_recipe) != (hashed, hash_recipe):
                    stored.content_hash, stored.hash_recipe = hashed, hash_recipe
                    writer.add(stored)
                writer.merge(
                    ItemFingerprint(
                        item_id=item_id, recipe=recipe.key, minhash=sketch_bytes, model_id=model_id if body_key else None, body_key=body_key, title_key=title_key
                    )
                )
            writer.flush()
        summary.items += len(updates)
        summary.encoded = embeddings.encoded - encoded_before
        if on_batch is not None:
            on_batch(summary)
    return summary


def _original_keys(session: Session, items: list[Item], model_id: str) -> dict[int | None, tuple[str, str]]:
    """For exact duplicates among `items` whose original already has fingerprints under
    `model_id`: the original's vector keys."""
    copies = {item.id: item for item in items if item.duplicate_of is not None}
    if not copies:
        return {}
    originals = {item.duplicate_of for item in copies.values()}
    query = (
        select(Item.id, Item.content_hash, ItemFingerprint.body_key, ItemFingerprint.title_key)
        .join(ItemFingerprint, col(ItemFingerprint.item_id) == col(Item.id))
        .where(col(Item.id).in_(originals), col(ItemFingerprint.model_id) == model_id)
    )
    found = {row[0]: row[1:] for row in session.exec(query)}
    result: dict[int | None, tuple[str, str]] = {}
    for item_id, item in copies.items():
        original = found.get(item.duplicate_of)
        if original is not None and original[0] == item.content_hash and original[1] and original[2]:
            result[item_id] = (original[1], original[2])
    return result

