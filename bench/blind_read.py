"""Blind reading of the engine's duplicate decisions on pools it was never tuned on.

For a pool (`firefox_dups`: Mozilla Firefox Bugzilla reports; `stsb_ru`: Russian STS-B sentences,
each sentence of a pair a record of its own, s1 before s2), the records are ingested as incidents,
oldest first (Firefox has no dates: bug id order, with synthetic increasing dates; the sentences
in file order), into a fresh SQLite database under var/blind/, and curated with the engine's
defaults (all-MiniLM-L6-v2, offline; the shipped judge asking a curator about doubtful pairs).
Then a reading sample is drawn (`random.Random(f"blind-{pool}")`):

- every item the engine marked duplicate, with the item it matched (40 drawn when there are more);
- as many items it neither merged nor asked about, each with its nearest earlier item by body
  cosine (the vectors curation stored; exact copies, never encoded, are encoded here);
- every pair curation asked a curator about (table `dedup_question`; 40 drawn when there are
  more), on top of the 80 merged and unmerged pairs.

The pairs are shuffled and written *without any decision* to `var/blind/<pool>_to_read.jsonl`
(pair id, both titles, the first 1,500 characters of both texts); the decisions go separately to
`var/blind/<pool>_decisions.json`. The pairs are then read by the rule of `bench/labels/RULES.md`
without opening the decisions, into `bench/labels/<pool>_decisions_read.jsonl`; `--join` adds the
decisions to those label lines, and `--report` prints the precision of the merges by stage, the
`same` pairs left unmerged and how the asked pairs read, from the label files alone.

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python bench/blind_read.py firefox_dups stsb_ru
    .venv/bin/python bench/blind_read.py --join firefox_dups stsb_ru
    .venv/bin/python bench/blind_read.py --report
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import col, select

from bench.common import ROOT, database, ingest, session
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import body_text
from embedding.models import SentenceTransformerEncoder
from schemas.common import utcnow
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.dedup_questions import DedupQuestion
from schemas.item import Item, ItemStatus

POOLS = ROOT / "bench" / "pools"
LABELS = ROOT / "bench" / "labels"
OUT = ROOT / "var" / "blind"
MERGES = 40
ASKED = 40
TEXT = 1500
START = datetime(2020, 1, 1, tzinfo=UTC)
MAPPINGS: dict[str, dict[str, Any]] = {
    "firefox_dups": {
        "format": "jsonl",
        "external_id": "id",
        "occurred_at": "occurred_at",
        "title": "summary",
        "input": "{{ summary }}\n\n{{ description }}",
        "required": ["summary"],
    },
    "stsb_ru": {"format": "jsonl", "external_id": "id", "occurred_at": "occurred_at", "input": "text"},
}


def records(pool: str) -> list[dict[str, Any]]:
    """The pool's records, oldest incident first, each with a synthetic increasing date."""
    lines = [json.loads(line) for line in (POOLS / pool / ("reports.jsonl" if pool == "firefox_dups" else "pairs.jsonl")).read_text(encoding="utf-8").splitlines()]
    if pool == "firefox_dups":
        rows = [{**row, "id": str(row["id"])} for row in sorted(lines, key=lambda row: int(row["id"]))]
    else:
        rows = [{"id": f"{row['id']}/{part}", "text": row[part]} for row in lines for part in ("s1", "s2")]
    return [{**row, "occurred_at": (START + timedelta(minutes=position)).isoformat()} for position, row in enumerate(rows)]


def curate(pool: str, db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    engine = database(db_path)
    ingest(engine, pool, records(pool), MAPPINGS[pool])
    with session(engine) as db:
        dedup = Deduplicator(clock=utcnow, encoder=SentenceTransformerEncoder())
        dedup.load(db)
        summary = dedup.curate(db)
        db.commit()
    print(f"{pool}: curated {summary.decided} items, asked {summary.asked}")


def body_vectors(engine: Any, items: list[Item]) -> dict[int, np.ndarray]:
    """Each item's body vector as curation stored it (exact copies, never encoded, encoded here)."""
    with session(engine) as db:
        keys = {fp.item_id: fp.body_key for fp in db.exec(select(ItemFingerprint))}
        stored = {e.text_hash: np.frombuffer(e.vector, dtype=np.float32) for e in db.exec(select(Embedding))}
    vectors = {}
    for item in items:
        key = keys.get(item.id or 0)
        if item.id is not None and key is not None and key in stored:
            vectors[item.id] = stored[key]
    missing = [item for item in items if item.id not in vectors]
    if missing:
        encoded = SentenceTransformerEncoder().encode([body_text(item.title, item.input) for item in missing])
        vectors.update({item.id: np.asarray(encoded[position], dtype=np.float32) for position, item in enumerate(missing) if item.id is not None})
    return vectors


def sample(pool: str, db_path: Path) -> None:
    engine = database(db_path)
    with session(engine) as db:
        items = sorted(db.exec(select(Item)), key=lambda item: (item.occurred_at, item.id or 0))
        newest: dict[int, DedupDecision] = {}
        for decision in db.exec(select(DedupDecision).order_by(col(DedupDecision.id))):
            newest[decision.item_id] = decision
        questions = list(db.exec(select(DedupQuestion).order_by(col(DedupQuestion.id))))
    by_id = {item.id: item for item in items}
    rank = {item.id: position for position, item in enumerate(items)}
    rng = random.Random(f"blind-{pool}")

    def ordered(a: int, b: int) -> tuple[int, int]:
        """(later, earlier) by incident order."""
        return (a, b) if rank[a] > rank[b] else (b, a)

    pairs: list[dict[str, Any]] = []
    merges = [d for d in newest.values() if d.status != ItemStatus.UNIQUE.value and d.matched_item_id is not None]
    merged_total = len(merges)
    if len(merges) > MERGES:
        merges = rng.sample(merges, MERGES)
    for decision in merges:
        assert decision.matched_item_id is not None
        later, earlier = ordered(decision.item_id, decision.matched_item_id)
        details = decision.details or {}
        pairs.append(
            {
                "later": later,
                "earlier": earlier,
                "kind": "merged",
                "stage": decision.stage,
                "rule": details.get("rule"),
                "score": round(float(decision.score), 4) if decision.score is not None else None,
                "margin": details.get("margin"),
                "swapped": decision.item_id != later,
            }
        )
    taken = {frozenset((p["later"], p["earlier"])) for p in pairs}
    asked_items = {q.item_id for q in questions}
    asked = []
    for question in questions:
        later, earlier = ordered(question.item_id, question.other_id)
        if frozenset((later, earlier)) in taken:
            continue
        evidence = question.evidence or {}
        asked.append(
            {
                "later": later,
                "earlier": earlier,
                "kind": "asked",
                "stage": evidence.get("stage"),
                "rule": evidence.get("rule"),
                "score": evidence.get("score"),
                "margin": evidence.get("margin"),
                "p_same": round(question.p_same, 4),
                "rules_outcome": question.rules_outcome,
                "state": question.state,
            }
        )
    asked_total = len(asked)
    if len(asked) > ASKED:
        asked = rng.sample(asked, ASKED)
    # Unmerged items, each with its nearest earlier item by body cosine.
    vectors = body_vectors(engine, items)
    matrix = np.vstack([vectors[item.id] for item in items if item.id is not None])
    duplicates = {d.item_id for d in newest.values() if d.status != ItemStatus.UNIQUE.value}
    candidates = [item for item in items[1:] if item.id not in duplicates and item.id not in asked_items]
    unmerged: list[dict[str, Any]] = []
    for item in rng.sample(candidates, len(candidates)):
        if len(unmerged) == len(pairs):
            break
        position = rank[item.id]
        cosines = matrix[:position] @ matrix[position]
        other = items[int(np.argmax(cosines))]
        assert item.id is not None and other.id is not None
        if frozenset((item.id, other.id)) in taken:
            continue
        taken.add(frozenset((item.id, other.id)))
        said = newest.get(item.id)
        unmerged.append(
            {
                "later": item.id,
                "earlier": other.id,
                "kind": "unmerged",
                "stage": said.stage if said else None,
                "rule": (said.details or {}).get("rule") if said else None,
                "score": round(float(cosines.max()), 4),
                "margin": None,
            }
        )
    pairs = pairs + asked + unmerged
    rng.shuffle(pairs)
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"{pool}_to_read.jsonl").open("w", encoding="utf-8") as out:
        for number, pair in enumerate(pairs, 1):
            a, b = by_id[pair["later"]], by_id[pair["earlier"]]
            row = {"pair": number, "later_id": a.external_id, "earlier_id": b.external_id, "later_title": a.title, "earlier_title": b.title}
            out.write(json.dumps({**row, "later_text": a.input[:TEXT], "earlier_text": b.input[:TEXT]}, ensure_ascii=False) + "\n")
    decisions = [
        {"pair": number, "later_id": by_id[p["later"]].external_id, "earlier_id": by_id[p["earlier"]].external_id, **{k: v for k, v in p.items() if k not in ("later", "earlier")}}
        for number, p in enumerate(pairs, 1)
    ]
    summary = {"items": len(items), "merged": merged_total, "asked": asked_total, "sample": dict(Counter(p["kind"] for p in pairs))}
    (OUT / f"{pool}_decisions.json").write_text(json.dumps({"pool": pool, "summary": summary, "pairs": decisions}, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"{pool}: {json.dumps(summary)}")


def join(pool: str) -> None:
    """Add the decisions (kind, stage, rule, score, margin, both titles) to the labels read blind."""
    path = LABELS / f"{pool}_decisions_read.jsonl"
    decided = {(p["later_id"], p["earlier_id"]): p for p in json.loads((OUT / f"{pool}_decisions.json").read_text(encoding="utf-8"))["pairs"]}
    titles = {(p["later_id"], p["earlier_id"]): p for p in map(json.loads, (OUT / f"{pool}_to_read.jsonl").read_text(encoding="utf-8").splitlines())}
    rows = []
    for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
        key = (row["later_id"], row["earlier_id"])
        decision, text = decided[key], titles[key]
        out = {"later_id": row["later_id"], "earlier_id": row["earlier_id"], "label": row["label"], "why": row["why"]}
        out.update(merged=decision["kind"] == "merged", asked=decision["kind"] == "asked")
        out.update({name: decision.get(name) for name in ("stage", "rule", "score", "margin")})
        if decision["kind"] == "asked":
            out.update(p_same=decision["p_same"], rules_outcome=decision["rules_outcome"])
        out.update(later_title=text["later_title"], earlier_title=text["earlier_title"])
        rows.append(out)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{pool}: {len(rows)} labels joined")


def report(pools: list[str]) -> None:
    """Per pool: merges read and their precision by stage; `same` pairs left unmerged; asked pairs."""
    for pool in pools:
        path = LABELS / f"{pool}_decisions_read.jsonl"
        if not path.exists():
            continue
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        merged = [r for r in rows if r["merged"]]
        unmerged = [r for r in rows if not r["merged"] and not r["asked"]]
        asked = [r for r in rows if r["asked"]]
        same = sum(r["label"] == "same" for r in merged)
        print(f"{pool}: {len(rows)} pairs read, {dict(sorted(Counter(r['label'] for r in rows).items()))}")
        print(f"  merges read {len(merged)}: precision {same}/{len(merged)} = {same / max(1, len(merged)):.2f}")
        stages: dict[str, list[str]] = defaultdict(list)
        for r in merged:
            stages[f"{r['stage']}/{r['rule']}"].append(r["label"])
        for stage, read in sorted(stages.items()):
            counts = Counter(read)
            print(f"    {stage:22} {counts['same']}/{len(read)} same ({counts['related']} related, {counts['different']} different)")
        missed = sum(r["label"] == "same" for r in unmerged)
        print(f"  unmerged nearest earlier read {len(unmerged)}: same (missed) {missed}, {dict(sorted(Counter(r['label'] for r in unmerged).items()))}")
        print(f"  asked read {len(asked)}: same {sum(r['label'] == 'same' for r in asked)}, {dict(sorted(Counter(r['label'] for r in asked).items()))}")
        for outcome in sorted({r["rules_outcome"] for r in asked}):
            outcomes = Counter(r["label"] for r in asked if r["rules_outcome"] == outcome)
            print(f"    rules said {outcome:9} {outcomes['same']}/{outcomes.total()} same")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pools", nargs="*", metavar="pool", help="firefox_dups, stsb_ru (default: both)")
    parser.add_argument("--sample-only", action="store_true", help="Draw the sample from the databases already curated.")
    parser.add_argument("--join", action="store_true", help="Add the decisions to the label files read blind.")
    parser.add_argument("--report", action="store_true", help="Print the figures from the label files.")
    args = parser.parse_args()
    if unknown := set(args.pools) - set(MAPPINGS):
        parser.error(f"unknown pool {', '.join(sorted(unknown))}")
    args.pools = args.pools or list(MAPPINGS)
    if args.report:
        report(args.pools)
        return
    for pool in args.pools:
        if args.join:
            join(pool)
            continue
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        db_path = OUT / f"{pool}.db"
        if not args.sample_only:
            curate(pool, db_path)
        sample(pool, db_path)


if __name__ == "__main__":
    main()
