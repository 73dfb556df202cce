"""Near groups and the split on a real pool: how many items a group seal moves to the other side
compared with the per-item keyed hash, how large groups grow, what a release costs with groups,
and the dev-sealed near pairs left (the goal: none). Prints figures; not part of the test suite.

A pool is ingested in incident order and curated (the bundled all-MiniLM-L6-v2, or the tests'
hashing encoder), then released twice by one eval taking everything (auto approval, 20% sealed):
once at `--cut` with the items before it, once after every incident with the rest, so that
retellings of released items arrive after their originals were released.

Usage: PYTHONPATH=. .venv/bin/python bench/near_groups.py [--pool gitbugs|kev] [--encoder model|hashing] [--count N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlmodel import Session, col, select

from bench.common import DATA, ROOT, database, ingest
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Encoder
from curation.dedup.rules import DedupConfig
from curation.releases.groups import near_groups
from curation.releases.sealing import is_sealed
from curation.releases.visibility import sealed_item_ids
from ingest.mapping import load_mapping
from schemas.common import utcnow
from schemas.dedup import NearLink
from schemas.evals import EvalCreate, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.release import Release
from service.core.db import write_session
from service.evals.definitions import create_eval, seal_keys
from service.evals.refresh import refresh_eval

SECRET = "bench-secret-key-" + "x" * 40
KEY = b"near-groups-bench-key-0123456789"
FRACTION = 0.2


def _pool(name: str, count: int) -> tuple[list[dict[str, Any]], Path, str]:
    if name == "gitbugs":
        reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]
        reports.sort(key=lambda report: report["created"])
        return reports[:count], ROOT / "examples/mappings/hadoop_jira.yaml", "created"
    records = json.loads((DATA / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())["vulnerabilities"]
    records.sort(key=lambda record: record["dateAdded"])
    return records[:count], ROOT / "examples/mappings/cisa_kev.yaml", "dateAdded"


def _encoder(name: str) -> Encoder:
    if name == "hashing":
        from tests.eval_support import HashingEncoder

        return HashingEncoder()
    from embedding.models import SentenceTransformerEncoder

    return SentenceTransformerEncoder()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", choices=("gitbugs", "kev"), default="gitbugs")
    parser.add_argument("--encoder", choices=("model", "hashing"), default="model")
    parser.add_argument("--count", type=int, default=2503)
    parser.add_argument("--cut", default=None, help="Date of the first release (default: the median incident).")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="goldenset-near-"))
    records, mapping, date_field = _pool(args.pool, args.count)
    engine = database(workdir / f"{args.pool}-{args.encoder}-{args.count}.db", fresh_decisions=True)
    with engine.begin() as connection:
        for table in ("release_item", "eval_item", "release", "audit_event", "eval", "near_link"):
            connection.exec_driver_sql(f"DELETE FROM {table}")
    ingest(engine, args.pool, records, load_mapping(mapping))
    started = time.perf_counter()
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=_encoder(args.encoder), config=DedupConfig()).curate(session)
        session.commit()
    curate_seconds = time.perf_counter() - started

    with write_session(engine) as session:
        data = EvalCreate(name="bench", sources=[args.pool], approval_policy="auto", max_age_days=None, sealed_fraction=FRACTION, target_size=1_000_000)
        create_eval(session=session, data=data, secret_key=SECRET, actor="bench", key=KEY)
        session.commit()
    dates = sorted(record[date_field] for record in records)
    cut = datetime.fromisoformat(args.cut or dates[len(dates) // 2][:10]).replace(tzinfo=UTC)
    end = datetime.fromisoformat(dates[-1][:10]).replace(tzinfo=UTC).replace(day=1)
    end = end.replace(year=end.year + (end.month == 12), month=end.month % 12 + 1)
    timings = []
    for at in (cut, end):
        started = time.perf_counter()
        refresh_eval(engine, name="bench", at=at, secret_key=SECRET, actor="bench", allow_future=True)
        timings.append(time.perf_counter() - started)

    with Session(engine) as session:
        statuses = Counter(session.exec(select(Item.status)).all())
        links = session.exec(select(NearLink.stage)).all()
        members = dict(session.exec(select(EvalItem.item_id, EvalItem.split)).all())
        releases = session.exec(select(Release).order_by(col(Release.number))).all()
        groups = near_groups(session, list(members))
        started = time.perf_counter()
        sealed_now = sealed_item_ids(session=session, item_ids=list(members), seal_key_of=seal_keys(secret_key=SECRET))
        check_seconds = time.perf_counter() - started
        pending = [item_id for item_id in session.exec(select(Item.id).where(col(Item.status) == ItemStatus.UNIQUE.value)).all() if item_id is not None][:50]
        started = time.perf_counter()
        for _ in range(20):
            sealed_item_ids(session=session, item_ids=pending, seal_key_of=seal_keys(secret_key=SECRET))
        page_ms = (time.perf_counter() - started) / 20 * 1000
    distinct = {frozenset(group) for item_id, group in groups.items() if item_id in members}
    sizes = Counter(min(len([m for m in group if m in members]), 10) for group in distinct)
    in_groups = sum(1 for item_id in members if len([m for m in groups[item_id] if m in members]) > 1)
    per_item = {item_id for item_id in members if is_sealed(KEY, item_id, FRACTION)}
    sealed = {item_id for item_id, split in members.items() if split == Split.SEALED.value}
    moved = len(per_item ^ sealed)
    pairs = [release.cross_split_pairs for release in releases]
    per_item_pairs = 0
    with Session(engine) as session:
        for a, b in session.exec(select(NearLink.item_id, NearLink.other_id)).all():
            if a in members and b in members and ((a in per_item) != (b in per_item)):
                per_item_pairs += 1
    print(f"pool {args.pool}, {len(records)} records, encoder {args.encoder}; curated in {curate_seconds:.1f} s; statuses {dict(statuses)}")
    print(f"near links: {len(links)} ({dict(Counter(links))})")
    print(f"released items: {len(members)}; in a group of 2 or more released items: {in_groups} ({in_groups / max(len(members), 1):.1%})")
    print(f"groups by released size (10 = 10 or more): {dict(sorted(sizes.items()))}; largest: {max((len(g) for g in distinct), default=0)}")
    print(f"sealed: {len(sealed)} ({len(sealed) / max(len(members), 1):.1%}); per-item hash would seal {len(per_item)} ({len(per_item) / max(len(members), 1):.1%})")
    print(f"side changed against the per-item hash: {moved} of {len(members)} ({moved / max(len(members), 1):.2%})")
    print(f"dev-sealed near pairs: per-item hash {per_item_pairs}; with groups, recorded by the releases {[len(p or []) for p in pairs]}")
    sizes_out = [release.dev_count + release.sealed_count for release in releases]
    print(f"release 1 at {cut.date()} ({sizes_out[0]} items): {timings[0]:.2f} s; release 2 ({sizes_out[1]} items): {timings[1]:.2f} s")
    print(f"sealed check of all {len(members)} released items: {check_seconds * 1000:.0f} ms; of a page of 50 waiting items: {page_ms:.1f} ms")
    assert sealed_now == sealed


if __name__ == "__main__":
    main()
