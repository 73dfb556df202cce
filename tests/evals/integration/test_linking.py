"""The linking core and the balance on both backends, through the real refresh: each release carries
its share of the dev split before it (never a sealed item), retirement wins over it and the
release says how many are missing, additions follow the composition before on a skewed pool,
every release records its composition and linking core, and the old guarantees hold (splits
fixed, one release per period, verification, near groups on one side)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.visibility import sealed_item_ids
from schemas.audit import AuditEvent
from schemas.evals import EvalCreate, EvalItem, EvalUpdate
from schemas.item import Item
from schemas.release import Release, ReleaseItem
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval, require_eval, seal_keys, update_eval
from service.evals.refresh import refresh_eval
from service.evals.releases import manifest, verify_release
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids
from tests.evals.integration.test_refresh import kev

KEY = b"k" * 32
EASY, HARD = "CWE-79", "CWE-787"


def record(number: int, date: str, cwe: str) -> dict[str, Any]:
    return {**kev(number, date), "cwes": [cwe]}


def _eval(engine: Engine, **settings: Any) -> None:
    with write_transaction(engine) as session:
        data = EvalCreate(name="ops", sources=["kev"], approval_policy="auto", max_age_days=365, **settings)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)


def _refresh(engine: Engine, at: str) -> Release:
    return refresh_eval(engine, name="ops", at=datetime.fromisoformat(at), secret_key=TEST_SECRET_KEY, actor="test").release


def _rows(engine: Engine, release: Release) -> dict[int, ReleaseItem]:
    with Session(engine) as session:
        return {row.item_id: row for row in session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id))}


def _dev(rows: dict[int, ReleaseItem]) -> set[int]:
    return {item_id for item_id, row in rows.items() if row.split == "dev"}


def test_each_release_carries_its_share_of_the_dev_split_and_retirement_wins(engine: Engine) -> None:
    # 30 items a month for three months, for releases of 20: newest first would replace every item each month.
    days = {1: 30, 2: 28, 3: 30}
    records = [record(month * 100 + day, f"2024-0{month}-{day:02d}", EASY if day % 2 else HARD) for month, count in days.items() for day in range(1, count + 1)]
    ingest_and_curate(engine, "kev", records)
    _eval(engine, target_size=20, linking_share=0.5)
    first = _refresh(engine, "2024-02-01T03:00:00+00:00")
    second = _refresh(engine, "2024-03-01T03:00:00+00:00")
    before, after = _rows(engine, first), _rows(engine, second)
    assert first.linking is not None and first.linking["previous_release"] is None and first.linking["wanted"] == 0
    core = second.linking
    assert core is not None and second.composition is not None
    carried = _dev(before) & _dev(after)
    assert core["previous_release"] == 1 and core["previous_dev"] == first.dev_count and core["dev"] == second.dev_count
    assert core["carried"] == len(carried) >= core["wanted"] == math.ceil(0.5 * second.dev_count) and core["could_not_keep"] == 0
    assert core["carried_share"] == round(len(carried) / second.dev_count, 4)
    # Never from the sealed slice, and an item's split never changes.
    assert not (set(before) - _dev(before)) & _dev(after)
    assert all(before[item_id].split == row.split for item_id, row in after.items() if item_id in before)
    assert second.composition["items"] == 20 and second.composition["balanced_against"] == 1
    # Exactly one release per period, whatever the linking core.
    again = refresh_eval(engine, name="ops", at=datetime(2024, 3, 20, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")
    assert (again.created, again.release.id) == (False, second.id)

    # All but two of the second release's dev items are exposed before the third: retirement wins.
    exposed = sorted(_dev(after))[2:]
    with write_session(engine) as session:
        session.exec(update(Item).where(col(Item.id).in_(exposed)).values(exposed_at=datetime(2024, 3, 15, tzinfo=UTC), exposed_reason="sent to a training endpoint"))
        session.commit()
    third = _refresh(engine, "2024-04-01T03:00:00+00:00")
    core = third.linking
    assert core is not None
    assert core["carried"] == 2 and core["wanted"] == math.ceil(0.5 * third.dev_count) and core["could_not_keep"] == core["wanted"] - 2
    assert core["left_by_rule"] == {"exposed": len(exposed)}
    assert third.dev_count + third.sealed_count == 20
    with Session(engine) as session:
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "release.create").order_by(col(AuditEvent.id).desc())).first()
        assert event is not None and (event.details["linking_carried"], event.details["linking_could_not_keep"]) == (2, core["could_not_keep"])
        evaluation = require_eval(session=session, name="ops")
        for release in (first, second, third):
            report = verify_release(session=session, evaluation=evaluation, release=release, seal_key=KEY)
            assert report.ok and report.cross_split_pairs == []
        memberships = session.exec(select(EvalItem).where(col(EvalItem.item_id).in_(exposed))).all()
        assert {membership.retired_reason for membership in memberships} == {"exposed"}


def test_additions_follow_the_composition_before_on_a_skewed_pool(engine: Engine) -> None:
    # January and February: half easy, half hard. March and April: nine in ten of what arrives is easy.
    even = [record(month * 100 + day, f"2024-0{month}-{day:02d}", EASY if day % 2 else HARD) for month in (1, 2) for day in range(1, 21)]
    skewed = [record(month * 100 + day, f"2024-0{month}-{day:02d}", HARD if day % 10 == 0 else EASY) for month in (3, 4) for day in range(1, 21)]
    ingest_and_curate(engine, "kev", even + skewed)
    _eval(engine, target_size=40)
    with write_transaction(engine) as session:
        data = EvalCreate(name="newest", sources=["kev"], approval_policy="auto", max_age_days=365, target_size=40, linking_share=0, balance_composition=False)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
    shares: dict[str, list[float]] = {"ops": [], "newest": []}
    for name, found in shares.items():
        for at in ("2024-03-01T03:00:00+00:00", "2024-04-01T03:00:00+00:00", "2024-05-01T03:00:00+00:00"):
            release = refresh_eval(engine, name=name, at=datetime.fromisoformat(at), secret_key=TEST_SECRET_KEY, actor="test").release
            assert release.composition is not None and release.dev_count + release.sealed_count == 40
            found.append(next((entry["share"] for entry in release.composition["tag"] if entry["value"] == HARD), 0.0))
    assert shares["ops"][0] == shares["newest"][0] == 0.5  # the first release is January and February, newest first
    assert all(abs(later - earlier) <= 0.1 for earlier, later in zip(shares["ops"], shares["ops"][1:], strict=False)), shares
    assert all(abs(share - 0.5) <= 0.1 for share in shares["ops"]), shares
    assert shares["newest"][1:] == [0.3, 0.1], shares  # newest first: what arrives, as it arrives


def test_the_manifest_shows_the_composition_without_naming_a_category_only_sealed_items_carry(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [record(n, f"2024-01-{n:02d}", EASY if n % 2 else HARD) for n in range(1, 29)])
    ids = _ids(engine)
    with write_transaction(engine) as session:
        create_eval(session=session, data=EvalCreate(name="ops", sources=["kev"], approval_policy="auto", max_age_days=365), secret_key=TEST_SECRET_KEY, actor="test", key=KEY)
        sealed = sorted(sealed_item_ids(session=session, item_ids=list(ids.values()), seal_key_of=seal_keys(secret_key=TEST_SECRET_KEY)))
    assert sealed
    with write_session(engine) as session:
        session.exec(update(Item).where(col(Item.id) == sealed[0]).values(tags=["CWE-ONLY-SEALED"]))
        session.commit()
    release = _refresh(engine, "2024-02-01T03:00:00+00:00")
    with Session(engine) as session:
        evaluation = require_eval(session=session, name="ops")
        shown = manifest(session=session, evaluation=evaluation, release=release)
    assert shown.composition is not None and shown.linking is not None
    assert shown.composition.items == 28 and {entry.value for entry in shown.composition.source} == {"kev"}
    tags = {entry.value: entry.count for entry in shown.composition.tag}
    assert "CWE-ONLY-SEALED" not in shown.model_dump_json() and tags["(other)"] == 1
    assert sum(entry.count for entry in shown.composition.age) == 28 and {entry.value for entry in shown.composition.age} <= {"<30d", "30-89d"}
    assert shown.linking.previous_release is None and shown.linking.dev == release.dev_count


def test_linking_can_be_turned_off_and_changed(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [record(month * 100 + day, f"2024-0{month}-{day:02d}", EASY) for month in (1, 2) for day in range(1, 29)])
    _eval(engine, target_size=10, linking_share=0.0, balance_composition=False)
    _refresh(engine, "2024-02-01T03:00:00+00:00")
    second = _refresh(engine, "2024-03-01T03:00:00+00:00")
    assert second.linking is not None and (second.linking["carried"], second.linking["wanted"]) == (0, 0)
    assert second.composition is not None and second.composition["balanced_against"] is None
    with write_transaction(engine) as session:
        changed = update_eval(session=session, evaluation=require_eval(session=session, name="ops"), data=EvalUpdate(linking_share=0.9), actor="test")
        assert changed.linking_share == 0.9
