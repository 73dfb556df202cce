"""The dedup questions page, `/ui/dedup/questions`: the pairs curation asks a curator about
(`curation.dedup.questions`), one at a time, side by side (titles and bodies with the differing
words marked, dates, source, the judge's P, the features and evidence that decided), with one key
per answer: `s` same, `d` distinct, `j` / `k` the next and previous question, and buttons for
the mouse.

Items are shaped by `service.items.shaping` as on the review page: a sealed-bound item's text is
shown only to a person with the `sealed` scope holding an open sealed review window on every eval
that seals it; otherwise the pair is answered by its metadata and P alone. Answers are form posts
(with the session's CSRF value) applied as rulings (`curation.dedup.answers`), answered with a
redirect to the queue at the same place.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from markupsafe import Markup, escape
from sqlmodel import Session, col, func, select

from curation.dedup.answers import answer_question, asked_pair
from schemas.audit import AuditAction
from schemas.common import utcnow
from schemas.dedup_questions import DedupQuestion, DedupQuestionRead, QuestionRuling, QuestionState
from schemas.item import Item
from schemas.source import Source
from schemas.token import Scope
from service.core.audit import record_read
from service.core.deps import WriteSessionDep
from service.dedup.questions import question_reads
from service.evals.sealed_review import revealed_to
from service.items.ruling_guard import guarded_ruling
from service.ui.pages import done, need, page, secret_key, ui_router
from service.ui.refusals import shows_refusal
from service.ui.worddiff import side_by_side

router = ui_router()
PATH = "/ui/dedup/questions"
MAX_POSITION = 10_000_000


@dataclass(frozen=True)
class Sides:
    """The two texts of a pair with the words only one side has marked."""

    title_item: Markup
    title_other: Markup
    body_item: Markup
    body_other: Markup


def _url(source: str | None, at: int) -> str:
    query = urlencode({key: value for key, value in (("source", source or ""), ("at", str(at))) if value})
    return f"{PATH}?{query}"


def _open_ids(session: Session, source: str | None) -> list[int]:
    query = select(DedupQuestion.id).where(DedupQuestion.state == QuestionState.OPEN.value)
    if source:
        query = query.join(Item, col(Item.id) == col(DedupQuestion.item_id)).join(Source, col(Source.id) == col(Item.source_id)).where(Source.name == source)
    return [question_id for question_id in session.exec(query.order_by(col(DedupQuestion.id))).all() if question_id is not None]


def _sources(session: Session) -> list[str]:
    query = select(Source.name).join(Item, col(Item.source_id) == col(Source.id)).join(DedupQuestion, col(DedupQuestion.item_id) == col(Item.id))
    query = query.where(DedupQuestion.state == QuestionState.OPEN.value).group_by(Source.name).order_by(Source.name)
    return list(session.exec(query).all())




@router.get(PATH)
def questions_page(
    request: Request,
    source: Annotated[str | None, Query(max_length=200)] = None,
    at: Annotated[int, Query(ge=1, le=MAX_POSITION)] = 1,
) -> HTMLResponse:
    who = need(request, Scope.READ, "Reading dedup questions")
    engine = request.app.state.engine
    with Session(engine) as session:
        ids = _open_ids(session, source or None)
        if ids and at > len(ids):
            return RedirectResponse(_url(source, len(ids)), status_code=303)  # type: ignore[return-value]
        revealed = revealed_to(session=session, principal=who)
        current: DedupQuestionRead | None = None
        shown_ids: list[int] = []
        if ids:
            question = session.get(DedupQuestion, ids[at - 1])
            reads, shown = question_reads(session=session, questions=[question] if question else [], secret_key=secret_key(request), revealed=revealed)
            current = reads[0] if reads else None
            shown_ids = [item.id for item in shown if not item.withheld]
        sources = _sources(session)
        answered = session.exec(select(func.count()).select_from(DedupQuestion).where(DedupQuestion.state == QuestionState.ANSWERED.value)).one()
    sides = None
    if current is not None and not current.item.sealed and not current.other.sealed:
        title_other, title_item = side_by_side(current.other.title, current.item.title)
        body_other, body_item = side_by_side(current.other.input, current.item.input)
        sides = Sides(title_item, title_other, body_item, body_other)
    elif current is not None:  # one side withheld: the other is shown as it is, nothing compared
        sides = Sides(escape(current.item.title), escape(current.other.title), escape(current.item.input), escape(current.other.input))
    if shown_ids and current is not None:
        record_read(
            engine, actor=who.actor, action=AuditAction.DEDUP_QUESTIONS_READ, endpoint=f"GET {PATH}", object_type="dedup_question", object_id=str(current.id), item_ids=shown_ids
        )
    context: dict[str, Any] = {
        "current": current,
        "sides": sides,
        "total": len(ids),
        "at": at,
        "source": source or "",
        "sources": sources,
        "answered": answered,
        "previous": _url(source, at - 1) if at > 1 else None,
        "following": _url(source, at + 1) if at < len(ids) else None,
        "may_answer": Scope.CURATE.value in who.scopes,
        "blind": current is not None and (current.item.sealed or current.other.sealed),
    }
    return page(request, "questions.html", context)


@router.post(PATH + "/{question_id}/answer")
def answer(
    request: Request,
    question_id: int,
    ruling: Annotated[QuestionRuling, Form()],
    session: WriteSessionDep,
    source: Annotated[str, Form(max_length=200)] = "",
    at: Annotated[int, Form(ge=1, le=MAX_POSITION)] = 1,
    note: Annotated[str, Form(max_length=2000)] = "",
) -> RedirectResponse:
    who = need(request, Scope.CURATE, "Answering dedup questions")
    back = _url(source or None, at)
    shows_refusal(request, lambda refusal: done(back, f"Question {question_id} was not answered: {refusal.detail}"))
    rule = partial(answer_question, session=session, question_id=question_id, ruling=ruling, note=note, actor=who.actor, token_id=who.token_id, now=utcnow())
    revealed = revealed_to(session=session, principal=who)
    answered = guarded_ruling(session=session, item_ids=asked_pair(session, question_id), secret_key=secret_key(request), revealed=revealed, rule=rule)
    pair = (answered.item_id, answered.other_id)
    verdict = "the same incident" if ruling is QuestionRuling.SAME else "distinct incidents"
    return done(back, f"Question {question_id} answered: items {pair[0]} and {pair[1]} are {verdict}.")
