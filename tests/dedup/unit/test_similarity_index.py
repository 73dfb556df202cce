"""The index's bulk paths agree with datasketch's own: stored sketch bytes read back in one go,
a sketch table (in memory or opened from its files) finds exactly the items `MinHashLSH.query`
finds, and items added one by one are found the same way."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from datasketch import LeanMinHash, MinHashLSH

from curation.dedup.fingerprints import MinHashRecipe, from_bytes, sketch_texts, to_bytes, values_from_bytes
from curation.dedup.index import IndexedItem, SimilarityIndex
from curation.dedup.sketch_table import SketchTable, identity_digest, mix, record_digests, text_keys
from embedding.index_files import IndexFolder

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


def _table(sketches: list[LeanMinHash], recipe: MinHashRecipe, lsh: MinHashLSH, content: list[str]) -> SketchTable:
    rows = values_from_bytes([to_bytes(sketch) for sketch in sketches], recipe)
    count = len(sketches)
    keys = text_keys([f"{n:064x}" for n in range(count)])
    times = np.arange(count, dtype=np.float64)
    identity = np.zeros(count, dtype=np.uint64)
    return SketchTable.build(
        item_ids=np.arange(1, count + 1, dtype=np.int64),
        digests=record_digests(times, text_keys(content), identity, keys, keys),
        content=text_keys(content),
        identity=identity,
        body_keys=keys,
        title_keys=keys,
        values=rows,
        ranges=list(lsh.hashranges),
        info={"recipe": recipe.key},
    )


def test_a_sketch_table_answers_like_datasketch_lsh(tmp_path: Path) -> None:
    recipe = MinHashRecipe()
    texts = _texts(400, 3)
    sketches = sketch_texts(texts, recipe)
    reference = MinHashLSH(threshold=0.55, num_perm=recipe.num_perm)
    with reference.insertion_session() as inserting:
        for slot, sketch in enumerate(sketches):
            inserting.insert(slot, sketch)
    content = [f"hash-{slot % 150}" for slot in range(len(texts))]  # some content hashes shared by 2 or 3 items
    built = _table(sketches, recipe, reference, content)
    built.save(IndexFolder(tmp_path), "stem")
    opened = SketchTable.open(IndexFolder(tmp_path), "stem", {"recipe": recipe.key})
    assert opened is not None and isinstance(opened.values, np.memmap)

    found_any = 0
    for table in (built, opened):
        for sketch in sketches:
            expected = sorted(int(key) for key in reference.query(sketch))
            assert sorted(table.matching(sketch.hashvalues).tolist()) == expected
            found_any += len(expected) > 1
        for wanted in ("hash-0", "hash-149", "hash-none"):
            assert sorted(table.with_content(wanted).tolist()) == [slot for slot, value in enumerate(content) if value == wanted]
    assert found_any >= len(texts) // 2  # the edited copies really share buckets with their originals

    # A record that does not match is refused; a second save replaces the first.
    assert SketchTable.open(IndexFolder(tmp_path), "stem", {"recipe": "another"}) is None
    assert SketchTable.open(IndexFolder(tmp_path), "other", {"recipe": recipe.key}) is None
    built.save(IndexFolder(tmp_path), "stem")
    assert len(list(tmp_path.glob("stem.*.sketches"))) == 1


def test_band_hashes_that_collide_add_no_item() -> None:
    recipe = MinHashRecipe(num_perm=16)
    lsh = MinHashLSH(threshold=0.5, num_perm=16)
    sketches = sketch_texts(_texts(40, 5), recipe)
    table = _table(sketches, recipe, lsh, [f"h{n}" for n in range(40)])
    query = sketches[0].hashvalues
    # Every item's band hashes made equal to the query's: each bucket lookup now finds every item,
    # and only real band equality may count.
    for band, (start, end) in enumerate(table.ranges):
        table.band_keys[band] = mix([query[None, start:end]], 1)[0]
    with_collisions = set(table.matching(query).tolist())
    expected = {int(key) for key in _reference(lsh, sketches).query(sketches[0])}
    assert with_collisions == expected and 0 in expected


def _reference(lsh: MinHashLSH, sketches: list[LeanMinHash]) -> MinHashLSH:
    """`lsh` (empty) holding `sketches`, keyed by position."""
    for slot, sketch in enumerate(sketches):
        lsh.insert(slot, sketch)
    return lsh


def test_items_added_one_by_one_are_found_as_datasketch_finds_them() -> None:
    recipe = MinHashRecipe()
    texts = _texts(60, 4)
    sketches = sketch_texts(texts, recipe)
    vectors = np.eye(len(texts), 8, dtype=np.float32)
    index = SimilarityIndex(recipe=recipe, model_id="m", dim=8, lsh_threshold=0.55)
    for item_id, sketch in enumerate(sketches, start=1):
        entry = IndexedItem(item_id, float(item_id), f"{item_id % 25:064x}", identity_digest("CVE-1" if item_id % 2 else None), item_id, "unique", "b", "t")
        index.add([(entry, sketch, vectors[item_id - 1], vectors[item_id - 1])])
    reference = MinHashLSH(threshold=0.55, num_perm=recipe.num_perm)
    for item_id, sketch in enumerate(sketches, start=1):
        reference.insert(item_id, sketch)
    for sketch in sketches:
        near = index.near(sketch)
        assert sorted(item_id for item_id, _ in near) == sorted(int(key) for key in reference.query(sketch))
        for item_id, score in near:
            assert score == pytest.approx(sketch.jaccard(sketches[item_id - 1]))
    assert index.exact(f"{3:064x}") == [3, 28, 53]
    assert index.has_hash(f"{3:064x}") and not index.has_hash("f" * 64)
    known = index.known_hashes()
    known.add("e" * 64)
    assert f"{3:064x}" in known and "e" * 64 in known and not index.has_hash("e" * 64)
    entry = index.get(3)
    assert (entry.item_id, entry.content_hash, entry.identity, entry.body_key) == (3, f"{3:064x}", identity_digest("CVE-1"), "b")
    assert index.get(4).identity == 0
    index.set_root(4, 3, "duplicate")
    assert (index.get(4).root, index.get(4).status) == (3, "duplicate")
    assert index.jaccard(sketches[0], 1) == 1.0 and index.jaccard(sketches[0], 123456) is None
    with pytest.raises(KeyError):
        index.get(123456)
