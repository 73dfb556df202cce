"""The whole dedup index (exact hashes, MinHash LSH, item records and the approximate vector
index) over a large pool stored in a real database, measured in one run on this machine. Prints a
table; not a test.

1. A pool of `--items` decided items written straight into a migrated SQLite database (or the
   PostgreSQL one `--database-url` names): the 3,907 GitBugs reports and KEV records with their
   real sketches and real embeddings (cached under var/bench/ by bench/ann_index.py), and synthetic
   items around them: vectors as bench/ann_index.py makes them (a real item mixed with shares of
   three others), sketches that keep a share of a real item's MinHash values (so LSH buckets are
   shared as near-verbatim copies share them), 1 in 50 an exact copy of an earlier item.
   The pool is kept between runs (`--rebuild` makes it again).
2. A first `SimilarityIndex.load` in a fresh process, as a curation worker's first start: builds
   and saves whatever files the index keeps (timed).
3. A second load in another fresh process, as any later start or API replica: opens them (timed;
   the target is 30 s), resident memory per item before and after queries, then `--queries` new
   items searched as curation searches each candidate (exact hash, LSH buckets with their Jaccard,
   the nearest neighbours by embedding): p50 / p99 per candidate (target p99 20 ms).

Usage: .venv/bin/python bench/index_load.py [--items 1000000] [--queries 1000] [--database-url URL] [--rebuild]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert, text
from sqlalchemy.engine import Engine
from sqlmodel import Session

from bench.ann_index import DIM, real_texts, real_vectors, rss, synthetic
from bench.common import ROOT
from curation.dedup.ann_graph import AnnConfig
from curation.dedup.fingerprints import MinHashRecipe, sketch_from_values, sketch_texts, to_bytes, values_from_bytes
from curation.dedup.index import SimilarityIndex
from curation.dedup.rules import DedupConfig
from embedding.index_files import IndexFolder
from ingest.normalisation import dedup_text
from schemas.common import utcnow
from schemas.dedup import Embedding, ItemFingerprint
from schemas.item import Item
from schemas.source import Source
from service.core.db import make_engine, migrate

MODEL_ID = "bench-index-load"
CHUNK = 20_000
COPY_EVERY = 50


def _key(kind: str, number: int) -> str:
    return hashlib.sha256(f"{kind}{number}".encode()).hexdigest()


def build_pool(engine: Engine, count: int, recipe: MinHashRecipe) -> None:
    """Write `count` decided items with fingerprints and vectors (see the module docstring)."""
    real_body, real_title = real_vectors(ROOT / "var" / "bench" / "ann_real_vectors.npz")
    texts = real_texts()
    real_values = values_from_bytes([to_bytes(sketch) for sketch in sketch_texts((dedup_text(title, body) for title, body in texts), recipe)], recipe)
    header = to_bytes(sketch_from_values(real_values[0], recipe))[: -real_values.shape[1] * real_values.itemsize]
    rng = np.random.default_rng(7)
    real = np.hstack([real_body, real_title]).astype(np.float32)
    vectors = np.vstack([real, synthetic(real_body, real_title, count - len(real), seed=1, spread="mixed")])
    anchors = np.concatenate([np.arange(len(real)), rng.integers(0, len(real), count - len(real))])
    now = utcnow()
    with Session(engine) as db:
        source = Source(name="bench", kind="file")
        db.add(source)
        db.commit()
        source_id = source.id
    times = np.sort(rng.uniform(1.6e9, 1.75e9, count))
    started = time.perf_counter()
    for start in range(0, count, CHUNK):
        end = min(start + CHUNK, count)
        values = real_values[anchors[start:end]].copy()
        # Synthetic items keep 40-100% of their real item's values: near-verbatim neighbours share buckets.
        keep = rng.uniform(0.4, 1.0, (end - start, 1))
        fresh = rng.uniform(size=values.shape) > keep
        fresh[: max(0, len(real) - start)] = False
        values[fresh] = rng.integers(0, 2**32 - 1, int(fresh.sum()), dtype=np.uint64).astype(values.dtype)
        items, fingerprints, embeddings = [], [], []
        for offset in range(end - start):
            number = start + offset
            copy_of = number - 1 - (number % 7) if number % COPY_EVERY == 0 and number > 10 else None
            content = _key("content", copy_of if copy_of is not None else number)
            items.append(
                {
                    "id": number + 1,
                    "source_id": source_id,
                    "external_id": f"s{number}",
                    "occurred_at": _instant(times[number]),
                    "title": "",
                    "input": f"item {number}",
                    "reference": "",
                    "tags": [],
                    "metadata": {},
                    "content_hash": content,
                    "hash_recipe": "n3",
                    "record_digest": "0" * 64,
                    "status": "duplicate" if copy_of is not None else "unique",
                    "duplicate_of": copy_of + 1 if copy_of is not None else None,
                    "ingested_at": now,
                    "updated_at": now,
                    "revision": 1,
                }
            )
            body_key, title_key = _key("body", number), _key("title", number)
            minhash = header + values[offset].tobytes()
            fingerprints.append(
                {"item_id": number + 1, "recipe": recipe.key, "minhash": minhash, "model_id": MODEL_ID, "body_key": body_key, "title_key": title_key, "created_at": now}
            )
            embeddings.append({"text_hash": body_key, "model_id": MODEL_ID, "dim": DIM, "vector": vectors[number, :DIM].tobytes(), "created_at": now})
            embeddings.append({"text_hash": title_key, "model_id": MODEL_ID, "dim": DIM, "vector": vectors[number, DIM:].tobytes(), "created_at": now})
        with engine.begin() as connection:
            connection.execute(insert(Item), items)
            connection.execute(insert(ItemFingerprint), fingerprints)
            connection.execute(insert(Embedding), embeddings)
        if end % 100_000 == 0 or end == count:
            print(f"  stored {end:,} items ({time.perf_counter() - started:.0f} s)", flush=True)
    queries = np.hstack([synthetic(real_body, real_title, 1000, seed=2, spread="mixed")])
    query_values = real_values[rng.integers(0, len(real_values), 1000)].copy()
    fresh = rng.uniform(size=query_values.shape) > rng.uniform(0.5, 1.0, (1000, 1))
    query_values[fresh] = rng.integers(0, 2**32 - 1, int(fresh.sum()), dtype=np.uint64).astype(query_values.dtype)
    workdir = ROOT / "var" / "bench" / "index_load"
    np.save(workdir / "query_vectors.npy", queries)
    np.save(workdir / "query_values.npy", query_values)


def _instant(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(float(epoch), tz=UTC)


def load_and_measure(url: str, folder: Path, queries: int) -> dict[str, Any]:
    """One process's start: load the index (timed), then search `queries` candidates as curation does."""
    import faiss  # noqa: F401 (the library's own memory is not the index's)

    engine = make_engine(url)
    recipe = MinHashRecipe()
    config = DedupConfig(ann=AnnConfig())
    before = rss()
    started, cpu = time.perf_counter(), time.process_time()
    with Session(engine) as session:
        threshold = max(0.05, config.minhash_threshold - 0.1)
        index = SimilarityIndex.load(session, recipe=recipe, model_id=MODEL_ID, dim=DIM, lsh_threshold=threshold, ann=config.ann, files=IndexFolder(folder))
    load_s, load_cpu = time.perf_counter() - started, time.process_time() - cpu
    loaded = rss()
    workdir = ROOT / "var" / "bench" / "index_load"
    vectors = np.load(workdir / "query_vectors.npy")[:queries]
    values = np.load(workdir / "query_values.npy")[:queries]
    latencies, near_found = [], 0
    for row, value in zip(vectors, values, strict=True):
        sketch = sketch_from_values(value, recipe)
        start = time.perf_counter()
        index.exact(_key("content", int(row[0] * 1e6) % 1000))
        near = index.near(sketch)
        index.nearest(row[:DIM], row[DIM:], config.neighbours)
        latencies.append(time.perf_counter() - start)
        near_found += bool(near)
    after = rss()
    return {
        "items": len(index),
        "approximate": index.ann is not None,
        "origin": index.ann.origin if index.ann is not None else None,
        "load_s": round(load_s, 2),
        "load_cpu_s": round(load_cpu, 2),
        "rss_loaded_per_item": round((loaded["VmRSS"] - before["VmRSS"]) / len(index)),
        "rss_after_per_item": round((after["VmRSS"] - before["VmRSS"]) / len(index)),
        "anon_after_per_item": round((after["RssAnon"] - before["RssAnon"]) / len(index)),
        "file_after_per_item": round((after["RssFile"] - before["RssFile"]) / len(index)),
        "query_p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 2),
        "query_p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 2),
        "queries_with_lsh_candidates": near_found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--database-url", default=None, help="default: a SQLite file under var/bench/index_load/")
    parser.add_argument("--rebuild", action="store_true", help="write the pool again")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = ROOT / "var" / "bench" / "index_load"
    folder = workdir / "files"
    url = args.database_url or f"sqlite:///{workdir / f'pool-{args.items}.db'}"
    if args.measure:
        print(json.dumps(load_and_measure(url, folder, args.queries)))
        return
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / f"pool-{args.items}.{hashlib.sha256(url.encode()).hexdigest()[:8]}.ready"
    engine = make_engine(url)
    if args.rebuild or not marker.exists():
        migrate(engine)
        with engine.begin() as connection:
            for table in ("dedup_decision", "item_fingerprint", "embedding", "item_revision", "item", "source"):
                connection.execute(text(f"DELETE FROM {table}"))
        print(f"writing a pool of {args.items:,} items")
        build_pool(engine, args.items, MinHashRecipe())
        marker.touch()
    shutil.rmtree(folder, ignore_errors=True)
    runs = {}
    for name in ("first start (builds)", "later start (opens)"):
        command = [sys.executable, __file__, "--measure", "--items", str(args.items), "--queries", str(args.queries), *(["--database-url", url] if args.database_url else [])]
        child = subprocess.run(command, capture_output=True, text=True)  # noqa: S603 (this script, again)
        if child.returncode != 0:
            print(child.stderr)
            raise SystemExit(child.returncode)
        runs[name] = json.loads(child.stdout.strip().splitlines()[-1])
        print(name, runs[name], flush=True)
    later = runs["later start (opens)"]
    print(f"\nWhole dedup index, {later['items']:,} items, {engine.dialect.name}, {args.queries} candidate searches (exact + LSH + {DedupConfig().neighbours} nearest)")
    print("| figure | first start | later start | target |\n|---|---|---|---|")
    first = runs["first start (builds)"]
    for label, key, target in (
        ("load (wall)", "load_s", "<= 30 s"),
        ("load (CPU)", "load_cpu_s", ""),
        ("RSS after load, per item", "rss_loaded_per_item", ""),
        ("RSS after searches, per item", "rss_after_per_item", "<= 1,536 B"),
        ("  anonymous / file-backed", None, ""),
        ("search p50 ms", "query_p50_ms", ""),
        ("search p99 ms", "query_p99_ms", "<= 20 ms"),
    ):
        if key is None:
            print(f"| {label} | {first['anon_after_per_item']} / {first['file_after_per_item']} B | {later['anon_after_per_item']} / {later['file_after_per_item']} B | {target} |")
        else:
            print(f"| {label} | {first[key]} | {later[key]} | {target} |")


if __name__ == "__main__":
    main()
