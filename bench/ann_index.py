"""The approximate dedup index at a 1M-item pool, measured in one run on this machine. Prints a
table; not a test.

1. Real vectors: Hadoop bug reports (GitBugs) and CISA KEV records embedded with the real model
   (body and title texts as curation makes them), cached under var/bench/ for the next run.
2. A pool of `--items` body/title pairs: the real ones, and synthetic ones around them (a real
   item mixed with another and perturbed, so neighbourhoods are clustered as real ones are, not
   uniform), dated at random.
3. The graph built over the pool (timed) and saved as curation saves it.
4. In a fresh process: the file opened as a process opens it at start (timed), resident memory
   before and after, `--queries` new items searched one at a time for their 10 nearest by the
   combined title/body score (p50/p99), recall@10 against exact float32 search, the decoded
   vectors' cosine error, and how many top-10 cosines land on another side of a decision
   threshold than exact ones; then the same with `before=` (only the older half of the pool).

Usage: .venv/bin/python bench/ann_index.py [--items 1000000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA, ROOT
from curation.dedup.ann import ApproximateVectors
from curation.dedup.ann_graph import AnnConfig, GraphFile
from curation.dedup.index import TITLE_WEIGHT
from curation.dedup.rules import DedupConfig
from embedding.index_files import IndexFolder

K = 10
DIM = 384
STEM = "bench"
THRESHOLDS = sorted({value for name, value in vars(DedupConfig()).items() if name.endswith("threshold") and isinstance(value, float)})


def real_texts() -> list[tuple[str, str]]:
    """(title, input) of every GitBugs report and KEV record, in that order."""
    texts: list[tuple[str, str]] = []
    with (DATA / "gitbugs_hadoop" / "reports.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            report = json.loads(line)
            texts.append((report["title"] or "", report["description"] or ""))
    for record in json.loads((DATA / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text(encoding="utf-8"))["vulnerabilities"]:
        texts.append((f"{record['vendorProject']} {record['product']}: {record['vulnerabilityName']}", f"{record['shortDescription']}\n{record['requiredAction']}"))
    return texts


def real_vectors(cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """Body and title vectors of every GitBugs report and KEV record, from the cache or the model."""
    from curation.dedup.embeddings import body_text, title_text
    from embedding.models import SentenceTransformerEncoder, model_id_of

    model_id = model_id_of()
    if cache.exists():
        stored = np.load(cache, allow_pickle=False)
        if str(stored["model_id"]) == model_id:
            return stored["body"], stored["title"]
    texts = real_texts()
    encoder = SentenceTransformerEncoder()
    started = time.perf_counter()
    body = encoder.encode([body_text(title, text) for title, text in texts])
    title = encoder.encode([title_text(title, text) for title, text in texts])
    print(f"embedded {len(texts)} real items (body and title) in {time.perf_counter() - started:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, body=body, title=title, model_id=np.array(model_id))
    return body, title


def synthetic(body: np.ndarray, title: np.ndarray, count: int, seed: int, *, spread: str) -> np.ndarray:
    """`count` [body, title] rows around the real ones. `mixed`: a real item plus shares of three
    others and a little noise, so new points stay near the real vectors' span as real neighbours do;
    `noisy`: a real item, a share of another and isotropic noise of norm 0.2 to 0.8, which fills
    every dimension (a harder, less realistic neighbourhood)."""
    rng = np.random.default_rng(seed)
    out = np.empty((count, 2 * DIM), dtype=np.float32)
    others = 3 if spread == "mixed" else 1
    for start in range(0, count, 100_000):
        n = min(100_000, count - start)
        anchor = rng.integers(0, len(body), n)
        picks = rng.integers(0, len(body), (others, n))
        shares = rng.uniform(0.0, 0.35 if spread == "mixed" else 0.5, (others, n, 1)).astype(np.float32)
        noise = rng.uniform(0.0, 0.01, (n, 1)).astype(np.float32) if spread == "mixed" else rng.uniform(0.01, 0.04, (n, 1)).astype(np.float32)
        for half, source in ((0, body), (1, title)):
            rows = source[anchor] + sum(shares[j] * source[picks[j]] for j in range(others)) + noise * rng.standard_normal((n, DIM), dtype=np.float32)
            out[start : start + n, half * DIM : (half + 1) * DIM] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def exact_top(pool: np.ndarray, queries: np.ndarray, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-K slots by the combined score, and their float32 body and title cosines, per query."""
    weighted = queries.copy()
    weighted[:, DIM:] *= TITLE_WEIGHT
    best_scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    best_slots = np.zeros((len(queries), K), dtype=np.int64)
    for start in range(0, len(pool), 100_000):
        scores = pool[start : start + 100_000] @ weighted.T
        if allowed is not None:
            scores[~allowed[start : start + 100_000]] = -np.inf
        top = np.argpartition(-scores, K - 1, axis=0)[:K].T
        chunk_scores = np.take_along_axis(scores.T, top, axis=1)
        merged_scores = np.hstack([best_scores, chunk_scores])
        merged_slots = np.hstack([best_slots, top + start])
        keep = np.argsort(-merged_scores, axis=1)[:, :K]
        best_scores, best_slots = np.take_along_axis(merged_scores, keep, axis=1), np.take_along_axis(merged_slots, keep, axis=1)
    cosines = np.einsum("qkd,qd->qk", pool[best_slots][:, :, :DIM], queries[:, :DIM]), np.einsum("qkd,qd->qk", pool[best_slots][:, :, DIM:], queries[:, DIM:])
    return best_slots, np.stack(cosines, axis=2)


def rss() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def measure(workdir: Path, efs: list[tuple[int, int]]) -> None:
    """The fresh process: open the saved file, query, print JSON figures."""
    config = AnnConfig(min_items=1)
    queries = np.load(workdir / "queries.npy")
    info = json.loads((workdir / "expected.json").read_text())
    importlib.import_module("faiss")  # the library's own memory is not the index's
    before = rss()
    started = time.perf_counter()
    times = np.load(workdir / "times.npy")  # occurrence times by position: kept by the index
    file = GraphFile.open(IndexFolder(workdir), STEM, info)
    assert file is not None
    vectors = ApproximateVectors(file, np.arange(len(times), dtype=np.int64), times, dim=DIM, title_weight=TITLE_WEIGHT, config=config, origin="opened")
    file.item_ids, file.digests = file.item_ids[:0], file.digests[:0]
    load_s = time.perf_counter() - started
    loaded = rss()
    figures: dict[str, object] = {"load_s": load_s}
    cutoff = float(np.median(times))
    runs = [(f"ef{ef}-{pool}", ef, pool, None) for ef, pool in efs] + [("before", *efs[0], cutoff)]
    for label, ef, pool, limit in runs:
        vectors.config = dataclasses.replace(config, ef_search=ef, pool=pool)
        latencies, found, cosines = [], [], []
        for query in queries if limit is None else queries[: len(queries) // 5]:
            start = time.perf_counter()
            answer = vectors.nearest(query[:DIM], query[DIM:], K, exclude=(), before=limit, times=times)
            latencies.append(time.perf_counter() - start)
            found.append([position for position, _, _ in answer] + [-1] * (K - len(answer)))
            cosines.append([(body, title) for _, body, title in answer] + [(np.nan, np.nan)] * (K - len(answer)))
        np.save(workdir / f"found-{label}.npy", np.array(found, dtype=np.int64))
        np.save(workdir / f"cosines-{label}.npy", np.array(cosines, dtype=np.float32))
        figures[f"p50_{label}_ms"] = float(np.percentile(latencies, 50) * 1000)
        figures[f"p99_{label}_ms"] = float(np.percentile(latencies, 99) * 1000)
    after = rss()
    file_bytes = sum((workdir / str(file.info[name])).stat().st_size for name in ("graph", "refine"))
    figures.update(rss_before=before, rss_loaded=loaded, rss_after=after, file_bytes=file_bytes)
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    defaults = AnnConfig()
    parser.add_argument("--ef", default=f"{defaults.ef_search}/{defaults.pool},256/96,512/192", help="search breadths/candidate pools to measure, the first one in full")
    parser.add_argument("--connectivity", type=int, default=defaults.connectivity, help="the graph's M")
    parser.add_argument("--spread", choices=["mixed", "noisy"], default="mixed", help="how synthetic items sit around the real ones (see `synthetic`)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench" / "ann")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    efs = [(int(ef), int(pool)) for ef, pool in (entry.split("/") for entry in args.ef.split(","))]
    if args.measure:
        measure(args.workdir, efs)
        return
    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    real_body, real_title = real_vectors(ROOT / "var" / "bench" / "ann_real_vectors.npz")
    real = np.hstack([real_body, real_title]).astype(np.float32)
    pool = np.vstack([real, synthetic(real_body, real_title, args.items - len(real), seed=1, spread=args.spread)])
    queries = synthetic(real_body, real_title, args.queries, seed=2, spread=args.spread)
    times = np.random.default_rng(3).uniform(1.6e9, 1.75e9, len(pool))
    config = AnnConfig(min_items=1, connectivity=args.connectivity)
    info = {"version": 1, "model_id": "bench", "kind": config.kind(DIM), "dim": DIM, "database": "bench"}
    ids = np.arange(len(pool), dtype=np.int64)

    started = time.perf_counter()
    built = GraphFile.build(lambda start, end: pool[start:end], len(pool), dim=DIM, config=config, info=info, item_ids=ids, digests=ids)
    build_s = time.perf_counter() - started
    built.save(IndexFolder(workdir), STEM)
    del built
    np.save(workdir / "queries.npy", queries)
    np.save(workdir / "times.npy", times)
    (workdir / "expected.json").write_text(json.dumps({**info, "count": len(pool)}))

    truth, truth_cosines = exact_top(pool, queries)
    cutoff = float(np.median(times))
    truth_before, _ = exact_top(pool, queries[: len(queries) // 5], times < cutoff)
    started = time.perf_counter()
    for query in queries[:10]:
        scores = pool[:, :DIM] @ query[:DIM] + TITLE_WEIGHT * (pool[:, DIM:] @ query[DIM:])
        np.argpartition(-scores, K)[:K]
    exact_s = (time.perf_counter() - started) / 10

    child = subprocess.run([sys.executable, __file__, "--measure", "--workdir", str(workdir), "--ef", args.ef], capture_output=True, text=True, check=True)  # noqa: S603 (this script, again)
    figures = json.loads(child.stdout.strip().splitlines()[-1])

    def recall(found: np.ndarray, expected: np.ndarray) -> float:
        return float(np.mean([len(set(row) & set(wanted)) / K for row, wanted in zip(found, expected, strict=True)]))

    first = f"ef{efs[0][0]}-{efs[0][1]}"
    found = np.load(workdir / f"found-{first}.npy")
    cosines = np.load(workdir / f"cosines-{first}.npy")
    recall_all = recall(found, truth)
    recall_before = recall(np.load(workdir / "found-before.npy"), truth_before)
    same_ids = found == truth
    error = np.abs(cosines - truth_cosines)[same_ids]
    flips = sum(int(np.sum((cosines[same_ids] >= threshold) != (truth_cosines[same_ids] >= threshold))) for threshold in THRESHOLDS)
    n = len(pool)
    before, loaded, after = figures["rss_before"], figures["rss_loaded"], figures["rss_after"]
    rows = [
        ("items in the pool", f"{n:,}", ""),
        ("build (2 cores)", f"{build_s:.0f} s", ""),
        ("load from the file", f"{figures['load_s']:.2f} s", "<= 30 s"),
        ("query p50 / p99", f"{figures[f'p50_{first}_ms']:.2f} / {figures[f'p99_{first}_ms']:.2f} ms", "p99 <= 20 ms"),
        ("query with before= p50 / p99", f"{figures['p50_before_ms']:.2f} / {figures['p99_before_ms']:.2f} ms", ""),
        ("exact float32 search, one query (mean)", f"{exact_s * 1000:.0f} ms", ""),
        ("recall@10 against exact", f"{recall_all:.4f}", ">= 0.99"),
        ("recall@10 with before=", f"{recall_before:.4f}", ""),
        ("top-10 at the same rank as exact", f"{same_ids.mean():.4f}", ""),
        ("cosine error (decoded) mean / max", f"{error.mean():.5f} / {error.max():.5f}", ""),
        ("threshold crossings in top-10 cosines", f"{flips} of {same_ids.sum() * 2 * len(THRESHOLDS):,}", ""),
        ("RSS after load, per item", f"{(loaded['VmRSS'] - before['VmRSS']) / n:.0f} B", ""),
        ("RSS after queries, per item", f"{(after['VmRSS'] - before['VmRSS']) / n:.0f} B", "<= 1,536 B"),
        ("  anonymous / file-backed", f"{(after['RssAnon'] - before['RssAnon']) / n:.0f} / {(after['RssFile'] - before['RssFile']) / n:.0f} B", ""),
        ("worst case: anonymous + whole files", f"{(after['RssAnon'] - before['RssAnon'] + figures['file_bytes']) / n:.0f} B", "<= 1,536 B"),
    ]
    print(f"\nANN dedup index, {n:,} items ({args.spread}), {len(queries)} queries, k={K} (HNSW M={config.connectivity}, SQ8+4-bit, ef {config.ef_search}, pool {config.pool})")
    print(f"| {'figure':<40} | {'measured':<22} | {'target':<12} |")
    print(f"|{'-' * 42}|{'-' * 24}|{'-' * 14}|")
    for name, value, target in rows:
        print(f"| {name:<40} | {value:<22} | {target:<12} |")
    print(f"\n| {'ef_search / pool':<16} | {'recall@10':<10} | {'p50 ms':<8} | {'p99 ms':<8} |")
    print(f"|{'-' * 18}|{'-' * 12}|{'-' * 10}|{'-' * 10}|")
    for ef, size in efs:
        label = f"ef{ef}-{size}"
        measured = recall(np.load(workdir / f"found-{label}.npy"), truth)
        print(f"| {f'{ef} / {size}':<16} | {measured:<10.4f} | {figures[f'p50_{label}_ms']:<8.2f} | {figures[f'p99_{label}_ms']:<8.2f} |")
    for path in workdir.glob(f"{STEM}*"):
        path.unlink()


if __name__ == "__main__":
    main()
