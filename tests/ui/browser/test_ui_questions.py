"""The dedup questions page: a curator reaches it from the nav, walks the pairs with `j` and `k`,
answers `s` (same) and `d` (distinct) from the keyboard and with the buttons; a pair holding a
sealed-bound item shows none of its text and cannot be answered without reading it; a reader sees
the pairs but no answer buttons."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.dedup_questions import DedupQuestion
from schemas.evals import EvalCreate
from schemas.item import Item
from service.core.db import write_session, write_transaction
from service.evals.definitions import create_eval
from service.items.shaping import withheld
from tests.conftest import TEST_SECRET_KEY
from tests.question_support import ORIGINAL, PLANT, asked_world
from tests.ui.browser.conftest import SEAL_KEY, Shots, UiServer, make_tokens, sign_in

PAGE = "/ui/dedup/questions"


def seed(engine: Engine) -> dict[str, str]:
    """Hadoop reports with one planted paraphrase asked about (the judge does not confirm it), an
    eval sealing half of the source, and three more questions: one about a sealed-bound item and
    two about visible items."""
    ids = asked_world(engine, p=0.1)
    with write_session(engine) as session:
        data = EvalCreate(name="bugs", sources=["hadoop"], approval_policy="manual", max_age_days=None, sealed_fraction=0.5, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=SEAL_KEY)
        session.commit()
    with Session(engine) as session:
        hidden = withheld(session=session, item_ids=list(ids.values()), secret_key=TEST_SECRET_KEY)
    visible = sorted(item_id for external_id, item_id in ids.items() if item_id not in hidden and external_id not in (PLANT, ORIGINAL))
    sealed = sorted(item_id for external_id, item_id in ids.items() if item_id in hidden and external_id not in (PLANT, ORIGINAL))
    assert len(visible) >= 3 and sealed
    with write_transaction(engine) as session:
        for item_id, other_id in ((sealed[-1], visible[0]), (visible[-1], visible[0]), (visible[-2], visible[0])):
            session.add(DedupQuestion(item_id=item_id, other_id=other_id, p_same=0.42, rules_outcome="unique", evidence={"stage": "embedding", "features": {"body_cosine": 0.8}}))
    return make_tokens(engine)


def _open(engine: Engine) -> list[DedupQuestion]:
    with Session(engine) as session:
        return list(session.exec(select(DedupQuestion).where(DedupQuestion.state == "open").order_by(col(DedupQuestion.id))))


def _texts(engine: Engine, item_id: int) -> list[str]:
    with Session(engine) as session:
        item = session.get(Item, item_id)
    assert item is not None
    return [item.external_id, *(text for text in (item.title, item.input.splitlines()[0][:50]) if len(text) > 8)]


def _press(page: Page, key: str) -> None:
    """Press a shortcut once the page's script has run."""
    page.wait_for_load_state()
    page.keyboard.press(key)


def _position(page: Page, at: int, total: int) -> None:
    expect(page.get_by_text(f"Question {at} of {total}")).to_be_visible()


def test_a_curator_walks_and_answers_the_questions_with_the_keyboard(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    asked = _open(engine)
    total = len(asked)
    sign_in(page, ui_server, "curator")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Questions").click()
    expect(page.get_by_role("heading", name="Dedup questions")).to_be_visible()
    _position(page, 1, total)
    shots(page, "first question")
    _press(page, "j")
    _position(page, 2, total)
    _press(page, "k")
    _position(page, 1, total)
    with Session(engine) as session:
        hidden = withheld(session=session, item_ids=[id_ for q in asked for id_ in (q.item_id, q.other_id)], secret_key=TEST_SECRET_KEY)
    # Every pair shown: sealed-bound items without any of their text, visible ones in full.
    for at, question in enumerate(asked, start=1):
        page.goto(f"{PAGE}?at={at}")
        _position(page, at, total)
        content, shown = page.content(), page.locator("main").inner_text()
        for item_id in (question.item_id, question.other_id):
            texts = _texts(engine, item_id)
            if item_id in hidden:
                assert not [text for text in texts if text in content or text in shown], (at, item_id)
                expect(page.get_by_text(f"Item {item_id} is bound for a sealed slice").first).to_be_visible()
            else:
                assert texts[0] in shown  # its external id, beside its link
        shots(page, f"question {at}")
    # Answer the first visible pair with `s`, the next with `d`.
    answerable = [question for question in asked if question.item_id not in hidden and question.other_id not in hidden]
    assert answerable
    first = answerable[0]
    page.goto(f"{PAGE}?at={asked.index(first) + 1}")
    _press(page, "s")
    expect(page.get_by_role("status").first).to_contain_text(f"Question {first.id} answered")
    expect(page.get_by_role("status").first).to_contain_text("the same incident")
    remaining = _open(engine)
    assert first.id not in [question.id for question in remaining] and len(remaining) == total - 1
    expect(page.get_by_text(re.compile(rf"Question \d of {total - 1}"))).to_be_visible()
    for question, answer in zip(answerable[1:], ("d", "click"), strict=True):
        page.goto(f"{PAGE}?at={[open_.id for open_ in _open(engine)].index(question.id) + 1}")
        if answer == "click":  # the mouse answers too
            page.get_by_role("button", name="Distinct").click()
        else:
            _press(page, answer)
        expect(page.get_by_role("status").first).to_contain_text(f"Question {question.id} answered")
        expect(page.get_by_role("status").first).to_contain_text("distinct incidents")
    shots(page, "after answers")
    # A pair holding a withheld item cannot be ruled on blind: no buttons, and the keys do nothing.
    left = _open(engine)
    assert left and all(question.item_id in hidden or question.other_id in hidden for question in left)
    page.goto(f"{PAGE}?at=1")
    expect(page.get_by_text("A withheld item cannot be ruled on")).to_be_visible()
    expect(page.get_by_role("button", name="Same incident")).to_have_count(0)
    _press(page, "s")
    assert [question.id for question in _open(engine)] == [question.id for question in left]


def test_a_reader_sees_the_questions_but_cannot_answer(page: Page, ui_server: UiServer) -> None:
    sign_in(page, ui_server, "reader")
    page.goto(PAGE)
    expect(page.get_by_role("heading", name="Dedup questions")).to_be_visible()
    expect(page.get_by_role("button", name="Same incident")).to_have_count(0)
    content = page.content()
    assert "needs a token with the" in content or "No open questions" in content
