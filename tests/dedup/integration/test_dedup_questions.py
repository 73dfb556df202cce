"""Dedup questions on every backend: curation asks instead of merging (the item stays unique with
one open question, near-linked to the other), updates or withdraws the question when it decides
the item again, answers apply as rulings that later curation keeps, and releases take no item
with an open question until it is answered."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.answers import QuestionRefused, answer_question
from curation.dedup.overrides import OverrideRefused
from curation.dedup.questions import refit_for
from curation.dedup.rules import DedupConfig
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.dedup import DedupDecision, DedupOverride, NearLink
from schemas.dedup_questions import DedupQuestion, QuestionRuling, QuestionState
from schemas.evals import ApprovalPolicy, EvalCreate
from schemas.item import Item, ItemStatus
from schemas.release import ReleaseItem
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval
from service.evals.refresh import refresh_eval
from service.items.reads import dedup_read
from tests.conftest import TEST_SECRET_KEY
from tests.dedup_support import hadoop_reports, ingest
from tests.question_support import CONFIG, ORIGINAL, PLANT, REPORTS, asked_world, curate, questions, reversed_copy


def _item(engine: Engine, item_id: int) -> Item:
    with Session(engine) as session:
        item = session.get(Item, item_id)
    assert item is not None
    return item


def _newest(engine: Engine, item_id: int) -> DedupDecision:
    with Session(engine) as session:
        decision = session.exec(select(DedupDecision).where(DedupDecision.item_id == item_id).order_by(col(DedupDecision.id).desc())).first()
    assert decision is not None
    return decision


def _recurate(engine: Engine, p: float, words: str, config: DedupConfig | None = None) -> None:
    original = next(report for report in hadoop_reports(REPORTS) if report["id"] == ORIGINAL)
    assert ingest(engine, "hadoop", [reversed_copy(original, words=words)]).updated == 1
    summary = curate(engine, p, config) if config is not None else curate(engine, p)
    assert summary.decided == 1


def _answer(engine: Engine, question_id: int, ruling: QuestionRuling, note: str = "") -> None:
    with write_transaction(engine) as session:
        answer_question(session=session, question_id=question_id, ruling=ruling, note=note, actor="token:curator", token_id=7, now=utcnow())


def test_a_merge_the_judge_does_not_confirm_is_asked_and_kept_unique(engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant, original = ids[PLANT], ids[ORIGINAL]
    (question,) = questions(engine)
    assert (question.item_id, question.other_id, question.state, question.rules_outcome, question.p_same) == (plant, original, "open", "duplicate", 0.1)
    assert (question.evidence["rule"], question.evidence["stage"], question.evidence["threshold"]) == ("fresh", "embedding", 0.6)
    assert question.evidence["features"]["body_cosine"] > 0.85 and question.evidence["title_differences"] == []
    assert (_item(engine, plant).status, _item(engine, plant).duplicate_of) == (ItemStatus.UNIQUE.value, None)
    decision = _newest(engine, plant)
    assert (decision.status, decision.stage, decision.matched_item_id) == ("unique", "none", None)
    assert decision.details["asked"]["other"] == original and decision.details["p_same"] == 0.1
    with Session(engine) as session:
        stored = session.get(Item, plant)
        assert stored is not None
        explained = dedup_read(session, stored, secret_key=TEST_SECRET_KEY).explanation
    assert explained is not None and explained.p_same == 0.1 and "a curator is asked" in explained.summary
    with Session(engine) as session:
        links = {frozenset(pair) for pair in session.exec(select(NearLink.item_id, NearLink.other_id)).all()}
    assert frozenset((plant, original)) in links


def test_a_judge_that_confirms_leaves_the_merge_and_deciding_again_withdraws_or_updates_the_question(engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant, original = ids[PLANT], ids[ORIGINAL]
    _recurate(engine, 0.2, "again")  # still asked: the one open question is updated
    (question,) = questions(engine)
    assert (question.state, question.p_same, question.other_id) == ("open", 0.2, original)
    _recurate(engine, 0.9, "and again")  # confirmed now: merged, and the question withdrawn
    (question,) = questions(engine)
    assert question.state == QuestionState.WITHDRAWN.value
    assert (_item(engine, plant).status, _item(engine, plant).duplicate_of) == (ItemStatus.DUPLICATE.value, original)
    # Without a judge (or with asking switched off) the rules decide alone.
    _recurate(engine, 0.1, "once more", DedupConfig(confirm_threshold=0.0, ask_threshold=1.0))
    assert [q.state for q in questions(engine)] == ["withdrawn"]
    assert _item(engine, plant).status == ItemStatus.DUPLICATE.value


def test_a_unique_item_near_a_likely_same_earlier_one_is_asked_from_the_ask_threshold(engine: Engine) -> None:
    # Another title: the `fresh` rule wants titles alike too, so the rules keep it unique, near the original.
    config = DedupConfig(confirm_threshold=0.6, ask_threshold=0.97)
    ids = asked_world(engine, p=0.97, title="Static initialiser trouble in the RPC verifier classes", config=config)
    plant, original = ids[PLANT], ids[ORIGINAL]
    with Session(engine) as session:
        items = {item.id: item for item in session.exec(select(Item))}
        links = {frozenset(pair) for pair in session.exec(select(NearLink.item_id, NearLink.other_id)).all()}
    asked = questions(engine)
    assert asked and len({question.item_id for question in asked}) == len(asked)
    for question in asked:
        assert (question.rules_outcome, question.p_same, question.state) == ("unique", 0.97, "open")
        assert items[question.item_id].status == ItemStatus.UNIQUE.value
        assert items[question.other_id].occurred_at <= items[question.item_id].occurred_at
        assert frozenset((question.item_id, question.other_id)) in links
        assert question.evidence["stage"] in ("minhash", "embedding", "exact") and question.evidence["rule"] is None
    assert (plant, original) in {(question.item_id, question.other_id) for question in asked}
    # Just below the ask threshold nothing is asked, and the open questions are withdrawn.
    _recurate_titled(engine, 0.969, config)
    assert not [question for question in questions(engine) if question.state == "open" and question.item_id == plant]


def _recurate_titled(engine: Engine, p: float, config: DedupConfig) -> None:
    original = next(report for report in hadoop_reports(REPORTS) if report["id"] == ORIGINAL)
    plant = reversed_copy(original, words="more words", title="Static initialiser trouble in the RPC verifier classes")
    assert ingest(engine, "hadoop", [plant]).updated == 1
    assert curate(engine, p, config).decided == 1


def test_answering_same_makes_the_later_item_a_duplicate_that_later_curation_keeps(engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant, original = ids[PLANT], ids[ORIGINAL]
    (question,) = questions(engine)
    assert question.id is not None
    _answer(engine, question.id, QuestionRuling.SAME, "one fix closes both")
    (answered,) = questions(engine)
    assert (answered.state, answered.ruling, answered.ruled_by, answered.note) == ("answered", "same", 7, "one fix closes both")
    assert answered.ruled_at is not None
    assert (_item(engine, plant).status, _item(engine, plant).duplicate_of) == (ItemStatus.DUPLICATE.value, original)
    decision = _newest(engine, plant)
    assert (decision.stage, decision.matched_item_id, decision.details["rule"]) == ("override", original, "override")
    with Session(engine) as session:
        actions = [event.action for event in session.exec(select(AuditEvent).order_by(col(AuditEvent.id)))]
        (ruling,) = session.exec(select(DedupOverride)).all()
    assert actions[-2:] == ["item.duplicate_of", "dedup.question_answer"]
    assert (ruling.kind, ruling.item_id, ruling.other_id, ruling.actor) == ("duplicate_of", plant, original, "token:curator")
    _recurate(engine, 0.1, "changed after the ruling")
    assert (_item(engine, plant).status, _newest(engine, plant).stage) == (ItemStatus.DUPLICATE.value, "override")
    assert [q.state for q in questions(engine)] == ["answered"]
    with pytest.raises(QuestionRefused) as refused:
        _answer(engine, question.id, QuestionRuling.DISTINCT)
    assert (refused.value.reason, refused.value.status) == ("already_answered", 409)
    with pytest.raises(QuestionRefused) as unknown:
        _answer(engine, 999_999, QuestionRuling.SAME)
    assert (unknown.value.reason, unknown.value.status) == ("not_found", 404)


def test_answering_distinct_rules_the_pair_apart_for_good(engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant, original = ids[PLANT], ids[ORIGINAL]
    (question,) = questions(engine)
    assert question.id is not None
    _answer(engine, question.id, QuestionRuling.DISTINCT)
    assert _item(engine, plant).status == ItemStatus.UNIQUE.value
    with Session(engine) as session:
        (ruling,) = session.exec(select(DedupOverride)).all()
    assert (ruling.kind, ruling.item_id, ruling.other_id, ruling.note) == ("not_duplicate", plant, original, f"answered dedup question {question.id}: distinct")
    assert _newest(engine, plant).stage == "override"
    # Decided again, with a judge that would confirm: the pair is never matched nor asked again.
    _recurate(engine, 0.99, "changed")
    assert _item(engine, plant).status == ItemStatus.UNIQUE.value
    assert [q.state for q in questions(engine)] == ["answered"]
    _recurate(engine, 0.1, "changed again")
    assert not [q for q in questions(engine) if q.state == "open" and q.other_id == original]


def test_a_ruling_by_other_means_settles_the_open_question(engine: Engine) -> None:
    from curation.dedup.overrides import rule_duplicate_of

    ids = asked_world(engine, p=0.1)
    with write_transaction(engine) as session:
        rule_duplicate_of(session=session, item_id=ids[PLANT], other_id=ids[ORIGINAL], note="read both", actor="token:curator", now=utcnow())
    (question,) = questions(engine)
    assert question.state == QuestionState.WITHDRAWN.value and question.id is not None
    with pytest.raises(QuestionRefused) as refused:
        _answer(engine, question.id, QuestionRuling.SAME)
    assert refused.value.reason == "withdrawn"


def test_same_on_a_reviewed_later_item_is_refused_and_nothing_changes(engine: Engine) -> None:
    from curation.review import decide
    from schemas.review import Decision

    ids = asked_world(engine, p=0.1)
    with write_transaction(engine) as session:
        decide(session=session, item_id=ids[PLANT], decision=Decision.APPROVE, reason="", actor="token:reviewer", now=utcnow())
    (question,) = questions(engine)
    assert question.id is not None
    with pytest.raises(OverrideRefused) as refused:
        _answer(engine, question.id, QuestionRuling.SAME)
    assert refused.value.reason == "reviewed"
    assert [q.state for q in questions(engine)] == ["open"]


def test_releases_take_no_item_with_an_open_question_until_it_is_answered(engine: Engine) -> None:
    ids = asked_world(engine, p=0.1)
    plant = ids[PLANT]
    with write_transaction(engine) as session:
        data = EvalCreate(name="hadoop-eval", sources=["hadoop"], approval_policy=ApprovalPolicy.AUTO, sealed_fraction=0.0, target_size=500, max_age_days=None)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=b"k" * 32)

    def members(at: str) -> set[int]:
        release = refresh_eval(engine, name="hadoop-eval", at=datetime.fromisoformat(at), secret_key=TEST_SECRET_KEY, actor="test").release
        with Session(engine) as session:
            return set(session.exec(select(ReleaseItem.item_id).where(ReleaseItem.release_id == release.id)).all())

    first = members("2022-01-01T03:00:00+00:00")
    assert ids[ORIGINAL] in first and plant not in first
    (question,) = questions(engine)
    assert question.id is not None
    _answer(engine, question.id, QuestionRuling.DISTINCT, "two incidents")
    assert plant in members("2022-02-01T03:00:00+00:00")


def test_answers_refit_the_judge_for_their_source(engine: Engine) -> None:
    """Curators who keep answering `same` where the judge said 0.1 make a later merge of that
    source confirmed instead of asked: P is refitted per source from its answers."""
    ids = asked_world(engine, p=0.1)
    plant = ids[PLANT]
    assert [question.item_id for question in questions(engine) if question.state == QuestionState.OPEN.value] == [plant]
    others = sorted(item_id for external_id, item_id in ids.items() if external_id not in (PLANT, ORIGINAL))
    features = {"body_cosine": 0.93, "title_cosine": 0.9}
    with write_session(engine) as session:
        for position, item_id in enumerate(others[:20]):
            ruling = QuestionRuling.DISTINCT if position < 3 else QuestionRuling.SAME
            session.add(
                DedupQuestion(
                    item_id=item_id,
                    other_id=others[-1],
                    p_same=0.1,
                    rules_outcome="duplicate",
                    evidence={"shipped_p": 0.1, "features": features},
                    state=QuestionState.ANSWERED.value,
                    ruling=ruling.value,
                )
            )
        session.commit()
    with Session(engine) as session:
        source_refit = refit_for(session, _item(engine, plant).source_id)
    assert source_refit is not None and source_refit.rulings == 20
    assert source_refit.probability(0.1, features) >= CONFIG.confirm_threshold
    _recurate(engine, 0.1, "again")
    item = _item(engine, plant)
    assert item.status == ItemStatus.DUPLICATE.value, "the refitted judge confirms the merge"
    asked = [question for question in questions(engine) if question.item_id == plant]
    assert all(question.state == QuestionState.WITHDRAWN.value for question in asked)


def test_a_source_whose_queue_is_full_is_not_asked_more(engine: Engine) -> None:
    """At `ask_share` of a source's items with an open question, curation asks no more of it:
    the rules decide alone (the planted paraphrase is merged) until curators answer."""
    reports = hadoop_reports(REPORTS)
    assert ingest(engine, "hadoop", reports).rejected == 0
    curate(engine, None)
    with write_session(engine) as session:
        first, second = session.exec(select(Item.id).order_by(col(Item.id)).limit(2)).all()
        assert first is not None and second is not None
        session.add(DedupQuestion(item_id=second, other_id=first, p_same=0.5, rules_outcome="unique", evidence={}))
        session.commit()
    full = DedupConfig(confirm_threshold=0.6, ask_threshold=0.95, ask_share=0.01)  # room for one open question in 51 items
    original = next(report for report in reports if report["id"] == ORIGINAL)
    assert ingest(engine, "hadoop", [reversed_copy(original)]).rejected == 0
    curate(engine, 0.1, full)
    with Session(engine) as session:
        plant = session.exec(select(Item).where(Item.external_id == PLANT)).one()
    assert plant.status == ItemStatus.DUPLICATE.value, "no room to ask: the rules' merge stands"
    assert [question.item_id for question in questions(engine)] == [second]
    with write_session(engine) as session:
        waiting = session.exec(select(DedupQuestion)).one()
        waiting.state = QuestionState.WITHDRAWN.value
        session.add(waiting)
        session.commit()
    _recurate(engine, 0.1, "again", full)
    assert _item(engine, plant.id or 0).status == ItemStatus.UNIQUE.value, "room again: the merge the judge doubts is asked"
