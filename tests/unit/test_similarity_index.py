"""The index's bulk paths agree with datasketch's own: stored sketch bytes read back in one go,
and a cold rebuild's banded LSH insert answers queries exactly as `insertion_session` does."""

from __future__ import annotations

import random

import numpy as np
import pytest
from datasketch import MinHashLSH

from curation.dedup.fingerprints import MinHashRecipe, from_bytes, sketch_texts, to_bytes, values_from_bytes
from curation.dedup.index import IndexedItem, SimilarityIndex, _insert_bands

# Alphabetic words: digits would be masked by normalisation and make every text the same.
WORDS = [a + b + c for a in "bcdfg" for b in "aeiou" for c in "klmnprst"]


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    base = [" ".join(rng.choices(WORDS, k=30)) for _ in range(count // 2)]
    # Half are light edits of the first half, so buckets are shared and queries find several items.
    edited = [text.replace(text.split()[3], "changed", 1) for text in base]
    return base + edited


@pytest.mark.parametrize("scheme", ["affine32", "affine64"])
def test_stored_sketches_read_back_in_bulk_equal_one_by_one(scheme: str) -> None:
    recipe = MinHashRecipe(num_perm=64, scheme=scheme)
    blobs = [to_bytes(sketch) for sketch in sketch_texts(_texts(20, 1), recipe)]
    rows = values_from_bytes(blobs, recipe)
    assert rows.dtype == (np.uint32 if scheme == "affine32" else np.uint64)
    for row, blob in zip(rows, blobs, strict=True):
        assert np.array_equal(row, from_bytes(blob, recipe).hashvalues)


def test_bulk_reading_refuses_another_recipe_naming_it() -> None:
    blobs = [to_bytes(sketch) for sketch in sketch_texts(_texts(4, 2), MinHashRecipe(seed=7))]
    with pytest.raises(ValueError, match="seed 7"):
        values_from_bytes(blobs, MinHashRecipe(seed=1))
    with pytest.raises(ValueError, match="permutations"):
        values_from_bytes(blobs, MinHashRecipe(seed=7, num_perm=64))


def test_a_rebuilt_index_answers_like_one_built_sketch_by_sketch() -> None:
    recipe = MinHashRecipe()
    texts = _texts(400, 3)
    sketches = sketch_texts(texts, recipe)
    rows = values_from_bytes([to_bytes(sketch) for sketch in sketches], recipe)
    vectors = np.eye(len(texts), 8, dtype=np.float32)
    items = [IndexedItem(item_id, float(item_id), f"{item_id:064x}", None, item_id, "unique") for item_id in range(1, len(texts) + 1)]

    # The fast path really runs (it falls back to insertion_session when datasketch's layout differs).
    assert _insert_bands(MinHashLSH(threshold=0.6, num_perm=recipe.num_perm), [1, 2], rows[:2], recipe)
    rebuilt = SimilarityIndex(recipe=recipe, model_id="m", dim=8, lsh_threshold=0.6)
    rebuilt._add_rows(items, rows, vectors, vectors)
    reference = MinHashLSH(threshold=0.6, num_perm=recipe.num_perm)
    with reference.insertion_session() as inserting:
        for item, sketch in zip(items, sketches, strict=True):
            inserting.insert(item.item_id, sketch)

    found_any = 0
    for sketch in sketches:
        expected = sorted(int(key) for key in reference.query(sketch))
        near = rebuilt.near(sketch)
        assert sorted(item_id for item_id, _ in near) == expected
        for item_id, score in near:
            assert score == pytest.approx(sketch.jaccard(sketches[item_id - 1]))
        found_any += len(expected) > 1
    assert found_any >= len(texts) // 4  # the edited copies really share buckets with their originals

    # Items added later (during curation) go through insertion_session and are found the same way.
    extra = sketch_texts(["a completely different text about a disk that filled up overnight"], recipe)[0]
    rebuilt.add([(IndexedItem(9999, 0.0, "f" * 64, None, 9999, "unique"), extra, vectors[0], vectors[0])])
    assert rebuilt.near(extra)[0] == (9999, 1.0)
    assert rebuilt.jaccard(extra, 9999) == 1.0
    assert rebuilt.jaccard(extra, 123456) is None
