"""A split no near-duplicate can straddle: items dedup saw close at a recall-first level (near
links), whatever it decided, are sealed or not together, in one release and across releases,
sources and evals; a link that joins items earlier releases put on different sides leaves them
there and is reported; near links are filled from stored decisions by the migration."""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

from alembic import command
from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.rules import DedupConfig
from curation.releases.groups import anchor, near_groups
from curation.releases.sealing import is_sealed
from curation.releases.visibility import sealed_item_ids
from schemas.common import utcnow
from schemas.dedup import NearLink
from schemas.evals import EvalCreate, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.release import Release, ReleaseItem
from service.core.db import alembic_config, migrate, write_session, writer_engine
from service.evals.definitions import create_eval, require_eval, seal_keys
from service.evals.refresh import refresh_eval
from service.evals.releases import manifest, verify_release
from tests.conftest import TEST_SECRET_KEY
from tests.dedup_support import HADOOP_MAPPING, hadoop_reports, planted
from tests.dedup_support import ingest as ingest_records
from tests.eval_support import HashingEncoder, ingest_and_curate
from tests.evals.integration.test_refresh import kev

KEY = b"n" * 32
OTHER_KEY = b"m" * 32


def _eval(engine: Engine, name: str = "ops", sources: tuple[str, ...] = ("kev",), key: bytes = KEY, fraction: float = 0.5) -> None:
    data = EvalCreate(name=name, sources=list(sources), approval_policy="auto", max_age_days=None, sealed_fraction=fraction, target_size=10_000)
    with write_session(engine) as session:
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=key)
        session.commit()


def _refresh(engine: Engine, at: str, name: str = "ops") -> Release:
    return refresh_eval(engine, name=name, at=datetime.fromisoformat(at), secret_key=TEST_SECRET_KEY, actor="test", allow_future=True).release


def _splits(engine: Engine, release: Release) -> dict[int, str]:
    with Session(engine) as session:
        return dict(session.exec(select(ReleaseItem.item_id, ReleaseItem.split).where(ReleaseItem.release_id == release.id)).all())


def _ids(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {external: item_id for external, item_id in session.exec(select(Item.external_id, Item.id)).all() if item_id is not None}


def _retelling(number: int, of: int, date: str) -> dict[str, Any]:
    """Another KEV record (another CVE, so dedup never merges them) telling record `of`'s story in its words."""
    return kev(number, date, kev(of, "2024-01-01")["shortDescription"])


def _verified_pairs(engine: Engine, release: Release, name: str = "ops") -> list[Any]:
    with Session(engine) as session:
        evaluation = require_eval(session=session, name=name)
        report = verify_release(session=session, evaluation=evaluation, release=release, seal_key=seal_keys(secret_key=TEST_SECRET_KEY)(evaluation))
        assert report.ok, report.mismatches
        return report.cross_split_pairs


def test_a_retelling_released_after_its_original_lands_on_the_same_side(engine: Engine) -> None:
    originals = list(range(1, 13))
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in originals])
    _eval(engine)
    first = _refresh(engine, "2024-03-01T03:00:00+00:00")
    # Retold later: each a different CVE with its original's description, never a duplicate of it.
    ingest_and_curate(engine, "kev", [_retelling(100 + n, n, f"2024-03-{n:02d}") for n in originals])
    second = _refresh(engine, "2024-04-01T03:00:00+00:00")
    ids, splits = _ids(engine), _splits(engine, second)
    pairs = [(ids[f"CVE-2024-{n:04d}"], ids[f"CVE-2024-{100 + n:04d}"]) for n in originals]
    with Session(engine) as session:
        statuses = dict(session.exec(select(Item.id, Item.status)).all())
        links = {frozenset((a, b)) for a, b in session.exec(select(NearLink.item_id, NearLink.other_id)).all()}
    assert all(statuses[retold] == ItemStatus.UNIQUE.value for _, retold in pairs)
    assert all(frozenset(pair) in links for pair in pairs)
    assert {splits[original] for original, _ in pairs} == {Split.DEV.value, Split.SEALED.value}
    assert all(splits[original] == _splits(engine, first)[original] == splits[retold] for original, retold in pairs)
    # The per-item hash would have split some of them: the rule is what keeps them together.
    assert any(is_sealed(KEY, original, 0.5) != is_sealed(KEY, retold, 0.5) for original, retold in pairs)
    assert first.cross_split_pairs == [] and second.cross_split_pairs == []
    assert _verified_pairs(engine, second) == []
    with Session(engine) as session:
        shown = manifest(session=session, evaluation=require_eval(session=session, name="ops"), release=second)
    assert shown.cross_split_pairs == []


def test_a_group_spanning_sources_is_sealed_alike_by_every_eval(engine: Engine) -> None:
    numbers = list(range(1, 13))
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in numbers])
    ingest_and_curate(engine, "mirror", [_retelling(200 + n, n, f"2024-02-{n:02d}") for n in numbers])
    _eval(engine, "alpha", ("kev",), KEY)
    _eval(engine, "beta", ("mirror",), OTHER_KEY)
    ids = _ids(engine)
    pairs = [(ids[f"CVE-2024-{n:04d}"], ids[f"CVE-2024-{200 + n:04d}"]) for n in numbers]
    with Session(engine) as session:
        bound = sealed_item_ids(session=session, item_ids=[item for pair in pairs for item in pair], seal_key_of=seal_keys(secret_key=TEST_SECRET_KEY))
        groups = near_groups(session, [item for pair in pairs for item in pair])
    assert all((a in bound) == (b in bound) for a, b in pairs) and bound
    # Sealed when either eval, over either member's source, seals the group's anchor.
    assert bound == {item for pair in pairs for item in pair if is_sealed(KEY, anchor(groups[item]), 0.5) or is_sealed(OTHER_KEY, anchor(groups[item]), 0.5)}
    alpha, beta = _refresh(engine, "2024-03-01T03:00:00+00:00", "alpha"), _refresh(engine, "2024-03-01T03:00:00+00:00", "beta")
    on_alpha, on_beta = _splits(engine, alpha), _splits(engine, beta)
    assert all(on_alpha[a] == on_beta[b] == (Split.SEALED.value if a in bound else Split.DEV.value) for a, b in pairs)
    assert alpha.cross_split_pairs == [] and beta.cross_split_pairs == []


def test_a_link_between_released_sides_keeps_them_and_is_reported(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 13)])
    _eval(engine)
    first = _refresh(engine, "2024-03-01T03:00:00+00:00")
    splits = _splits(engine, first)
    dev = min(item for item, split in splits.items() if split == Split.DEV.value)
    sealed = min(item for item, split in splits.items() if split == Split.SEALED.value)
    with write_session(engine) as session:  # say a curator ruled them one incident after both were released
        session.add(NearLink(item_id=sealed, other_id=dev, stage="override"))
        session.commit()
    assert [pair.model_dump() for pair in _verified_pairs(engine, first)] == [{"dev": dev, "sealed": sealed, "stage": "override", "score": None}]
    # A newcomer retelling the dev item joins a group already on both sides: it is sealed (fail closed).
    by_id = {item_id: external for external, item_id in _ids(engine).items()}
    number = int(by_id[dev].rsplit("-", 1)[1])
    ingest_and_curate(engine, "kev", [_retelling(300, number, "2024-03-05")])
    second = _refresh(engine, "2024-04-01T03:00:00+00:00")
    after = _splits(engine, second)
    newcomer = _ids(engine)["CVE-2024-0300"]
    assert after[dev] == Split.DEV.value and after[sealed] == Split.SEALED.value and after[newcomer] == Split.SEALED.value
    recorded = {(pair["dev"], pair["sealed"]) for pair in second.cross_split_pairs or []}
    assert recorded == {(dev, sealed), (dev, newcomer)}
    assert {(pair.dev, pair.sealed) for pair in _verified_pairs(engine, second)} == recorded


def test_no_near_pair_straddles_releases_of_real_bug_reports(engine: Engine) -> None:
    """Five hundred Apache Hadoop reports, curated (with the tests' hashing encoder: the real
    model's figures on the whole pool are `bench/near_groups.py`'s), released twice, the second
    release taking the reports filed after the first."""
    reports = sorted(hadoop_reports(500), key=lambda report: report["created"])
    cut = reports[len(reports) // 2]["created"][:7]
    ingest_records(engine, "hadoop", reports, HADOOP_MAPPING)
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=DedupConfig()).curate(session)
        session.commit()
    _eval(engine, sources=("hadoop",), fraction=0.2)
    first = _refresh(engine, f"{cut}-01T03:00:00+00:00")
    second = _refresh(engine, "2030-01-01T03:00:00+00:00")
    splits = _splits(engine, second)
    with Session(engine) as session:
        groups = near_groups(session, list(splits))
        links = session.exec(select(NearLink.item_id, NearLink.other_id)).all()
    linked = [(a, b) for a, b in links if a in splits and b in splits]
    assert len(linked) >= 8, "a real pool holds near neighbours"
    assert all(splits[a] == splits[b] for a, b in linked)
    assert first.cross_split_pairs == [] and second.cross_split_pairs == [] and _verified_pairs(engine, second) == []
    assert any(is_sealed(KEY, a, 0.2) != is_sealed(KEY, b, 0.2) for a, b in linked)
    sizes = [len(group & set(splits)) for group in {groups[item] for item in splits}]
    assert max(sizes) < len(splits) / 4 and statistics.mean(sizes) < 2


def test_the_migration_fills_near_links_from_stored_decisions(engine: Engine) -> None:
    reports = hadoop_reports(60)
    ingest_records(engine, "hadoop", [*reports, *planted(reports).values()], HADOOP_MAPPING)
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=DedupConfig()).curate(session)
        session.commit()
    with Session(engine) as session:
        recorded = {frozenset(pair) for pair in session.exec(select(NearLink.item_id, NearLink.other_id)).all()}
        duplicates = {frozenset((item_id, other)) for item_id, other in session.exec(select(Item.id, Item.duplicate_of).where(col(Item.duplicate_of).is_not(None))).all()}
    assert duplicates and duplicates <= recorded
    with write_session(engine) as session:
        session.exec(delete(NearLink))
        session.commit()
    config = alembic_config(engine)
    with writer_engine(engine).begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0017")
    migrate(engine)
    with Session(engine) as session:
        filled = {frozenset(pair) for pair in session.exec(select(NearLink.item_id, NearLink.other_id)).all()}
        assert session.exec(select(Release)).all() == []
    assert duplicates <= filled <= recorded
    with Session(engine) as session:
        members = session.exec(select(EvalItem)).all()
    assert members == []
