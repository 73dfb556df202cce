"""Dedup quality on real data, beside MinHash-only and embedding-only baselines measured in the
same run. Prints figures; not part of the test suite.

- gitbugs_hadoop: reports streamed in `created` order through the engine; recall@1/5/10 of the
  labelled earlier duplicate among `/similar` (the fused ranking); the share of the pool the
  engine marks duplicate, by rule and stage, and its largest clusters; the decision's precision
  and recall on the *hard* development set (nearest neighbours labelled by reading them:
  `bench/labels/gitbugs_neighbours.jsonl` and the shared `near_pairs_labelled.jsonl`, rule in
  `bench/labels/RULES.md`), and, as before, on the maintainer-linked pairs against 5,000 random
  non-duplicate pairs (easy negatives: optimistic).
- sts_headlines: F1 of the duplicate decision at the configured thresholds (label 1: score >= 4,
  label 0: score <= 2; ambiguous pairs left out).
- loghub_2k: pairwise precision and recall of the engine's duplicate clusters against the
  "same template" (EventId) ground truth, per system and overall.

Usage: .venv/bin/python bench/dedup_quality.py [--workdir DIR] [--only gitbugs,sts,loghub]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from datasketch import MinHashLSH

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import select

from bench.common import DATA, ROOT, database, ingest, session
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import body_text, title_text
from curation.dedup.fingerprints import from_bytes
from curation.dedup.index import IndexedItem, SimilarityIndex
from curation.dedup.rules import DedupConfig, Verdict
from curation.dedup.similarity import rank_similar
from curation.dedup.sketch_table import identity_digest
from curation.dedup.text_kind import TextKind
from embedding.models import SentenceTransformerEncoder
from ingest.mapping import load_mapping
from ingest.normalisation import dedup_text
from schemas.common import utcnow
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.item import Item, ItemStatus


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return round(precision, 3), round(recall, 3), round(f1, 3)


class Loaded:
    """Items of one source with their sketches and vectors, as curation stored them."""

    def __init__(self, engine: Any, source_prefix: str, dedup: Deduplicator) -> None:
        with session(engine) as db:
            rows = db.exec(select(Item, ItemFingerprint).join(ItemFingerprint, ItemFingerprint.item_id == Item.id)).all()  # type: ignore[arg-type]
            vectors = {e.text_hash: np.frombuffer(e.vector, dtype=np.float32) for e in db.exec(select(Embedding))}
        self.items = {item.external_id: item for item, _ in rows if item.external_id.startswith(source_prefix)}
        self.sketch = {item.external_id: from_bytes(fp.minhash, dedup.recipe) for item, fp in rows if item.external_id.startswith(source_prefix)}
        self.vectors: dict[str, tuple[Any, Any]] = {}
        missing = [item for item, fp in rows if item.external_id.startswith(source_prefix) and fp.body_key is None]
        for item, fp in rows:
            if item.external_id.startswith(source_prefix) and fp.body_key is not None:
                self.vectors[item.external_id] = (vectors[fp.body_key], vectors[fp.title_key or ""])
        if missing:  # exact duplicates were never embedded; baselines need vectors for every item
            encoded = dedup.encoder.encode([body_text(i.title, i.input) for i in missing] + [title_text(i.title, i.input) for i in missing])
            for position, item in enumerate(missing):
                self.vectors[item.external_id] = (encoded[position], encoded[len(missing) + position])

    def jaccard(self, a: str, b: str) -> float:
        return float(self.sketch[a].jaccard(self.sketch[b]))

    def cosine(self, a: str, b: str) -> float:
        return float(self.vectors[a][0] @ self.vectors[b][0])



def curate(engine: Any, dedup: Deduplicator) -> float:
    started = time.perf_counter()
    with session(engine) as db:
        dedup.load(db)
        dedup.curate(db)
        db.commit()
    return time.perf_counter() - started


def pair_verdict(loaded: Loaded, dedup: Deduplicator, db: Any, later: str, earlier: str) -> Verdict:
    """The engine's own decision on one pair: `later` judged against an index holding only `earlier`."""
    a, b = loaded.items[later], loaded.items[earlier]
    assert b.id is not None
    index = SimilarityIndex(recipe=dedup.recipe, model_id=dedup.encoder.model_id, dim=dedup.encoder.dim, lsh_threshold=dedup._lsh_threshold())
    entry = IndexedItem(b.id, b.occurred_at.timestamp(), b.content_hash, identity_digest(b.identity_key), b.id, ItemStatus.UNIQUE.value, "b", "t")
    index.add([(entry, loaded.sketch[earlier], *loaded.vectors[earlier])])
    dedup.index = index
    return dedup.judge(a, loaded.sketch[later], *loaded.vectors[later], facts=dedup.facts(db), unreadable=dedup.unreadable_of(a.title, a.input))


def engine_says_duplicate(loaded: Loaded, dedup: Deduplicator, db: Any, a: str, b: str) -> bool:
    """The engine's decision on a pair, the later incident judged against the earlier."""
    later = _later(loaded.items[a], loaded.items[b])
    first, second = (a, b) if later is loaded.items[a] else (b, a)
    return pair_verdict(loaded, dedup, db, first, second).status != ItemStatus.UNIQUE.value


def embedding_only(loaded: Loaded, dedup: Deduplicator, a: str, b: str) -> bool:
    """The embedding baseline: the cosine alone, at the guard threshold for the text's length
    (the short-text one for every short text, machine-written or not)."""
    return loaded.cosine(a, b) >= baseline_threshold(dedup, _later(loaded.items[a], loaded.items[b]))


def baseline_threshold(dedup: Deduplicator, item: Item) -> float:
    kind = dedup.text_kind_of(item.title, item.input)
    return dedup.config.guard_embedding_threshold if kind == TextKind.LONG else dedup.config.guard_short_embedding_threshold


def cluster_roots(items: dict[str, Item]) -> dict[str, int]:
    """Each item's cluster: `duplicate_of` followed to the representative."""
    by_id = {item.id: item for item in items.values()}
    roots = {}
    for external_id, item in items.items():
        current, seen = item, set()
        while current.duplicate_of is not None and current.duplicate_of in by_id and current.id not in seen:
            seen.add(current.id)
            current = by_id[current.duplicate_of]
        roots[external_id] = current.id or 0
    return roots


def dev_set() -> list[tuple[str, str, str]]:
    """The hard development set: (later, earlier, label) of nearest-neighbour pairs labelled by reading."""
    pairs = [(row["later_id"], row["earlier_id"], row["label"]) for row in map(json.loads, (ROOT / "bench" / "labels" / "gitbugs_neighbours.jsonl").read_text().splitlines())]
    shared = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "near_pairs_labelled.jsonl").read_text().splitlines()]
    return pairs + [(row["a_id"], row["b_id"], row["label"]) for row in shared]


def read_labels() -> dict[frozenset[str], str]:
    """Every pair of GitBugs reports labelled by reading (the development set and the blind reading
    of the engine's decisions, `bench/labels/gitbugs_decisions_read.jsonl`), by pair of report ids."""
    read = [(row["later_id"], row["earlier_id"], row["label"]) for row in map(json.loads, (ROOT / "bench" / "labels" / "gitbugs_decisions_read.jsonl").read_text().splitlines())]
    return {frozenset((a, b)): label for a, b, label in [*dev_set(), *read]}


def _later(a: Item, b: Item) -> Item:
    """The item the engine judges against the other: the later incident (then the later stored)."""
    return b if (b.occurred_at, b.id or 0) >= (a.occurred_at, a.id or 0) else a


def gitbugs(workdir: Path, dedup: Deduplicator) -> dict[str, Any]:
    reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]
    pairs = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "dup_pairs.jsonl").read_text().splitlines()]
    engine = database(workdir / "gitbugs.db", fresh_decisions=True)
    ingest(engine, "hadoop", [{**r, "id": f"H{r['id']}"} for r in reports], load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    seconds = curate(engine, dedup)
    loaded = Loaded(engine, "H", dedup)
    created = {f"H{r['id']}": r["created"] for r in reports}
    queries = []
    for pair in pairs:
        a, b = f"H{pair['a_id']}", f"H{pair['b_id']}"
        earlier, later = (a, b) if created[a] <= created[b] else (b, a)
        queries.append((later, earlier))
    ids = list(loaded.items)
    times = np.array([loaded.items[i].occurred_at.timestamp() for i in ids])
    body = np.vstack([loaded.vectors[i][0] for i in ids])
    hits: dict[str, dict[int, int]] = {name: {1: 0, 5: 0, 10: 0} for name in ("minhash", "embedding", "combined")}
    with session(engine) as db:
        index = dedup.index
        assert index is not None
        for later, earlier in queries:
            item = loaded.items[later]
            before = item.occurred_at.timestamp()
            mask = times < before
            jac = np.array([loaded.jaccard(later, other) for other in ids])
            cos = body @ loaded.vectors[later][0]
            for name, scores in (("minhash", jac), ("embedding", cos)):
                ranked = [ids[i] for i in np.argsort(-np.where(mask, scores, -np.inf))[:10]]
                for k in hits[name]:
                    hits[name][k] += earlier in ranked[:k]
            similar = rank_similar(
                db,
                index,
                text=dedup_text(item.title, item.input),
                body=loaded.vectors[later][0],
                title=loaded.vectors[later][1],
                sketch=loaded.sketch[later],
                k=10,
                before=before,
                exclude=[item.id or 0],
            )
            ranked_ids = [s.item_id for s in similar]
            target = loaded.items[earlier].id
            for k in hits["combined"]:
                hits["combined"][k] += target in ranked_ids[:k]
    recall = {name: {f"recall@{k}": round(v / len(queries), 3) for k, v in counts.items()} for name, counts in hits.items()}
    # Decisions on labelled pairs against 5,000 random non-duplicate pairs.
    labelled = {frozenset(p) for p in queries}
    rng = random.Random(7)
    negatives: list[tuple[str, str]] = []
    while len(negatives) < 5000:
        a, b = rng.sample(ids, 2)
        if frozenset((a, b)) not in labelled:
            negatives.append((a, b))
    streamed_index = dedup.index
    decisions = {}
    config = dedup.config
    with session(engine) as db:
        rules = {
            "minhash": lambda a, b: loaded.jaccard(a, b) >= config.minhash_threshold,
            "embedding": lambda a, b: embedding_only(loaded, dedup, a, b),
            "combined": lambda a, b: engine_says_duplicate(loaded, dedup, db, a, b),
        }
        for name, rule in rules.items():
            tp = sum(rule(a, b) for a, b in queries)
            fp = sum(rule(a, b) for a, b in negatives)
            decisions[name] = dict(zip(("precision", "recall", "f1"), prf(tp, fp, len(queries) - tp), strict=True))
        # The hard development set: the engine's decision on each labelled nearest-neighbour pair.
        hard = {"same": [0, 0], "related": [0, 0], "different": [0, 0]}
        for later, earlier, label in dev_set():
            said = pair_verdict(loaded, dedup, db, f"H{later}", f"H{earlier}").status != ItemStatus.UNIQUE.value
            hard[label][0 if said else 1] += 1
        by_rule: dict[str, int] = defaultdict(int)
        newest: dict[int, DedupDecision] = {}
        for decision in db.exec(select(DedupDecision).order_by(DedupDecision.id)):  # type: ignore[arg-type]
            newest[decision.item_id] = decision
        labels = read_labels()
        external = {item.id: item.external_id.removeprefix("H") for item in loaded.items.values()}
        read: dict[str, list[float]] = defaultdict(list)
        for decision in newest.values():
            if decision.status != ItemStatus.UNIQUE.value:
                by_rule[f"{decision.details.get('rule', '?')}/{decision.stage}"] += 1
                label = labels.get(frozenset((external[decision.item_id], external.get(decision.matched_item_id or 0, ""))), "unread")
                read[label].append(float(decision.score or 0.0))
    dedup.index = streamed_index
    tp, fp, fn = hard["same"][0], hard["related"][0] + hard["different"][0], hard["same"][1]
    hard_set = dict(zip(("precision", "recall", "f1"), prf(tp, fp, fn), strict=True))
    hard_set.update(pairs=sum(sum(counts) for counts in hard.values()), merged={label: counts[0] for label, counts in hard.items()})
    # The engine's own streamed decisions: was the later report decided a duplicate of the earlier one's cluster?
    roots = cluster_roots(loaded.items)
    streamed = sum(roots[later] == roots[earlier] for later, earlier in queries)
    sizes: dict[int, int] = defaultdict(int)
    for root in roots.values():
        sizes[root] += 1
    duplicates = sum(1 for item in loaded.items.values() if item.status != ItemStatus.UNIQUE.value)
    by_id = {item.id: item for item in loaded.items.values()}
    largest = sorted(sizes.items(), key=lambda pair: -pair[1])[:5]
    return {
        "pairs": len(queries),
        "recall": recall,
        "hard_dev_set": hard_set,
        "decision_vs_5000_negatives": decisions,
        "streamed_same_cluster": round(streamed / len(queries), 3),
        # The pool's duplicate decisions, as read (labels by pair; "unread": no label yet, read them).
        "decisions_read": {
            "by_label": {label: len(scores) for label, scores in sorted(read.items())},
            "precision": round(len(read["same"]) / max(1, sum(len(scores) for label, scores in read.items() if label != "unread")), 3),
            "mean_score_by_label": {label: round(float(np.mean(scores)), 3) for label, scores in sorted(read.items()) if scores},
        },
        "pool": {
            "items": len(loaded.items),
            "marked_duplicate": duplicates,
            "share_marked_duplicate": round(duplicates / len(loaded.items), 4),
            "by_rule_and_stage": dict(sorted(by_rule.items())),
            "clusters_of_2_or_more": sum(1 for size in sizes.values() if size > 1),
            "largest_clusters": [{"size": size, "representative": by_id[root].title[:80]} for root, size in largest if size > 1],
        },
        "curate_seconds": round(seconds, 1),
    }


def sts(workdir: Path, dedup: Deduplicator) -> dict[str, Any]:
    rows = [json.loads(line) for line in (DATA / "sts_headlines" / "pairs.jsonl").read_text().splitlines()]
    labelled = [r for r in rows if r.get("label") is not None]
    engine = database(workdir / "sts.db", fresh_decisions=True)
    records = []
    for r in labelled:
        records.append({"external_id": f"S{r['id']}a", "occurred_at": "2014-01-01T00:00:00Z", "input": r["s1"]})
        records.append({"external_id": f"S{r['id']}b", "occurred_at": "2014-01-02T00:00:00Z", "input": r["s2"]})
    ingest(engine, "sts", records, {"metadata_object": "metadata", "tags": "tags"})
    with session(engine) as db:
        dedup.load(db)
        dedup.curate(db)
        db.commit()
    loaded = Loaded(engine, "S", dedup)
    config = dedup.config
    db = session(engine)
    rules = {
        "minhash": lambda a, b: loaded.jaccard(a, b) >= config.minhash_threshold,
        "embedding": lambda a, b: embedding_only(loaded, dedup, a, b),
        "combined": lambda a, b: engine_says_duplicate(loaded, dedup, db, a, b),
    }
    result: dict[str, Any] = {"pairs": len(labelled), "positives": sum(r["label"] == 1 for r in labelled)}
    # End to end: the two headlines of a near-identical pair (gold >= 4.8) end as one item after
    # curating every headline in order, whatever else each was matched with on the way.
    roots = cluster_roots(loaded.items)
    identical = [r for r in labelled if r["score"] >= 4.8]
    merged = [r for r in identical if roots[f"S{r['id']}a"] == roots[f"S{r['id']}b"]]
    result["near_identical_merged"] = {"pairs": len(identical), "merged": len(merged), "share": len(merged) / max(1, len(identical))}
    for name, rule in rules.items():
        tp = fp = fn = 0
        for r in labelled:
            said = rule(f"S{r['id']}a", f"S{r['id']}b")
            tp += said and r["label"] == 1
            fp += said and r["label"] == 0
            fn += (not said) and r["label"] == 1
        result[name] = dict(zip(("precision", "recall", "f1"), prf(tp, fp, fn), strict=True))
    return result


def pair_scores(clusters: Iterable[int], truth: Iterable[str]) -> tuple[int, int, int]:
    """(true positive, predicted, actual) same-cluster pair counts."""
    predicted_groups: dict[int, list[int]] = defaultdict(list)
    truth_list = list(truth)
    for position, cluster in enumerate(clusters):
        predicted_groups[cluster].append(position)
    predicted = sum(len(g) * (len(g) - 1) // 2 for g in predicted_groups.values())
    actual_groups: dict[str, int] = defaultdict(int)
    for label in truth_list:
        actual_groups[label] += 1
    actual = sum(n * (n - 1) // 2 for n in actual_groups.values())
    tp = 0
    for group in predicted_groups.values():
        counts: dict[str, int] = defaultdict(int)
        for position in group:
            counts[truth_list[position]] += 1
        tp += sum(n * (n - 1) // 2 for n in counts.values())
    return tp, predicted, actual


def union_find_clusters(n: int, edges: Iterable[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    return [find(x) for x in range(n)]


def minhash_edges(sketches: list[Any], threshold: float) -> list[tuple[int, int]]:
    """Pairs whose estimated Jaccard reaches `threshold`, found through an LSH (the MinHash-only baseline)."""
    lsh = MinHashLSH(threshold=max(0.05, threshold - 0.1), num_perm=len(sketches[0]))
    with lsh.insertion_session() as inserting:
        for position, sketch in enumerate(sketches):
            inserting.insert(position, sketch)
    edges = []
    for position, sketch in enumerate(sketches):
        for other in lsh.query(sketch):
            if other > position and sketch.jaccard(sketches[other]) >= threshold:
                edges.append((position, int(other)))
    return edges


def loghub(workdir: Path, dedup: Deduplicator) -> dict[str, Any]:
    engine = database(workdir / "loghub.db", fresh_decisions=True)
    systems = sorted(p.name for p in (DATA / "loghub_2k").iterdir() if p.is_dir())
    totals = {name: [0, 0, 0] for name in ("minhash", "embedding", "combined")}
    per_system: dict[str, Any] = {}
    for system in systems:
        rows = list(csv.DictReader((DATA / "loghub_2k" / system / f"{system}_2k.log_structured.csv").open(encoding="utf-8")))
        records = [{"external_id": f"L{system}-{r['LineId']}", "occurred_at": 1_600_000_000 + int(r["LineId"]), "input": r["Content"]} for r in rows]
        ingest(engine, f"loghub-{system.lower()}", records, {"metadata_object": "metadata", "tags": "tags"})
    with session(engine) as db:
        dedup.load(db)
        dedup.curate(db)
        db.commit()
    for system in systems:
        rows = list(csv.DictReader((DATA / "loghub_2k" / system / f"{system}_2k.log_structured.csv").open(encoding="utf-8")))
        loaded = Loaded(engine, f"L{system}-", dedup)
        ext = [f"L{system}-{r['LineId']}" for r in rows]
        truth = [r["EventId"] for r in rows]
        cluster = cluster_roots(loaded.items)
        roots = [cluster[e] for e in ext]
        config = dedup.config
        body = np.vstack([loaded.vectors[e][0] for e in ext])
        cos = body @ body.T
        # Lines are in incident order: row j is the later of (i, j), whose threshold applies.
        later_threshold = np.array([baseline_threshold(dedup, loaded.items[e]) for e in ext], dtype=np.float32)
        emb_edges = [(i, j) for i, j in zip(*np.nonzero(np.triu(cos >= later_threshold[None, :], 1)), strict=True)]
        mh_edges = minhash_edges([loaded.sketch[e] for e in ext], config.minhash_threshold)
        results = {
            "combined": pair_scores(roots, truth),
            "minhash": pair_scores(union_find_clusters(len(ext), mh_edges), truth),
            "embedding": pair_scores(union_find_clusters(len(ext), emb_edges), truth),
        }
        per_system[system] = {}
        for name, (tp, predicted, actual) in results.items():
            totals[name] = [totals[name][0] + tp, totals[name][1] + predicted, totals[name][2] + actual]
            p, r, _ = prf(tp, predicted - tp, actual - tp)
            per_system[system][name] = {"precision": p, "recall": r}
    overall = {name: dict(zip(("precision", "recall", "f1"), prf(tp, predicted - tp, actual - tp), strict=True)) for name, (tp, predicted, actual) in totals.items()}
    return {"overall": overall, "per_system": per_system}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None, help="Keep databases (and cached embeddings) here between runs.")
    parser.add_argument("--only", default="gitbugs,sts,loghub")
    defaults = DedupConfig()
    parser.add_argument("--minhash-threshold", type=float, default=defaults.minhash_threshold)
    parser.add_argument("--guard-threshold", type=float, default=defaults.guard_embedding_threshold)
    parser.add_argument("--guard-short-threshold", type=float, default=defaults.guard_short_embedding_threshold)
    parser.add_argument("--fresh-threshold", type=float, default=defaults.fresh_embedding_threshold)
    parser.add_argument("--fresh-short-threshold", type=float, default=defaults.fresh_short_embedding_threshold)
    parser.add_argument("--fresh-title-threshold", type=float, default=defaults.fresh_title_threshold)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="goldenset-bench-"))
    encoder = SentenceTransformerEncoder()
    config = DedupConfig(
        minhash_threshold=args.minhash_threshold,
        guard_embedding_threshold=args.guard_threshold,
        guard_short_embedding_threshold=args.guard_short_threshold,
        fresh_embedding_threshold=args.fresh_threshold,
        fresh_short_embedding_threshold=args.fresh_short_threshold,
        fresh_title_threshold=args.fresh_title_threshold,
    )
    thresholds = ", ".join(f"{field.name.removesuffix('_threshold')} {getattr(config, field.name)}" for field in dataclasses.fields(config) if field.name.endswith("_threshold"))
    print(f"model {encoder.model_id}; thresholds: {thresholds}; workdir {workdir}")
    for name in args.only.split(","):
        started = time.perf_counter()
        result = {"gitbugs": gitbugs, "sts": sts, "loghub": loghub}[name](workdir, Deduplicator(clock=utcnow, encoder=encoder, config=config))
        print(json.dumps({name: result, "seconds": round(time.perf_counter() - started, 1)}, indent=1))


if __name__ == "__main__":
    main()
