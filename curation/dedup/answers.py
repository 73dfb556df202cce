"""Curators answering the questions dedup asked (`curation.dedup.questions`).

An answer is an ordinary ruling (`curation.dedup.overrides`), so the item's status, its decision
of stage `override`, the audit trail and every later curation run follow it: `same` rules the
later incident of the pair a duplicate of the earlier (`rule_duplicate_of`, its cluster's
representative when the earlier has become a duplicate since); `distinct` rules the pair apart
(`rule_apart`), never matched again. The question records the ruling, the token that gave it and
when; it is then no longer open, so a release may take the item.

Answers are labels. `GET /v1/dedup/questions?state=answered` lists every answered pair with the
features the judge weighed and the ruling: pairs the judge and the rules disagreed on, read by a
person, which are the most informative pairs to refit the judge on (`bench/train_judge.py` reads
labelled pairs of the same shape: two records and same or not same) and to measure, per pool, how
often a merge or an asked pair was right, which is what the thresholds are chosen by.

Every function works in the session it is given and never commits.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from curation.dedup.overrides import rule_apart, rule_duplicate_of
from curation.refusals import Refused
from schemas.audit import AuditAction, AuditEvent
from schemas.dedup_questions import DedupQuestion, QuestionRuling, QuestionState
from schemas.item import Item

_CHAIN = 64


class QuestionRefused(Refused):
    """A question cannot be answered (`curation.refusals.Refused`)."""


def _later_first(session: Session, question: DedupQuestion) -> tuple[int, int]:
    """The pair as (later incident, earlier incident); ties by id."""
    item, other = session.get(Item, question.item_id), session.get(Item, question.other_id)
    if item is None or other is None:
        raise QuestionRefused("not_found", f"an item of question {question.id} no longer exists", 404)
    assert item.id is not None and other.id is not None
    return (item.id, other.id) if (item.occurred_at, item.id) >= (other.occurred_at, other.id) else (other.id, item.id)


def duplicate_chain(session: Session, item_id: int) -> list[int]:
    """`item_id` and the items its `duplicate_of` chain leads through, in order; the last is its
    representative (the item itself when it is no duplicate)."""
    chain = [item_id]
    for _ in range(_CHAIN):
        row = session.get(Item, chain[-1])
        if row is None or row.duplicate_of is None or row.duplicate_of in chain:
            break
        chain.append(row.duplicate_of)
    return chain


def asked_pair(session: Session, question_id: int) -> tuple[int, ...]:
    """The two items question `question_id` asks about (none when there is no such question)."""
    question = session.get(DedupQuestion, question_id)
    return () if question is None else (question.item_id, question.other_id)


def answer_question(*, session: Session, question_id: int, ruling: QuestionRuling, note: str, actor: str, token_id: int | None, now: datetime) -> DedupQuestion:
    """Answer open question `question_id` with `ruling` at `now` and apply it as a ruling on the pair
    (`note`, optional, is kept with both; `token_id`: the token answering, None from the local
    command line). Raises QuestionRefused: `not_found` (404), `already_answered` and `withdrawn`
    (409); and the refusals of the ruling (`curation.dedup.overrides.OverrideRefused`, e.g. 409
    `reviewed` when `same` would make a reviewed item a duplicate)."""
    question = session.get(DedupQuestion, question_id)
    if question is None:
        raise QuestionRefused("not_found", f"no dedup question with id {question_id}", 404)
    if question.state == QuestionState.ANSWERED.value:
        raise QuestionRefused("already_answered", f"question {question_id} was answered {question.ruling} already; to change that, rule on item {question.item_id} directly", 409)
    if question.state != QuestionState.OPEN.value:
        raise QuestionRefused("withdrawn", f"question {question_id} was withdrawn: curation decided item {question.item_id} again and no longer asks it", 409)
    note = note.strip()
    question.state, question.ruling, question.ruled_by, question.ruled_at, question.note = QuestionState.ANSWERED.value, ruling.value, token_id, now, note or None
    session.add(question)
    session.flush()  # answered before the ruling withdraws the pair's open questions
    why = note or f"answered dedup question {question_id}: {ruling.value}"
    if ruling is QuestionRuling.SAME:
        later, earlier = _later_first(session, question)
        rule_duplicate_of(session=session, item_id=later, other_id=duplicate_chain(session, earlier)[-1], note=why, actor=actor, now=now)
    else:
        rule_apart(session=session, item_id=question.item_id, other_id=question.other_id, note=why, actor=actor, now=now)
    session.add(
        AuditEvent(
            actor=actor,
            action=AuditAction.DEDUP_QUESTION_ANSWER,
            object_type="dedup_question",
            object_id=str(question_id),
            details={"item_id": question.item_id, "other_id": question.other_id, "ruling": ruling.value, "p_same": question.p_same, "note": note},
            at=now,
        )
    )
    return question
