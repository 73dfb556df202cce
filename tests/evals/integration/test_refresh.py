"""Refreshing evals on both backends: rotation rules, exactly one release per period, frozen
content, verification, the sealed-read budget and the scheduler's catch-up of a missed period."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.periods import period_at
from curation.review import ReviewRefused, decide, review_batch
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.evals import EvalCreate, EvalItem, EvalUpdate
from schemas.item import Item
from schemas.release import Release, ReleaseItem
from schemas.review import Decision, ReviewDecision
from service.core.db import write_session, write_transaction
from service.core.problems import ProblemError
from service.core.settings import Settings
from service.evals.definitions import create_eval, update_eval
from service.evals.refresh import NothingToRelease, RefreshError, refresh_eval
from service.evals.releases import SealedBudgetExceeded, manifest, take_sealed_read, verify_release
from service.scheduler import GoldensetScheduler
from tests.conftest import TEST_SECRET_KEY
from tests.eval_support import distinct_words, ingest_and_curate
from tests.eval_support import item_ids_by_external_id as _ids

KEY = b"k" * 32


def kev(number: int, date: str, description: str | None = None) -> dict[str, Any]:
    """A KEV-shaped record. Records differ in words, not only in numbers: texts that differ only
    in numbers are copies once numbers are masked, so near-linked (one group for the split)."""
    return {
        "cveID": f"CVE-2024-{number:04d}",
        "vendorProject": f"Vendor{number}",
        "product": f"Product {number}",
        "vulnerabilityName": f"Vendor{number} Product {number} flaw number {number}",
        "dateAdded": date,
        "shortDescription": description or f"Product {number} from vendor {number} lets attackers do thing {number} via path {number * 7}: {distinct_words(number)}.",
        "requiredAction": "Apply mitigations per vendor instructions.",
        "dueDate": date,
        "knownRansomwareCampaignUse": "Unknown",
        "notes": "",
        "cwes": ["CWE-20"],
    }


def _eval(engine: Engine, **settings: Any) -> None:
    with write_transaction(engine) as session:
        create_eval(session=session, data=EvalCreate(name=settings.pop("name", "ops"), sources=["kev"], **settings), secret_key=TEST_SECRET_KEY, actor="test", key=KEY)


def _refresh(engine: Engine, at: str, name: str = "ops") -> Release:
    return refresh_eval(engine, name=name, at=datetime.fromisoformat(at), secret_key=TEST_SECRET_KEY, actor="test").release


def _members(engine: Engine, release: Release) -> list[str]:
    with Session(engine) as session:
        rows = session.exec(select(Item.external_id).join(ReleaseItem, col(ReleaseItem.item_id) == col(Item.id)).where(ReleaseItem.release_id == release.id)).all()
    return sorted(rows)


def test_manual_review_gates_entry_and_rotation_retires_with_reasons(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-0{1 + n % 5}-1{n % 10}") for n in range(1, 11)])
    ids = _ids(engine)
    # Newest first, no linking core: the rules of rotation alone (the core and the balance are
    # tests/evals/integration/test_linking.py's).
    _eval(engine, target_size=4, max_age_days=60, linking_share=0, balance_composition=False)
    with write_transaction(engine) as session:
        outcome = review_batch(
            session=session,
            decisions=[
                *(ReviewDecision(item_id=ids[f"CVE-2024-{n:04d}"], decision=Decision.APPROVE) for n in range(1, 9)),
                ReviewDecision(item_id=ids["CVE-2024-0009"], decision=Decision.REJECT, reason="not an incident we can grade"),
                ReviewDecision(item_id=ids["CVE-2024-0009"], decision=Decision.APPROVE),
                ReviewDecision(item_id=999_999, decision=Decision.APPROVE),
                ReviewDecision(item_id=ids["CVE-2024-0010"], decision=Decision.REJECT),
            ],
            actor="test",
            now=utcnow(),
        )
    assert len(outcome.approved) == 8 and outcome.rejected == [ids["CVE-2024-0009"]]
    assert [(error.position, error.reason) for error in outcome.errors] == [(9, "not_reviewable"), (10, "not_found"), (11, "reason_required")]
    with Session(engine) as session:
        rejected = session.exec(select(AuditEvent).where(AuditEvent.action == "item.reject")).one()
        assert rejected.details == {"reason": "not an incident we can grade", "status_before": "unique", "status": "rejected"}

    # 1 March: window [1 Jan 03:00 .. 1 Mar 03:00); approved items dated Jan/Feb: n % 5 in (0, 1) -> n = 1, 5, 6 (10 unreviewed).
    first = _refresh(engine, "2024-03-02T00:00:00+00:00")
    assert (first.number, first.period_start) == (1, datetime(2024, 3, 1, 3, tzinfo=UTC))
    assert _members(engine, first) == ["CVE-2024-0001", "CVE-2024-0005", "CVE-2024-0006"]
    assert first.diff == {"added": sorted(ids[f"CVE-2024-{n:04d}"] for n in (1, 5, 6)), "retired": [], "withheld": []}

    # The same period again, however asked: the same release.
    again = refresh_eval(engine, name="ops", at=datetime(2024, 3, 31, 23, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")
    assert (again.created, again.release.id) == (False, first.id)
    with pytest.raises(RefreshError, match="before that of release 1"):
        _refresh(engine, "2024-02-15T00:00:00+00:00")

    # Exposure retires an item; the unreviewed one stays out until approved.
    with write_session(engine) as session:
        session.exec(update(Item).where(col(Item.id) == ids["CVE-2024-0006"]).values(exposed_at=datetime(2024, 3, 10, tzinfo=UTC), exposed_reason="sent to a training endpoint"))
        decide(session=session, item_id=ids["CVE-2024-0010"], decision=Decision.APPROVE, reason="", actor="test", now=utcnow())
        session.commit()
    # 1 May: window [2 Mar .. 1 May); 1, 5 age out; 6 exposed; approved in window: n % 5 in (2, 3) -> 2, 3, 7, 8.
    second = _refresh(engine, "2024-05-01T03:00:00+00:00")
    assert second.number == 2
    assert _members(engine, second) == ["CVE-2024-0002", "CVE-2024-0003", "CVE-2024-0007", "CVE-2024-0008"]
    retired = {entry["item_id"]: entry["reason"] for entry in second.diff["retired"]}
    assert retired == {ids["CVE-2024-0001"]: "aged_out", ids["CVE-2024-0005"]: "aged_out", ids["CVE-2024-0006"]: "exposed"}
    with Session(engine) as session:
        membership = session.exec(select(EvalItem).where(EvalItem.item_id == ids["CVE-2024-0006"])).one()
        assert (membership.retired_release, membership.retired_reason, membership.first_release) == (2, "exposed", 1)
        assert membership.retired_at is not None

    # Newer items displace the oldest member (2 and 7 have aged out); a retired item never comes back.
    ingest_and_curate(engine, "kev", [kev(20, "2024-05-20"), kev(21, "2024-05-21")])
    ids = _ids(engine)
    with write_transaction(engine) as session:
        review_batch(session=session, decisions=[ReviewDecision(item_id=ids[f"CVE-2024-00{n}"], decision=Decision.APPROVE) for n in (20, 21)], actor="test", now=utcnow())
    third = _refresh(engine, "2024-06-01T03:00:00+00:00")
    assert _members(engine, third) == ["CVE-2024-0004", "CVE-2024-0008", "CVE-2024-0020", "CVE-2024-0021"]
    retired = {entry["item_id"]: entry["reason"] for entry in third.diff["retired"]}
    assert retired == {ids["CVE-2024-0002"]: "aged_out", ids["CVE-2024-0007"]: "aged_out", ids["CVE-2024-0003"]: "displaced"}
    with write_transaction(engine) as session:
        update_eval(session=session, evaluation=_get_eval(session), data=EvalUpdate(target_size=10, max_age_days=None), actor="test")
    # No age limit and room for all: every approved item ever in the window may enter, but the retired stay out.
    fourth = _refresh(engine, "2024-07-01T03:00:00+00:00")
    assert _members(engine, fourth) == ["CVE-2024-0004", "CVE-2024-0008", "CVE-2024-0010", "CVE-2024-0020", "CVE-2024-0021"]
    assert fourth.diff["added"] == [ids["CVE-2024-0010"]] and fourth.diff["retired"] == []


def _get_eval(session: Session) -> Any:
    from service.evals.definitions import require_eval

    return require_eval(session=session, name="ops")


def test_a_release_is_frozen_verified_and_its_sealed_reads_are_budgeted(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 21)])
    _eval(engine, approval_policy="auto", sealed_fraction=0.3, sealed_read_budget=2)
    release = _refresh(engine, "2024-03-01T03:00:00+00:00")
    with Session(engine) as session:
        evaluation = _get_eval(session)
        before = manifest(session=session, evaluation=evaluation, release=release)
    assert release.dev_count + release.sealed_count == 20 and 0 < release.sealed_count < 20

    # The source item changes after the release: the release does not.
    ingest_and_curate(engine, "kev", [kev(3, "2024-02-03", "A rewritten description that changes the item's text entirely.")])
    with Session(engine) as session:
        assert manifest(session=session, evaluation=evaluation, release=release) == before
        frozen = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id)).all()
        assert not any("rewritten" in row.content for row in frozen)
        assert verify_release(session=session, evaluation=evaluation, release=release).ok

    # Tampering with frozen content is found.
    victim = next(row for row in frozen if row.split == "dev")
    with write_session(engine) as session:
        session.exec(text("UPDATE release_item SET content = :content WHERE id = :id").bindparams(content=victim.content.replace("Product", "Produce"), id=victim.id))  # type: ignore[call-overload]
        session.commit()
    with Session(engine) as session:
        report = verify_release(session=session, evaluation=evaluation, release=release)
    assert not report.ok and any(f"item {victim.item_id}: content digest" in line for line in report.mismatches)
    assert any(line.startswith("dev Merkle root") for line in report.mismatches) is False  # the recorded digests still make the recorded root

    for _ in range(2):
        take_sealed_read(engine, evaluation=evaluation, release=release, actor="token:final", item_count=release.sealed_count)
    with pytest.raises(SealedBudgetExceeded, match="budget of eval 'ops' is 2 per release"):
        take_sealed_read(engine, evaluation=evaluation, release=release, actor="token:final", item_count=release.sealed_count)
    with Session(engine) as session:
        actions = [event.action for event in session.exec(select(AuditEvent).where(col(AuditEvent.action).startswith("release.sealed")).order_by(col(AuditEvent.id)))]
    assert actions == ["release.sealed_read", "release.sealed_read", "release.sealed_refused"]


def test_eval_settings_are_checked(engine: Engine) -> None:
    ingest_and_curate(engine, "kev", [kev(1, "2024-02-01")])
    with write_session(engine) as session:
        for data, message in (
            ({"sources": ["nope"]}, "unknown source"),
            ({"sources": ["kev"], "schedule": "every month"}, "five fields"),
            ({"sources": ["kev"], "source_quotas": {"other": 1}}, "unknown source"),
        ):
            with pytest.raises(ProblemError, match=message):
                create_eval(session=session, data=EvalCreate(name="bad", **data), secret_key=TEST_SECRET_KEY, actor="test")
    _eval(engine, approval_policy="auto")
    with write_session(engine) as session, pytest.raises(ProblemError, match="already exists"):
        create_eval(session=session, data=EvalCreate(name="ops", sources=["kev"]), secret_key=TEST_SECRET_KEY, actor="test")
    _refresh(engine, "2024-03-01T03:00:00+00:00")
    with write_session(engine) as session, pytest.raises(ProblemError, match="sealed fraction is fixed"):
        update_eval(session=session, evaluation=_get_eval(session), data=EvalUpdate(sealed_fraction=0.5), actor="test")
    item_id = _ids(engine)["CVE-2024-0001"]
    with write_session(engine) as session:
        decide(session=session, item_id=item_id, decision=Decision.APPROVE, reason="", actor="test", now=utcnow())  # auto-approval leaves items unique
        session.commit()
    with write_session(engine) as session, pytest.raises(ReviewRefused, match="approved, not unique: it was already approved"):
        decide(session=session, item_id=item_id, decision=Decision.REJECT, reason="changed my mind", actor="test", now=utcnow())


def test_the_scheduler_catches_up_a_missed_period_once_and_leaves_a_new_eval_for_its_schedule(engine: Engine, database_url: str) -> None:
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 6)])
    _eval(engine, approval_policy="auto", schedule="0 3 1 1 *", max_age_days=None)
    _eval(engine, name="fresh", approval_policy="auto", schedule="0 3 1 1 *", max_age_days=None)
    first = _refresh(engine, "2020-06-01T00:00:00+00:00")  # released once, years ago: the current period is missed
    settings = Settings(env="test", database_url=database_url, secret_key=TEST_SECRET_KEY, curate_after_ingest=False, curate_interval_seconds=3600)
    for start in range(2):  # a second start (or a second scheduler) finds the period done
        scheduler = GoldensetScheduler(engine, settings, sync_seconds=3600)
        scheduler.start()
        try:
            deadline = time.monotonic() + 90
            # The sync adds one eval's job after the other: wait for both, and for the catch-up to run.
            while (
                (job := scheduler.scheduler.get_job("refresh:ops")) is None
                or scheduler.scheduler.get_job("refresh:fresh") is None
                or (start == 0 and job.next_run_time < utcnow())
            ):
                assert time.monotonic() < deadline, "the refresh jobs were not added, or the catch-up did not run"
                time.sleep(0.05)
            assert "cron" in str(job.trigger)
            # Catching up happened on the first start only: afterwards the next run is the next tick.
            assert job.next_run_time > utcnow() + timedelta(hours=1)
            # A new eval, never released, waits for its schedule's next tick.
            fresh = scheduler.scheduler.get_job("refresh:fresh")
            assert fresh is not None and fresh.next_run_time > utcnow() + timedelta(hours=1)
        finally:
            scheduler.shutdown()
    with Session(engine) as session:
        releases = sorted(session.exec(select(Release)).all(), key=lambda release: release.number)
    assert [release.eval_id for release in releases] == [first.eval_id, first.eval_id]
    caught_up = releases[1]
    assert caught_up.period_start == period_at("0 3 1 1 *", utcnow()).start
    assert caught_up.dev_count + caught_up.sealed_count == 5


def test_a_manual_eval_with_nothing_approved_gets_no_empty_first_release(engine: Engine) -> None:
    """Refreshing a new eval before anyone approved an item writes nothing and says why, so the
    period's one release is still there for the items its review approves."""
    ingest_and_curate(engine, "kev", [kev(n, f"2024-02-{n:02d}") for n in range(1, 4)])
    _eval(engine, max_age_days=None)
    with pytest.raises(NothingToRelease, match=r"nothing of its sources \(kev\) is approved \(3 item\(s\) wait for review\)"):
        refresh_eval(engine, name="ops", secret_key=TEST_SECRET_KEY, actor="test")
    with Session(engine) as session:
        assert session.exec(select(Release)).first() is None
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "release.create")).first() is None
    with write_transaction(engine) as session:
        decide(session=session, item_id=min(_ids(engine).values()), decision=Decision.APPROVE, reason="", actor="test", now=utcnow())
    outcome = refresh_eval(engine, name="ops", secret_key=TEST_SECRET_KEY, actor="test")
    assert outcome.created and outcome.release.number == 1 and outcome.release.dev_count + outcome.release.sealed_count == 1
