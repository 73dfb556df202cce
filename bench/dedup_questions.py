"""How many pairs curation asks a curator about on the Hadoop pool, and how many of them are labelled.

Curates ../shared/data/gitbugs_hadoop/reports.jsonl (2,503 reports, oldest incident first) through
the engine with the shipped same-incident judge, and prints:

1. a sweep: curated once with every question asked (`confirm_threshold` 1, `ask_threshold` 0),
   the share of the pool's items each pair of thresholds would ask about (paraphrase merges the
   judge does not confirm, path a; unique items near an earlier one the judge finds likely the
   same, path b), a little optimistic for path a since a merge asked stays unique meanwhile;
2. the run at the thresholds given (default: `DedupConfig`'s): items asked by path, the share,
   P's spread, and how many asked pairs the labelled files name: `near_pairs_labelled.jsonl`
   (read by hand: same, related, different) and `dup_pairs.jsonl` (maintainer-linked duplicates).

The database is kept in --workdir (default var/bench-questions), so a second run encodes nothing
(the first encodes every report: 2-4 minutes on 2 cores; run it under `nice`).

    PYTHONPATH=. .venv/bin/python bench/dedup_questions.py [--confirm P] [--ask P] [--no-sweep]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import col, select

from bench.common import DATA, ROOT, database, ingest, session
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.rules import DedupConfig
from embedding.models import SentenceTransformerEncoder
from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.dedup_questions import DedupQuestion
from schemas.item import Item

POOL = DATA / "gitbugs_hadoop"
CONFIRM_GRID = (0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
ASK_GRID = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
TARGET_SHARE = 0.05


def curate(engine: object, config: DedupConfig, encoder: SentenceTransformerEncoder) -> tuple[list[DedupQuestion], dict[int, str], int, float]:
    """Decide the pool afresh under `config`: the questions asked, external ids by item id, items decided and seconds."""
    with engine.begin() as connection:  # type: ignore[attr-defined]
        for table in ("dedup_question", "near_link", "dedup_decision", "item_fingerprint"):
            connection.exec_driver_sql(f"DELETE FROM {table}")
        connection.exec_driver_sql("UPDATE item SET status = 'candidate', duplicate_of = NULL")
    started = time.perf_counter()
    with session(engine) as db:  # type: ignore[arg-type]
        dedup = Deduplicator(clock=utcnow, encoder=encoder, config=config)
        dedup.load(db)
        summary = dedup.curate(db)
        db.commit()
    seconds = time.perf_counter() - started
    with session(engine) as db:  # type: ignore[arg-type]
        questions = list(db.exec(select(DedupQuestion).order_by(col(DedupQuestion.id))))
        external = {item_id: external_id for item_id, external_id in db.exec(select(Item.id, Item.external_id)) if item_id is not None}
    return questions, external, summary.decided, seconds


def labels() -> tuple[dict[frozenset[str], str], set[frozenset[str]]]:
    """Pairs read by hand (label by pair of report ids) and maintainer-linked duplicate pairs."""
    read = {frozenset((row["a_id"], row["b_id"])): row["label"] for row in map(json.loads, (POOL / "near_pairs_labelled.jsonl").read_text().splitlines())}
    linked = {frozenset((row["a_id"], row["b_id"])) for row in map(json.loads, (POOL / "dup_pairs.jsonl").read_text().splitlines())}
    return read, linked


def sweep(questions: list[DedupQuestion], external: dict[int, str], items: int) -> None:
    read, linked = labels()

    def same(question: DedupQuestion) -> str | None:
        """`same` or `not same` when the pair is labelled (read by hand, or linked by maintainers), else None."""
        pair = frozenset((external[question.item_id], external[question.other_id]))
        if pair in linked or read.get(pair) == "same":
            return "same"
        return "not same" if pair in read else None

    merges = np.array([q.p_same for q in questions if q.rules_outcome == "duplicate"])
    near = np.array([q.p_same for q in questions if q.rules_outcome == "unique"])
    print(f"\nsweep ({items} items; every question asked: {len(merges)} paraphrase merges weighed, {len(near)} unique items near an earlier one)")
    print("share of items asked, by confirm threshold (rows) and ask threshold (columns):")
    print("confirm\\ask " + " ".join(f"{a:>6}" for a in ASK_GRID))
    for confirm in CONFIRM_GRID:
        row = [(int((merges < confirm).sum()) + int((near >= ask).sum())) / items for ask in ASK_GRID]
        print(f"{confirm:>11} " + " ".join(f"{share:>6.1%}" for share in row))
    for path, grid, below in (("duplicate", CONFIRM_GRID, True), ("unique", ASK_GRID, False)):
        print(f"path {'a (asked below the confirm threshold)' if below else 'b (asked at or above the ask threshold)'}: threshold -> asked, labelled same / not same")
        for threshold in grid:
            asked = [q for q in questions if q.rules_outcome == path and ((q.p_same < threshold) if below else (q.p_same >= threshold))]
            found = Counter(same(q) for q in asked)
            print(f"  {threshold:>5}: {len(asked):>4} asked, {found['same']} same / {found['not same']} not same")
    for name, values in (("paraphrase merges", merges), ("unique near pairs", near)):
        if len(values):
            quantiles = ", ".join(f"p{q}: {np.quantile(values, q / 100):.3f}" for q in (5, 25, 50, 75, 95))
            print(f"P of {name}: {quantiles}")


def report(questions: list[DedupQuestion], external: dict[int, str], items: int, seconds: float, config: DedupConfig) -> None:
    read, linked = labels()
    by_path = Counter(q.rules_outcome for q in questions)
    print(f"\nthresholds: confirm {config.confirm_threshold}, ask {config.ask_threshold}; curated {items} items in {seconds:.0f} s")
    share = len(questions) / items if items else 0.0
    print(
        f"asked {len(questions)} of {items} items ({share:.1%}; target at most {TARGET_SHARE:.0%}): "
        f"{by_path['duplicate']} paraphrase merges the judge did not confirm (path a), {by_path['unique']} unique items near a likely same earlier one (path b)"
    )
    if questions:
        values = np.array([q.p_same for q in questions])
        print(f"P of the asked pairs: min {values.min():.3f}, median {np.median(values):.3f}, max {values.max():.3f}")
    for path in ("duplicate", "unique"):
        asked = [q for q in questions if q.rules_outcome == path]
        pairs = [frozenset((external[q.item_id], external[q.other_id])) for q in asked]
        found = Counter(read[pair] for pair in pairs if pair in read)
        in_dups = sum(pair in linked for pair in pairs)
        print(
            f"path {'a' if path == 'duplicate' else 'b'} ({len(asked)} asked): in near_pairs_labelled {sum(found.values())} "
            f"({', '.join(f'{label} {count}' for label, count in sorted(found.items())) or 'none'}); in dup_pairs {in_dups}"
        )
    same_read = {pair for pair, label in read.items() if label == "same"}
    asked_pairs = {frozenset((external[q.item_id], external[q.other_id])) for q in questions}
    print(f"labelled same pairs asked: {len(asked_pairs & same_read)} of {len(same_read)} read as same; {len(asked_pairs & linked)} of {len(linked)} maintainer-linked")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = DedupConfig()
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench-questions")
    parser.add_argument("--confirm", type=float, default=defaults.confirm_threshold, help="confirm_threshold of the final run")
    parser.add_argument("--ask", type=float, default=defaults.ask_threshold, help="ask_threshold of the final run")
    parser.add_argument("--no-sweep", action="store_true", help="only the run at the given thresholds")
    parser.add_argument("--sweep-only", action="store_true", help="only the sweep")
    args = parser.parse_args()
    reports = [json.loads(line) for line in (POOL / "reports.jsonl").read_text().splitlines()]
    engine = database(args.workdir / "hadoop.db")
    ingest(engine, "hadoop", reports, load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml"))
    encoder = SentenceTransformerEncoder()
    print(f"model {encoder.model_id}; {len(reports)} reports; workdir {args.workdir}")
    if not args.no_sweep:
        questions, external, items, seconds = curate(engine, DedupConfig(confirm_threshold=1.0, ask_threshold=0.0), encoder)
        print(f"sweep run: {seconds:.0f} s")
        sweep(questions, external, items)
        if args.sweep_only:
            return
    config = DedupConfig(confirm_threshold=args.confirm, ask_threshold=args.ask)
    report(*curate(engine, config, encoder), config)


if __name__ == "__main__":
    main()
