"""The approximate vector search answers as exact search does: the same top-k on a few thousand
real reports' vectors (the tests' hashing encoder), `exclude` and `before` honoured (ranked exactly or through the filtered graph),
items held beside the graph found, and a file refused for another model or database."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curation.dedup.ann import ApproximateVectors
from curation.dedup.ann_graph import AnnConfig, GraphFile, vector_digests
from curation.dedup.embeddings import body_text, title_text
from curation.dedup.index import TITLE_WEIGHT
from curation.dedup.sketch_table import text_keys
from embedding.index_files import IndexFolder
from tests.dedup_support import hadoop_reports
from tests.eval_support import HashingEncoder

DIM = HashingEncoder.dim
K = 10
# Hashed word counts spread over every dimension: a harder graph than sentence embeddings, so a
# denser one than the default (bench/ann_index.py measures the default on the real model's vectors).
GRAPH = AnnConfig(min_items=1, connectivity=32, ef_construction=80, ef_search=256)


def _encoded(reports: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Body and title vectors of real Hadoop reports from the tests' hashing encoder."""
    encoder = HashingEncoder()
    texts = [(report["title"] or "", report["description"] or "") for report in reports]
    return encoder.encode([body_text(title, text) for title, text in texts]), encoder.encode([title_text(title, text) for title, text in texts])


def _exact(body: np.ndarray, title: np.ndarray, query_body: np.ndarray, query_title: np.ndarray, allowed: np.ndarray) -> list[int]:
    scores = (body @ query_body + TITLE_WEIGHT * (title @ query_title)) / (1 + TITLE_WEIGHT)
    scores[~allowed] = -np.inf
    order = np.argsort(-scores, kind="stable")[:K]
    return [int(i) for i in order if np.isfinite(scores[i])]


def _vectors(body: np.ndarray, title: np.ndarray, times: np.ndarray, config: AnnConfig) -> ApproximateVectors:
    ids = np.arange(len(body), dtype=np.int64)
    rows = np.hstack([body, title])
    file = GraphFile.build(lambda start, end: rows[start:end], len(rows), dim=DIM, config=config, info={"dim": DIM}, item_ids=ids, digests=ids)
    return ApproximateVectors(file, ids, times, dim=DIM, title_weight=TITLE_WEIGHT, config=config, origin="memory")


@pytest.fixture(scope="module")
def pool() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    body, title = _encoded(hadoop_reports(2600))
    times = np.random.default_rng(2).uniform(0, 1000, len(body))
    return body, title, times


def test_top_k_equals_exact_search(pool: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    body, title, times = pool
    pooled = 2300
    vectors = _vectors(body[:pooled], title[:pooled], times[:pooled], GRAPH)
    everything = np.ones(pooled, dtype=bool)
    same = 0
    for query_body, query_title in zip(body[pooled:], title[pooled:], strict=True):
        found = vectors.nearest(query_body, query_title, K, exclude=(), before=None, times=times)
        expected = _exact(body[:pooled], title[:pooled], query_body, query_title, everything)
        same += {position for position, _, _ in found} == set(expected)
        for position, body_cosine, title_cosine in found:
            assert body_cosine == pytest.approx(float(body[position] @ query_body), abs=5e-3)
            assert title_cosine == pytest.approx(float(title[position] @ query_title), abs=5e-3)
    assert same >= 0.99 * (len(body) - pooled)


@pytest.mark.parametrize("exact_below", [0, 10**6], ids=["filtered-graph", "exact-subset"])
def test_exclude_and_before_are_honoured(pool: tuple[np.ndarray, np.ndarray, np.ndarray], exact_below: int) -> None:
    body, title, times = pool
    vectors = _vectors(body, title, times, dataclasses.replace(GRAPH, exact_below=exact_below))
    rng = np.random.default_rng(4)
    same = 0
    trials = 100
    for position in rng.integers(0, len(body), trials):
        before = float(times[position])
        excluded = {int(position), *(int(other) for other in rng.integers(0, len(body), 5))}
        found = [found_position for found_position, _, _ in vectors.nearest(body[position], title[position], K, exclude=excluded, before=before, times=times)]
        assert not excluded & set(found)
        assert all(times[found_position] < before for found_position in found)
        allowed = times < before
        allowed[list(excluded)] = False
        same += set(found) == set(_exact(body, title, body[position], title[position], allowed))
    assert same >= 0.99 * trials


def test_items_held_beside_the_graph_are_found_and_ranked_with_it(pool: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    body, title, times = pool
    graph_part = 2400
    vectors = _vectors(body[:graph_part], title[:graph_part], times[:graph_part], GRAPH)
    vectors.append(range(graph_part, len(body)), body[graph_part:], title[graph_part:])
    assert len(vectors) == len(body) and vectors.beside == len(body) - graph_part
    everything = np.ones(len(body), dtype=bool)
    same = 0
    for position in range(graph_part - 50, graph_part + 50):
        found = [found_position for found_position, _, _ in vectors.nearest(body[position], title[position], K, exclude=(), before=None, times=times)]
        assert position in found
        same += set(found) == set(_exact(body, title, body[position], title[position], everything))
    assert same >= 97
    stored_body, stored_title = vectors.vectors(len(body) - 1)
    assert np.array_equal(stored_body, body[-1]) and np.array_equal(stored_title, title[-1])
    decoded_body, _ = vectors.vectors(0)
    assert float(decoded_body @ body[0]) == pytest.approx(1.0, abs=5e-3)


def test_a_saved_file_opens_only_for_what_it_was_made_for(tmp_path: Path, pool: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    body, title, _ = pool
    rows = np.hstack([body, title])[:500]
    ids = np.arange(500, dtype=np.int64)
    files = IndexFolder(tmp_path)
    info = {"version": 1, "model_id": "model-a", "kind": AnnConfig().kind(DIM), "dim": DIM, "database": "db-1"}
    GraphFile.build(lambda start, end: rows[start:end], 500, dim=DIM, config=AnnConfig(), info=info, item_ids=ids, digests=ids).save(files, "stem")
    opened = GraphFile.open(files, "stem", info)
    assert opened is not None and opened.graph.ntotal == 500 and np.array_equal(opened.item_ids, ids)
    assert GraphFile.open(files, "stem", {**info, "model_id": "model-b"}) is None
    assert GraphFile.open(files, "stem", {**info, "database": "db-2"}) is None
    assert GraphFile.open(files, "stem", {**info, "kind": AnnConfig(connectivity=32).kind(DIM)}) is None
    assert GraphFile.open(files, "other-stem", info) is None
    # A second save replaces the first, leaving one graph file.
    GraphFile.build(lambda start, end: rows[start:end], 500, dim=DIM, config=AnnConfig(), info=info, item_ids=ids, digests=ids).save(files, "stem")
    assert len(list(tmp_path.glob("stem.*.faiss"))) == 1
    digests = vector_digests(text_keys(["a", "b", "a"]), text_keys(["b", "a", "b"]))
    assert digests[0] != digests[1] and digests[0] == digests[2] and (digests >= 0).all()
