"""Dedup questions as readers see them (`GET /v1/dedup/questions`, `goldenset dedup questions`, the
questions page): both items of each pair side by side, shaped by `service.items.shaping` (a sealed
item's content withheld unless the reader holds an open sealed review window on every eval that
seals it), the judge's P, what the rules decided and why the pair was asked, and the features and
evidence that decided, left out when either item is withheld (its scores beside the other's text
would tell what it is like)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlmodel import Session, col, select

from schemas.dedup_questions import DedupQuestion, DedupQuestionRead, QuestionEvidence, QuestionState
from schemas.item import Item
from schemas.source import Source
from service.core.cursors import decode_id_cursor, encode_cursor
from service.items.shaping import ShownItem, shape_items

CURSOR_KIND = "dedup-questions"


def why_asked(question: DedupQuestion) -> str:
    """Why curation asked, in a sentence (no score of the pair: the sentence is shown for sealed pairs too)."""
    evidence = question.evidence or {}
    threshold = evidence.get("threshold")
    bar = f" (threshold {threshold})" if isinstance(threshold, int | float) else ""
    if question.rules_outcome == "duplicate":
        return (
            f"The rules merged item {question.item_id} with item {question.other_id} as a paraphrase (stage {evidence.get('stage') or 'embedding'}), "
            f"but the same-incident judge gives P {question.p_same:.2f}, too low to confirm it{bar}: kept unique until a curator rules."
        )
    return (
        f"The rules kept item {question.item_id} unique, but it is near the earlier item {question.other_id} (seen by {evidence.get('stage') or 'embedding'}) "
        f"and the same-incident judge gives P {question.p_same:.2f}{bar}: is it the same incident?"
    )


def question_reads(*, session: Session, questions: Sequence[DedupQuestion], secret_key: str, revealed: Collection[int] = ()) -> tuple[list[DedupQuestionRead], list[ShownItem]]:
    """`questions` as the reader may see them, in order, and every item shown (for the audit)."""
    ids = sorted({question.item_id for question in questions} | {question.other_id for question in questions})
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(ids))).all() if ids else []
    shown = {item.id: item for item in shape_items(session=session, rows=[(item, name) for item, name in rows], secret_key=secret_key, revealed=revealed)}
    reads = []
    for question in questions:
        item, other = shown.get(question.item_id), shown.get(question.other_id)
        if item is None or other is None:
            continue
        reads.append(_read(question, item, other))
    return reads, list(shown.values())


def _read(question: DedupQuestion, item: ShownItem, other: ShownItem) -> DedupQuestionRead:
    assert question.id is not None
    evidence: dict[str, Any] = question.evidence or {}
    hidden = item.withheld or other.withheld
    features = {name: float(value) for name, value in (evidence.get("features") or {}).items() if isinstance(value, int | float)}
    matched = None
    if not hidden:
        matched = QuestionEvidence(
            body_cosine=features.get("body_cosine"),
            title_cosine=features.get("title_cosine"),
            minhash=features.get("jaccard"),
            body_characters=features.get("body_characters"),
            title_characters=features.get("title_characters"),
            title_differences=[str(text) for text in evidence.get("title_differences") or []],
        )
    return DedupQuestionRead(
        id=question.id,
        state=QuestionState(question.state),
        asked_at=question.asked_at,
        item=item.read(),
        other=other.read(),
        p_same=question.p_same,
        rules_outcome=question.rules_outcome,
        why=why_asked(question),
        rule=evidence.get("rule") if isinstance(evidence.get("rule"), str) else None,
        stage=evidence.get("stage") if isinstance(evidence.get("stage"), str) else None,
        features={} if hidden else features,
        evidence=matched,
        ruling=question.ruling,
        ruled_by=question.ruled_by,
        ruled_at=question.ruled_at,
        note=question.note,
    )


def question_page(
    *,
    session: Session,
    secret_key: str,
    source: str | None = None,
    state: QuestionState | None = None,
    limit: int,
    cursor: str | None = None,
    revealed: Collection[int] = (),
) -> tuple[list[DedupQuestionRead], list[ShownItem], str | None]:
    """One page of questions about items of `source` (any source: None) in `state` (any: None),
    oldest asked first (by id), the items shown, and the cursor of the next page (None on the last)."""
    query = select(DedupQuestion)
    if state is not None:
        query = query.where(DedupQuestion.state == state.value)
    if source is not None:
        query = query.join(Item, col(Item.id) == col(DedupQuestion.item_id)).join(Source, col(Source.id) == col(Item.source_id)).where(Source.name == source)
    if cursor:
        query = query.where(col(DedupQuestion.id) > decode_id_cursor(cursor, CURSOR_KIND, secret_key=secret_key))
    found = list(session.exec(query.order_by(col(DedupQuestion.id)).limit(limit + 1)).all())
    page = found[:limit]
    next_cursor = encode_cursor(CURSOR_KIND, page[-1].id, secret_key=secret_key) if len(found) > limit and page[-1].id is not None else None
    reads, shown = question_reads(session=session, questions=page, secret_key=secret_key, revealed=revealed)
    return reads, shown, next_cursor


def one_question(*, session: Session, question_id: int, secret_key: str, revealed: Collection[int] = ()) -> tuple[DedupQuestionRead | None, list[ShownItem]]:
    """Question `question_id` as the reader may see it (None when there is none), and the items shown."""
    question = session.get(DedupQuestion, question_id)
    if question is None:
        return None, []
    reads, shown = question_reads(session=session, questions=[question], secret_key=secret_key, revealed=revealed)
    return (reads[0] if reads else None), shown
