"""Server time of the web UI's review queue page, `GET /ui/evals/{name}/review`, on a pool of
100,000 items. Prints figures and whether the page meets its requirement (under 300 ms server
time, median and p95); not a test.

The pool: items made from the real texts of ../shared/data (Hadoop Jira reports and CISA KEV
records), cycled with variations (other sentences, other products, other dates) so that their
content hashes differ, mapped by the example mappings, in four sources (three taken by an eval
with a 20% sealed slice, one not). Every item has a stored fingerprint and vectors of a cheap
deterministic hashing encoder, so the page's nearest-neighbours section searches an index of the
whole pool:

- a random `--curated` subset (default 10,000) is decided by the real `Deduplicator.curate`;
- the rest is fingerprinted with the same recipe and encoder (`sketch_texts`, `EmbeddingCache`)
  and stored with a plain decision, because curating 100,000 items one by one takes far longer
  than this benchmark should (the per-item verdict searches an index that grows to the pool's size);
- then statuses are set to a realistic mix: `--unique` items (default 20,000) of the eval's
  sources wait for review, the others are approved, rejected or duplicates, and every review
  decision has its audit event (some by the benchmark's own reviewer, so the page offers Undo);
- near links put `--near-share` of the pool (default 35%, as in GitBugs Hadoop, where 841 of
  2,438 reports share a group) in near groups drawn at random: a few large groups (400, 250, 160,
  120, 80 members), the rest mostly pairs and triples; the sealed check of every page follows them.

The app (`service.app.create_app`, with the same encoder) runs under uvicorn on loopback, signed in
through `/ui/login` with a `read,curate` token. The server time of each request is the app's own
`duration_ms` (the access log of its outermost middleware, around the session check, the
handler, the audit writes and the template); the client's round trip is shown beside it.

Usage: .venv/bin/python bench/ui_review_page.py [--items 100000] [--unique 20000] [--curated 10000]
           [--requests 30] [--near-share 0.35] [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test]
           [--keep DIR] [--profile]

With `--database-url`, the pool is built in a new database `bench_ui` on that server (dropped
at the end); otherwise in a fresh SQLite file in a temporary folder (kept with `--keep`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import os
import pstats
import random
import re
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn
from fastapi import FastAPI
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.engine import Engine, make_url
from starlette.requests import Request

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA, ROOT
from curation.dedup.deduplicator import CurationSummary, Deduplicator
from curation.dedup.embeddings import EmbeddingCache, body_text, store_embeddings, title_text
from curation.dedup.fingerprints import MinHashRecipe, sketch_texts, to_bytes
from curation.dedup.rules import DedupConfig
from ingest.mapping import CompiledMapping, load_mapping
from ingest.normalisation import NORMALISATION_VERSION, content_hash, dedup_text
from ingest.preparing import record_digest
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.dedup import DedupDecision, ItemFingerprint, NearLink
from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from schemas.source import Source
from service.app import create_app
from service.core.db import make_engine, migrate, write_session
from service.core.logs import request_id_var
from service.core.sessions import COOKIE, signed_in
from service.core.settings import Settings
from service.core.tokens import create_token
from service.evals.definitions import create_eval
from service.ui import review
from tests.eval_support import HashingEncoder

REQUIREMENT_MS = 300.0
EVAL = "incidents"
REVIEWER = "bench-reviewer"
SECRET_KEY = "bench-ui-review-secret-key-0123456789abcdef0123"
SEAL_KEY = bytes(range(32))  # a fixed key: the same items are sealed-bound in every run
PG_DATABASE = "bench_ui"
INSERT_BATCH = 5000
FINGERPRINT_BATCH = 2000
CURATE_STEP = 2000
INDEX_WAIT_SECONDS = 900
LOADING = "dedup index is loading"
APPROVED_SHARE = 0.75  # of the decided non-duplicates; the rest are rejected
DUPLICATE_SHARE = 0.10  # of the items not curated: duplicates of the item they vary
OWN_DECISIONS = 200  # review decisions by the benchmark's own reviewer (the newest: the page offers Undo)
NEAR_SHARE = 0.35  # of the pool in near groups: 841 of 2,438 GitBugs Hadoop reports share a group
LARGE_GROUPS = (400, 250, 160, 120, 80)  # a few large groups (the largest of GitBugs Hadoop holds 160)
EXTRA_LINKS = 0.3  # links per group beyond a spanning tree, as a share of its members


@dataclass(frozen=True)
class SourcePlan:
    name: str
    data: str  # "hadoop" or "kev"
    share: float
    in_eval: bool
    variant_offset: int  # sources cycling the same records vary them differently


SOURCES = (
    SourcePlan("hadoop-jira", "hadoop", 0.45, True, 0),
    SourcePlan("kev", "kev", 0.30, True, 0),
    SourcePlan("yarn-jira", "hadoop", 0.15, True, 1000),
    SourcePlan("legacy-tickets", "hadoop", 0.10, False, 2000),
)
COMMON_WORD = "exception"
RARE_WORD = "debian"
QUALIFIERS = (
    "after a rolling upgrade",
    "on ARM64 builds",
    "under heavy load",
    "with Kerberos enabled",
    "in HDFS federation",
    "on Java 17",
    "with erasure coding",
    "behind the router",
    "on Windows",
    "after failover",
    "in the staging cluster",
    "with short-circuit reads",
)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
REQUEST_ID = re.compile(r"^bench-")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the records ------------------------------------------------------------------------------


def _sentences(value: str | None) -> list[str]:
    return [sentence for sentence in SENTENCE.split(value or "") if sentence.strip()]


def hadoop_variant(base: dict[str, Any], variant: int, rng: random.Random, reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A Hadoop report as another team might have filed it: part of its description, a few
    sentences of another report, a qualifier in the title and another date (variant 0: as is)."""
    if variant == 0:
        return dict(base)
    sentences = _sentences(base.get("description"))
    if len(sentences) > 3:
        kept = max(2, int(len(sentences) * rng.uniform(0.5, 0.9)))
        start = rng.randint(0, len(sentences) - kept)
        sentences = sentences[start : start + kept]
    extra = _sentences(rng.choice(reports).get("description"))[: rng.randint(1, 3)]
    created = datetime.fromisoformat(base["created"]) + timedelta(days=rng.randint(-400, 400), minutes=rng.randint(0, 1439))
    return {
        **base,
        "id": f"{base['id']}-{variant}",
        "title": f"{base['title']} {rng.choice(QUALIFIERS)}",
        "description": " ".join(sentences + extra),
        "created": created.isoformat(),
    }


def kev_variant(base: dict[str, Any], variant: int, rng: random.Random, records: Sequence[dict[str, Any]], number: int) -> dict[str, Any]:
    """A KEV record about another vendor's product, added on another date (variant 0: as is)."""
    if variant == 0:
        return dict(base)
    other = rng.choice(records)
    description = base["shortDescription"].replace(base["vendorProject"], other["vendorProject"]).replace(base["product"], other["product"])
    name = base["vulnerabilityName"].replace(base["vendorProject"], other["vendorProject"]).replace(base["product"], other["product"])
    added = datetime.fromisoformat(base["dateAdded"]) + timedelta(days=rng.randint(-300, 300))
    return {
        **base,
        "cveID": f"CVE-{added.year}-9{number:06d}",
        "vendorProject": other["vendorProject"],
        "product": other["product"],
        "vulnerabilityName": name,
        "shortDescription": description,
        "dateAdded": added.date().isoformat(),
    }


@dataclass
class PlannedItem:
    source: str
    row: dict[str, Any]  # the item's columns
    base: str  # the real record it varies
    variant: int
    item_id: int = 0


def plan_items(total: int) -> list[PlannedItem]:
    """`total` items over `SOURCES`, each mapped from a (varied) real record by the example mappings."""
    reports = [json.loads(line) for line in (DATA / "gitbugs_hadoop" / "reports.jsonl").read_text().splitlines()]
    kev: list[dict[str, Any]] = json.loads((DATA / "cisa_kev" / "known_exploited_vulnerabilities.json").read_text())["vulnerabilities"]
    mappings = {
        "hadoop": CompiledMapping(load_mapping(ROOT / "examples/mappings/hadoop_jira.yaml")),
        "kev": CompiledMapping(load_mapping(ROOT / "examples/mappings/cisa_kev.yaml").model_copy(update={"format": "jsonl", "records": None})),
    }
    now = utcnow()
    planned: list[PlannedItem] = []
    counts = [int(total * plan.share) for plan in SOURCES]
    counts[0] += total - sum(counts)
    for plan, count in zip(SOURCES, counts, strict=True):
        rng = random.Random(f"{plan.name}:{total}")
        bases: list[dict[str, Any]] = list(reports if plan.data == "hadoop" else kev)
        rng.shuffle(bases)
        for number in range(count):
            base = bases[number % len(bases)]
            variant = number // len(bases) + plan.variant_offset
            if plan.data == "hadoop":
                record, base_id = hadoop_variant(base, variant, rng, reports), str(base["id"])
            else:
                record, base_id = kev_variant(base, variant, rng, kev, number), str(base["cveID"])
            mapped = mappings[plan.data].apply(record, now=now)
            row = {
                "external_id": mapped.external_id,
                "occurred_at": mapped.occurred_at,
                "title": mapped.title,
                "input": mapped.input,
                "reference": mapped.reference,
                "metadata": mapped.metadata,
                "tags": mapped.tags,
                "content_hash": content_hash(mapped.title, mapped.input, mapped.reference),
                "hash_recipe": NORMALISATION_VERSION,
                "identity_key": mapped.identity,
                "duplicate_of": None,
                "record_digest": record_digest(mapped),
                "source_version": mapped.version,
                "revision": 1,
                "ingested_at": now,
                "updated_at": now,
                "exposed_at": None,
                "exposed_reason": None,
                "curated_revision": None,
                "source_changed_at": None,
            }
            planned.append(PlannedItem(plan.name, row, base_id, variant))
    return planned


# -- the pool ---------------------------------------------------------------------------------


@dataclass
class Pool:
    engine: Engine
    items: int = 0
    unique_in_eval: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    curated: CurationSummary | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    near: dict[str, int] = field(default_factory=dict)


def _timed(pool: Pool, phase: str) -> Callable[[], None]:
    started = time.perf_counter()

    def done() -> None:
        pool.seconds[phase] = round(time.perf_counter() - started, 1)
        log(f"  {phase}: {pool.seconds[phase]} s")

    return done


def group_sizes(grouped: int, rng: random.Random) -> list[int]:
    """Sizes of near groups holding `grouped` items in all: the few `LARGE_GROUPS` that fit, the
    rest mostly pairs and triples (a power law from 2 to 50 members)."""
    sizes = [size for size in LARGE_GROUPS if size * 4 <= grouped]
    left = grouped - sum(sizes)
    choices = list(range(2, 51))
    weights = [size**-2.2 for size in choices]
    while left >= 2:
        size = min(rng.choices(choices, weights)[0], left)
        sizes.append(size)
        left -= size
    return sizes


def add_near_links(engine: Engine, item_ids: Sequence[int], share: float, rng: random.Random) -> dict[str, int]:
    """Near links (`schemas.dedup.NearLink`) putting `share` of `item_ids` in groups, drawn at
    random over the pool: each group a random tree (every member linked to an earlier one) and
    `EXTRA_LINKS` more links, beside the links the curated subset already stored."""
    with engine.connect() as connection:
        stored = {frozenset(pair) for pair in connection.execute(select(NearLink.item_id, NearLink.other_id)).all()}  # type: ignore[call-overload]
    chosen = rng.sample(list(item_ids), int(len(item_ids) * share))
    now = utcnow()
    rows: list[dict[str, Any]] = []
    sizes = group_sizes(len(chosen), rng)
    start = 0
    for size in sizes:
        members = chosen[start : start + size]
        start += size
        pairs = {frozenset((members[n], members[rng.randrange(n)])) for n in range(1, size)}
        for _ in range(int(size * EXTRA_LINKS)):
            first, second = rng.sample(members, 2)
            pairs.add(frozenset((first, second)))
        for pair in pairs - stored:
            later, earlier = max(pair), min(pair)
            stage = rng.choice(("minhash", "embedding", "embedding", "exact"))
            rows.append({"item_id": later, "other_id": earlier, "stage": stage, "score": None if stage == "exact" else round(rng.uniform(0.8, 0.99), 4), "recorded_at": now})
    with engine.begin() as connection:
        for offset in range(0, len(rows), INSERT_BATCH):
            connection.execute(insert(NearLink.__table__), rows[offset : offset + INSERT_BATCH])  # type: ignore[attr-defined]
        links = int(connection.execute(text("SELECT count(*) FROM near_link")).scalar_one())
    return {"links": links, "added": len(rows), "grouped": start, "groups": len(sizes), "largest": max(sizes, default=0)}


def build_pool(engine: Engine, *, total: int, unique: int, curated: int, near_share: float = NEAR_SHARE) -> Pool:
    pool = Pool(engine)
    encoder = HashingEncoder()
    recipe = MinHashRecipe()
    log(f"building a pool of {total:,} items ({curated:,} curated by the real deduplicator, the rest fingerprinted directly)")

    done = _timed(pool, "records mapped")
    planned = plan_items(total)
    done()

    done = _timed(pool, "items inserted")
    with write_session(engine) as session:
        ids: dict[str, int] = {}
        for plan in SOURCES:
            mapping = load_mapping(ROOT / ("examples/mappings/hadoop_jira.yaml" if plan.data == "hadoop" else "examples/mappings/cisa_kev.yaml"))
            source = Source(name=plan.name, kind="file", mapping=mapping.model_dump(mode="json", exclude_defaults=True))
            session.add(source)
            session.flush()
            assert source.id is not None
            ids[plan.name] = source.id
        session.commit()
    rng = random.Random(total)
    to_curate = set(rng.sample(range(len(planned)), min(curated, len(planned))))
    table = Item.__table__  # type: ignore[attr-defined]
    with engine.begin() as connection:
        for start in range(0, len(planned), INSERT_BATCH):
            rows = [
                {**entry.row, "source_id": ids[entry.source], "status": ItemStatus.CANDIDATE.value if start + offset in to_curate else ItemStatus.UNIQUE.value}
                for offset, entry in enumerate(planned[start : start + INSERT_BATCH])
            ]
            connection.execute(insert(table), rows)
        by_key = {(source_id, external_id): item_id for item_id, source_id, external_id in connection.execute(select(table.c.id, table.c.source_id, table.c.external_id))}
    for entry in planned:
        entry.item_id = by_key[(ids[entry.source], entry.row["external_id"])]
    done()

    done = _timed(pool, "curated subset decided")
    deduplicator = Deduplicator(clock=utcnow, encoder=encoder, config=DedupConfig(), recipe=recipe)
    summary = CurationSummary()
    with write_session(engine) as session:
        while True:
            step = deduplicator.curate(session, limit=CURATE_STEP)
            session.commit()
            if not step.decided and not step.references:
                break
            summary.decided += step.decided
            summary.unique += step.unique
            summary.duplicate += step.duplicate
            summary.contaminated += step.contaminated
            log(f"    curated {summary.decided:,} of {len(to_curate):,} ({summary.duplicate:,} duplicates)")
    pool.curated = summary
    done()

    done = _timed(pool, "other items fingerprinted")
    rest = [entry for position, entry in enumerate(planned) if position not in to_curate]
    base_item: dict[tuple[str, str], int] = {}
    for entry in sorted(planned, key=lambda entry: entry.variant):
        base_item.setdefault((entry.source, entry.base), entry.item_id)
    decisions: list[dict[str, Any]] = []
    duplicates: dict[int, int] = {}
    for entry in rest:
        original = base_item[(entry.source, entry.base)]
        if original != entry.item_id and rng.random() < DUPLICATE_SHARE:
            duplicates[entry.item_id] = original
        details = {"recipe": recipe.key, "model": encoder.model_id, "text": "long", "rule": "fresh" if entry.item_id in duplicates else None}
        status = ItemStatus.DUPLICATE.value if entry.item_id in duplicates else ItemStatus.UNIQUE.value
        stage = "minhash" if entry.item_id in duplicates else "none"
        decisions.append({"item_id": entry.item_id, "status": status, "stage": stage, "score": None, "matched_item_id": duplicates.get(entry.item_id), "details": details})
    cache = EmbeddingCache(encoder, clock=utcnow)
    fingerprint_table = ItemFingerprint.__table__  # type: ignore[attr-defined]
    decision_table = DedupDecision.__table__  # type: ignore[attr-defined]
    for start in range(0, len(rest), FINGERPRINT_BATCH):
        batch = rest[start : start + FINGERPRINT_BATCH]
        sketches = sketch_texts((dedup_text(entry.row["title"], entry.row["input"]) for entry in batch), recipe)
        texts = [body_text(entry.row["title"], entry.row["input"]) for entry in batch] + [title_text(entry.row["title"], entry.row["input"]) for entry in batch]
        with write_session(engine) as session:
            keys, _, fresh = cache.lookup(session, texts)
            store_embeddings(session, fresh)
            session.flush()
            now = utcnow()
            fingerprints = [
                {
                    "item_id": entry.item_id,
                    "recipe": recipe.key,
                    "minhash": to_bytes(sketch),
                    "model_id": encoder.model_id,
                    "body_key": keys[n],
                    "title_key": keys[len(batch) + n],
                    "created_at": now,
                }
                for n, (entry, sketch) in enumerate(zip(batch, sketches, strict=True))
            ]
            session.execute(insert(fingerprint_table), fingerprints)
            session.execute(insert(decision_table), [{**decision, "decided_at": now} for decision in decisions[start : start + FINGERPRINT_BATCH]])
            session.commit()
        if (start // FINGERPRINT_BATCH) % 10 == 9 or start + FINGERPRINT_BATCH >= len(rest):
            log(f"    fingerprinted {min(start + FINGERPRINT_BATCH, len(rest)):,} of {len(rest):,}")
    done()

    done = _timed(pool, "statuses and review history set")
    in_eval = {plan.name for plan in SOURCES if plan.in_eval}
    with engine.connect() as connection:
        decided: dict[int, str] = {int(item_id): str(status) for item_id, status in connection.execute(select(table.c.id, table.c.status))}
    source_of = {entry.item_id: entry.source for entry in planned}
    open_items = [entry.item_id for entry in planned if entry.item_id not in duplicates and decided[entry.item_id] == ItemStatus.UNIQUE.value]
    eligible = [item_id for item_id in open_items if source_of[item_id] in in_eval]
    if len(eligible) < unique:
        raise SystemExit(f"only {len(eligible):,} items of the eval's sources are not duplicates: ask for fewer than {unique:,} waiting (--unique)")
    waiting = set(rng.sample(eligible, unique))
    changes: list[dict[str, Any]] = [{"b_id": item_id, "b_status": ItemStatus.DUPLICATE.value, "b_duplicate_of": original} for item_id, original in duplicates.items()]
    reviewed: list[tuple[int, str]] = []
    for item_id in open_items:
        if item_id in waiting:
            continue
        status = ItemStatus.APPROVED.value if rng.random() < APPROVED_SHARE else ItemStatus.REJECTED.value
        changes.append({"b_id": item_id, "b_status": status, "b_duplicate_of": None})
        reviewed.append((item_id, status))
    status_update = update(table).where(table.c.id == bindparam("b_id")).values(status=bindparam("b_status"), duplicate_of=bindparam("b_duplicate_of"))
    audit_table = AuditEvent.__table__  # type: ignore[attr-defined]
    reviewers = ["token:alice", "token:bob", "token:carol", "token:dmitri"]
    started_at = utcnow() - timedelta(days=90)
    rng.shuffle(reviewed)
    events = [
        {
            "actor": f"token:{REVIEWER}" if number >= len(reviewed) - OWN_DECISIONS else rng.choice(reviewers),
            "action": "item.approve" if status == ItemStatus.APPROVED.value else "item.reject",
            "object_type": "item",
            "object_id": str(item_id),
            "count": 1,
            "at": started_at + timedelta(seconds=number * 60),
            "details": {} if status == ItemStatus.APPROVED.value else {"reason": "not an incident a model should be evaluated on"},
        }
        for number, (item_id, status) in enumerate(reviewed)
    ]
    with engine.begin() as connection:
        for start in range(0, len(changes), INSERT_BATCH):
            connection.execute(status_update, changes[start : start + INSERT_BATCH])
        for start in range(0, len(events), INSERT_BATCH):
            connection.execute(insert(audit_table), events[start : start + INSERT_BATCH])
    done()

    done = _timed(pool, "near links added")
    near = pool.near = add_near_links(engine, [entry.item_id for entry in planned], near_share, rng)
    log(f"    {near['added']:,} links put {near['grouped']:,} items in {near['groups']:,} groups (largest {near['largest']}); {near['links']:,} near links in all")
    done()

    with write_session(engine) as session:
        data = EvalCreate(name=EVAL, sources=sorted(in_eval), approval_policy="manual", max_age_days=None, sealed_fraction=0.2, target_size=5000)
        create_eval(session=session, data=data, secret_key=SECRET_KEY, actor="bench", key=SEAL_KEY)
        session.commit()
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("ANALYZE"))  # what autovacuum does soon after a large load
    with engine.connect() as connection:
        pool.by_status = {status: int(count) for status, count in connection.execute(select(table.c.status, text("count(*)")).group_by(table.c.status)).all()}
    pool.items = sum(pool.by_status.values())
    pool.unique_in_eval = len(waiting)
    pool.seconds["total"] = round(sum(value for key, value in pool.seconds.items() if key != "total"), 1)
    return pool


# -- the database -----------------------------------------------------------------------------


def team_review_world(engine: Engine, votes: int) -> None:
    """The eval reviewed by a team (two agreeing votes on half the items, an open queue) with `votes`
    open votes by other reviewers on random waiting items that need two: most alone in their round,
    a sixth of the rounds disputed (an approve and a reject)."""
    from sqlmodel import col

    from curation.team_rounds import votes_needed
    from schemas.evals import Eval
    from schemas.team_review import ReviewVote

    rng = random.Random(7)
    now = datetime.now(tz=UTC)
    with write_session(engine) as session:
        evaluation = session.scalars(select(Eval).where(col(Eval.name) == EVAL)).one()
        assert evaluation.id is not None
        evaluation.reviewers_per_item, evaluation.agreement_sample = 2, 0.5
        session.add(evaluation)
        waiting = [item_id for item_id in session.scalars(select(col(Item.id)).where(col(Item.status) == ItemStatus.UNIQUE.value)).all() if item_id is not None]
        double = [item_id for item_id in waiting if votes_needed(evaluation, item_id) == 2]
        chosen = rng.sample(double, min(len(double), votes * 6 // 7))
        disputed = chosen[: votes // 7]
        for item_id in chosen:
            session.add(ReviewVote(eval_id=evaluation.id, item_id=item_id, reviewer=f"token:reviewer-{item_id % 5}", decision="approve", cast_at=now))
        for item_id in disputed:
            session.add(ReviewVote(eval_id=evaluation.id, item_id=item_id, reviewer="token:second-reviewer", decision="reject", reason="bench", cast_at=now))
        session.commit()
    log(f"team review: {len(chosen) + len(disputed)} open votes, {len(disputed)} disputed rounds")


@contextmanager
def fresh_database(database_url: str | None, keep: Path | None) -> Iterator[str]:
    """The URL of a new, migrated, empty database: a SQLite file in a temporary folder (or in
    `keep`, left there), or the database `bench_ui` on the PostgreSQL server of `database_url`
    (created anew, dropped at the end)."""
    if database_url is None:
        folder = keep or Path(tempfile.mkdtemp(prefix="goldenset-ui-review-"))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "pool.db"
        for leftover in folder.glob("pool.db*"):
            leftover.unlink()
        url = f"sqlite:///{path}"
        _migrate(url)
        try:
            yield url
        finally:
            if keep is None:
                shutil.rmtree(folder, ignore_errors=True)
        return
    admin = make_url(database_url)
    with _admin(database_url) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{PG_DATABASE}"')
    url = admin.set(database=PG_DATABASE).render_as_string(hide_password=False)
    try:
        _migrate(url)
        yield url
    finally:
        with _admin(database_url) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')


def _admin(database_url: str) -> psycopg.Connection[tuple[Any, ...]]:
    url = make_url(database_url)
    return psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, password=url.password, dbname=url.database, autocommit=True)


def _migrate(url: str) -> None:
    engine = make_engine(url)
    migrate(engine)
    engine.dispose()


# -- serving and measuring --------------------------------------------------------------------


class ServerTimes(logging.Handler):
    """The app's own duration of each request (its access log), by the request's X-Request-ID."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.by_request: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        request_id = request_id_var.get()
        duration = getattr(record, "duration_ms", None)
        if request_id is not None and REQUEST_ID.match(request_id) and isinstance(duration, int | float):
            self.by_request[request_id] = float(duration)


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """`app` under uvicorn on a free loopback port, for the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def signed_in_client(base: str, token: str) -> Iterator[httpx.Client]:
    """A client signed in to the web UI through its sign-in form."""
    with httpx.Client(base_url=base, timeout=120, follow_redirects=False) as client:
        _sign_in(client, token)
        yield client


def _sign_in(client: httpx.Client, token: str) -> None:
    form = client.get("/ui/login")
    form.raise_for_status()
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    if found is None:
        raise RuntimeError("the sign-in page has no csrf field")
    answer = client.post("/ui/login", data={"token": token, "csrf": found.group(1), "next": "/ui"})
    if answer.status_code != 303 or COOKIE not in client.cookies:
        raise RuntimeError(f"signing in failed: {answer.status_code} {answer.text[:300]}")


@dataclass
class Sample:
    server_ms: float
    client_ms: float
    total: int | None
    neighbours: int
    withheld: bool
    loading: bool


@dataclass
class Case:
    label: str
    params: dict[str, str]
    samples: list[Sample] = field(default_factory=list)
    walk: bool = False  # `at` moves on by one each request, as a reviewer pressing Skip does

    def server(self) -> list[float]:
        return [sample.server_ms for sample in self.samples]


TOTAL = re.compile(r"<strong>Item \d+ of (\d+)</strong>")


def fetch(client: httpx.Client, times: ServerTimes, params: dict[str, str]) -> Sample:
    request_id = f"bench-{uuid.uuid4().hex}"
    started = time.perf_counter()
    answer = client.get(f"/ui/evals/{EVAL}/review", params=params, headers={"X-Request-ID": request_id})
    client_ms = (time.perf_counter() - started) * 1000
    if answer.status_code != 200:
        raise RuntimeError(f"GET review {params} answered {answer.status_code}: {answer.text[:500]}")
    page = answer.text
    found = TOTAL.search(page)
    server_ms = times.by_request.pop(request_id, float("nan"))
    return Sample(server_ms, client_ms, int(found.group(1)) if found else None, page.count('class="card comparison"'), "Sealed-bound item" in page, LOADING in page)


def wait_for_index(client: httpx.Client, times: ServerTimes) -> tuple[float, Sample]:
    """Ask for the queue until the page stops saying the dedup index is loading; the seconds that
    took, and the first (cold) request."""
    started = time.perf_counter()
    first = fetch(client, times, {})
    sample = first
    while sample.loading:
        if time.perf_counter() - started > INDEX_WAIT_SECONDS:
            raise RuntimeError(f"the dedup index was not ready after {INDEX_WAIT_SECONDS} s")
        time.sleep(0.5)
        sample = fetch(client, times, {})
    return time.perf_counter() - started, first


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(-(-share * len(ordered) // 1)) - 1))]


def measure(client: httpx.Client, times: ServerTimes, cases: Sequence[Case], requests: int) -> None:
    for case in cases:
        for _ in range(2):  # unmeasured: the first request of a new address warms SQLite's page cache
            fetch(client, times, case.params)
        for number in range(requests):
            params = {**case.params, "at": str(int(case.params.get("at", "1")) + number)} if case.walk else case.params
            case.samples.append(fetch(client, times, params))
        values = case.server()
        log(f"  {case.label}: median {statistics.median(values):.1f} ms, p95 {percentile(values, 0.95):.1f} ms")


# -- profiling --------------------------------------------------------------------------------

PIECES = (
    ("service/core/guard.py", "__call__", "session check and guard (middleware)"),
    ("service/ui/review.py", "review_page", "review_page handler, all of it"),
    ("service/evals/sealed_review.py", "serve_queue", "  serve_queue (queue page + its audit)"),
    ("service/evals/review_queue.py", "source_queue", "    source_queue (count, page, visibility)"),
    ("service/evals/review_queue.py", "_withheld", "      visibility of text matches / page"),
    ("curation/releases/visibility.py", "sealed_item_ids", "      sealed_item_ids"),
    ("service/evals/review_queue.py", "decisions_in_force", "      decisions_in_force"),
    ("service/core/audit.py", "record_read", "  record_read (audit writes)"),
    ("service/ui/review_neighbours.py", "neighbours_of", "  neighbours_of"),
    ("service/dedup/reader.py", "without_waiting", "    without_waiting (index_state)"),
    ("curation/dedup/similarity.py", "similar_to_stored", "    similar_to_stored"),
    ("curation/dedup/index.py", "nearest", "      index.nearest (vector scan)"),
    ("curation/dedup/index.py", "near", "      index.near (LSH)"),
    ("curation/dedup/lexical.py", "lexical_similarity", "      lexical_similarity"),
    ("service/ui/worddiff.py", "word_diff", "    word_diff"),
    ("service/ui/review.py", "_last_decision", "  _last_decision"),
    ("service/ui/pages.py", "page", "  page (template render)"),
)


@dataclass
class Statement:
    sql: str
    parameters: Any
    ms: float


@contextmanager
def statements_timed(engine: Engine) -> Iterator[list[Statement]]:
    """Every SQL statement `engine` (and its writer variant) runs in the block, with its time."""
    timed: list[Statement] = []
    started: list[float] = []

    def before(connection: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        started.append(time.perf_counter())

    def after(connection: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if started:  # a statement begun before the listener was added (the index's background thread) is left out
            timed.append(Statement(statement, parameters, (time.perf_counter() - started.pop()) * 1000))

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield timed
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)


def query_plan(engine: Engine, statement: Statement) -> list[str]:
    """The database's plan for a SELECT as it ran."""
    explain = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(explain + statement.sql, statement.parameters).all()
    return [" ".join(str(value) for value in row[-1:]) if engine.dialect.name == "sqlite" else str(row[0]) for row in rows]


def _short(sql: str, length: int = 150) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= length else flat[: length - 1] + "…"


def profile_case(app: FastAPI, engine: Engine, cookie: str, case: Case) -> str:
    """cProfile of one call of the page's handler (as the server calls it, in this thread), with
    the cumulative time of its pieces and the functions that spent the most time themselves."""
    signed = signed_in(engine, cookie, secret_key=SECRET_KEY, hours=8)
    if signed is None:
        raise RuntimeError("the benchmark's session is not valid")
    query = "&".join(f"{key}={value}" for key, value in case.params.items())
    scope = {
        "type": "http",
        "app": app,
        "method": "GET",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
        "path": f"/ui/evals/{EVAL}/review",
        "raw_path": f"/ui/evals/{EVAL}/review".encode(),
        "query_string": query.encode(),
        "headers": [],
        "state": {"principal": signed.principal, "ui_session": signed},
    }
    source, text_filter, at = case.params.get("source"), case.params.get("text", ""), int(case.params.get("at", "1"))
    review.review_page(Request(scope), EVAL, source=source, text=text_filter, at=at)  # warm
    with statements_timed(engine) as statements:
        started = time.perf_counter()
        review.review_page(Request(scope), EVAL, source=source, after="", before="", text=text_filter, at=at)
        plain = (time.perf_counter() - started) * 1000
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.runcall(review.review_page, Request(scope), EVAL, source=source, after="", before="", text=text_filter, at=at)
    wall = (time.perf_counter() - started) * 1000
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]] = stats.stats  # type: ignore[attr-defined]
    sql_ms = sum(statement.ms for statement in statements)
    lines = [
        f"profile of {case.label} ({query or 'no filters'}): the handler alone took {plain:.0f} ms, of which {sql_ms:.0f} ms in {len(statements)} SQL statements; "
        f"{wall:.0f} ms under cProfile (which slows Python code down)"
    ]
    for path, function, label in PIECES:
        cumulative = sum(entry[3] for (filename, _, name), entry in raw.items() if filename.endswith(path) and name == function)
        calls = sum(entry[1] for (filename, _, name), entry in raw.items() if filename.endswith(path) and name == function)
        if calls:
            lines.append(f"  {label:<48} {cumulative * 1000:8.1f} ms  ({calls} call{'s' if calls > 1 else ''})")
    buffer = io.StringIO()
    pstats.Stats(profiler, stream=buffer).sort_stats("tottime").print_stats(12)
    top = [line for line in buffer.getvalue().splitlines() if re.match(r"\s+\d", line)]
    lines.append("  functions with the most own time (ncalls tottime percall cumtime percall where):")
    lines.extend(f"    {line.strip()}" for line in top[:12])
    slowest = sorted(statements, key=lambda statement: -statement.ms)[:4]
    lines.append("  slowest SQL statements (without cProfile):")
    lines.extend(f"    {statement.ms:7.1f} ms  {_short(statement.sql)}" for statement in slowest)
    selects = [statement for statement in slowest if statement.sql.lstrip().upper().startswith("SELECT") and statement.ms >= 10]
    if selects:
        lines.append(f"  plan of the slowest SELECT ({selects[0].ms:.1f} ms):")
        lines.extend(f"    {line}" for line in query_plan(engine, selects[0]))
    return "\n".join(lines)


# -- the report -------------------------------------------------------------------------------


def report(pool: Pool, cases: Sequence[Case], index_seconds: float, cold: Sample, backend: str, load: tuple[float, float]) -> bool:
    print()
    print(f"Review queue page, GET /ui/evals/{EVAL}/review, on {backend}")
    print(f"pool: {pool.items:,} items {json.dumps(pool.by_status, sort_keys=True)}; {pool.unique_in_eval:,} waiting for review in the eval's sources")
    if pool.curated is not None:
        curated = pool.curated
        print(f"  {curated.decided:,} decided by the real Deduplicator.curate ({curated.unique:,} unique, {curated.duplicate:,} duplicate); the rest fingerprinted directly")
    if pool.near:
        near = pool.near
        print(f"  near links: {near['links']:,} in all, {near['added']:,} of them putting {near['grouped']:,} items in {near['groups']:,} groups (largest {near['largest']})")
    print(f"pool build: {pool.seconds['total']} s ({', '.join(f'{key} {value} s' for key, value in pool.seconds.items() if key != 'total')})")
    print(f"dedup index ready for pages after {index_seconds:.1f} s; the first (cold) request took {cold.server_ms:.0f} ms server time")
    print()
    header = f"{'case':<32} {'queue':>7} {'neighb.':>7} {'n':>3} {'median':>8} {'p95':>8} {'max':>8} {'min':>8} {'client med.':>11}  verdict"
    print(header)
    print("-" * len(header))
    passed = True
    for case in cases:
        values = case.server()
        median, p95 = statistics.median(values), percentile(values, 0.95)
        ok = median < REQUIREMENT_MS and p95 < REQUIREMENT_MS
        passed &= ok
        totals = {sample.total for sample in case.samples}
        total = str(totals.pop()) if len(totals) == 1 else "varies"
        neighbours = statistics.mean(sample.neighbours for sample in case.samples)
        client = statistics.median(sample.client_ms for sample in case.samples)
        figures = f"{median:>8.1f} {p95:>8.1f} {max(values):>8.1f} {min(values):>8.1f} {client:>11.1f}"
        print(f"{case.label:<32} {total:>7} {neighbours:>7.1f} {len(values):>3} {figures}  {'ok' if ok else 'OVER'}")
    print("(ms; median, p95, max, min: server time from the app's access log; client: the round trip's median;")
    print(" 'neighb.': nearest earlier items shown, mean; 'queue': the page's total)")
    cores = os.cpu_count() or 1
    if max(load) > cores:
        print(f"note: the machine was busy (load average {load[0]:.1f} before measuring, {load[1]:.1f} after, on {cores} cores): server times include waiting for a CPU;")
        print("      'min' is the least disturbed request of each case")
    print()
    verdict = "PASS" if passed else "FAIL"
    print(f"{verdict}: requirement under {REQUIREMENT_MS:.0f} ms server time (median and p95) for every case")
    return passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--unique", type=int, default=20_000, help="items of the eval's sources waiting for review")
    parser.add_argument("--curated", type=int, default=10_000, help="items decided by the real deduplicator (the rest are fingerprinted directly)")
    parser.add_argument("--requests", type=int, default=30, help="measured requests per case")
    parser.add_argument("--database-url", help="a PostgreSQL server (its database is used only to create and drop `bench_ui`)")
    parser.add_argument("--keep", type=Path, help="build the SQLite pool in this folder and keep it")
    parser.add_argument("--near-share", type=float, default=NEAR_SHARE, help="share of the pool put in near groups by added near links (0: none)")
    parser.add_argument("--profile", action="store_true", help="profile every case, not only those over the requirement")
    parser.add_argument(
        "--team-votes",
        type=int,
        default=0,
        help="make the eval team-reviewed (two votes on half the items) with this many open votes by others, some disputed; measure its views too",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    with fresh_database(args.database_url, args.keep) as url:
        engine = make_engine(url)
        backend = engine.dialect.name
        pool = build_pool(engine, total=args.items, unique=args.unique, curated=args.curated, near_share=args.near_share)
        with write_session(engine) as session:
            token, _ = create_token(session=session, name=REVIEWER, scopes="read,curate", actor="bench")
            session.commit()
        times = ServerTimes()
        access = logging.getLogger("goldenset.access")
        access.setLevel(logging.INFO)
        access.addHandler(times)
        access.propagate = False
        settings = Settings(env="development", database_url=url, secret_key=SECRET_KEY, log_json=False, curate_after_ingest=False)
        app = create_app(settings, engine=engine, encoder=HashingEncoder())
        deep = min(15_000, max(1, args.unique * 3 // 4))
        deep_kev = min(3000, max(1, args.unique // 5))
        cases = [
            Case("first item", {}),
            Case(f"deep, at={deep}", {"at": str(deep)}),
            Case("walking on, at=1,2,3...", {"at": "1"}, walk=True),
            Case(f"text={COMMON_WORD} (common)", {"text": COMMON_WORD}),
            Case(f"text={RARE_WORD} (rare)", {"text": RARE_WORD}),
            Case("source=kev", {"source": "kev"}),
            Case(f"source=kev, at={deep_kev}", {"source": "kev", "at": str(deep_kev)}),
        ]
        if args.team_votes:
            team_review_world(engine, args.team_votes)
            cases += [Case("team: waiting for my vote", {"view": "mine"}), Case("team: disagreements", {"view": "disputed"}), Case("team: everything", {"view": "all"})]
        with served(app) as base, signed_in_client(base, token) as client:
            log("waiting for the dedup index (the page builds it in the background)")
            index_seconds, cold = wait_for_index(client, times)
            log(f"  ready after {index_seconds:.1f} s")
            log(f"measuring {args.requests} requests per case")
            load_before = os.getloadavg()[0]
            measure(client, times, cases, args.requests)
            load = (load_before, os.getloadavg()[0])
            cookie = client.cookies.get(COOKIE) or ""
            passed = report(pool, cases, index_seconds, cold, backend, load)
            slow = [case for case in cases if args.profile or statistics.median(case.server()) >= REQUIREMENT_MS or percentile(case.server(), 0.95) >= REQUIREMENT_MS]
            for case in slow:
                print()
                print(profile_case(app, engine, cookie, case))
        engine.dispose()
    print()
    print(f"benchmark ran {time.perf_counter() - started:.0f} s; {'PASS' if passed else 'FAIL'}")


if __name__ == "__main__":
    main()
