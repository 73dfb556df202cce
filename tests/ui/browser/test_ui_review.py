"""The review queue page on real GitBugs Hadoop reports curated with the real embedding model: a
curator works through it with the keyboard (approve, reject with a reason, skip, back, undo),
compares an item with its nearest earlier items, filters and decides in bulk; sealed-bound items
are reviewed by metadata only until a person with `sealed` opens the audited sealed view; a
read-only person can neither see the queue nor change anything."""

from __future__ import annotations

import copy
import re
from typing import Any

from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from schemas.audit import AuditEvent
from schemas.dedup import DedupDecision
from schemas.evals import EvalCreate
from schemas.item import Item, ItemStatus
from service.core.db import write_session
from service.dedup.runner import run_curation
from service.evals.definitions import create_eval
from service.items.shaping import withheld
from service.ui.review_neighbours import NEIGHBOUR_FLOOR, NEIGHBOURS
from tests.conftest import TEST_SECRET_KEY, make_settings
from tests.dedup_support import hadoop_reports, ingest, planted, shared_encoder
from tests.ui.browser.conftest import SEAL_KEY, Shots, UiServer, make_tokens, sign_in

EVAL = "bugs"
CONNECTORS = ("ABFS", "GCS", "WASB")
QUEUE = f"/ui/evals/{EVAL}/review"


def seed(engine: Engine) -> dict[str, str]:
    """60 Hadoop reports and their planted duplicates in source `hadoop`, curated with the real
    model; an eval `bugs` over them with manual approval and a 20% sealed slice."""
    reports = hadoop_reports(60)
    ingest(engine, "hadoop", [*reports, *planted(reports).values(), *(_sibling(reports, connector) for connector in CONNECTORS)])
    run_curation(engine, make_settings(str(engine.url.render_as_string(hide_password=False))), encoder=shared_encoder())
    with write_session(engine) as session:
        data = EvalCreate(name=EVAL, sources=["hadoop"], approval_policy="manual", max_age_days=None, sealed_fraction=0.2, target_size=500)
        create_eval(session=session, data=data, secret_key=TEST_SECRET_KEY, actor="test", key=SEAL_KEY)
        session.commit()
    return make_tokens(engine)


def _sibling(reports: list[dict[str, Any]], connector: str) -> dict[str, Any]:
    """A later report about another filesystem connector, written like report 13398683: close to
    it, yet a different incident (dedup keeps it)."""
    original = next(report for report in reports if report["id"] == "13398683")
    sibling = copy.deepcopy(original)
    sibling.update(id=f"PLANT-{connector}", created="2021-10-02T09:00:00", title=original["title"].replace("S3A", connector))
    sibling["description"] = original["description"].replace("S3A", connector).replace("significantly", "greatly")
    return sibling


def _pending(engine: Engine) -> list[Item]:
    with Session(engine) as session:
        return list(session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.occurred_at), col(Item.id))).all())


def _sealed_ids(engine: Engine) -> set[int]:
    with Session(engine) as session:
        return withheld(session=session, item_ids=[item.id for item in _pending(engine) if item.id is not None], secret_key=TEST_SECRET_KEY)


def _status(engine: Engine, item_id: int) -> str:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        return item.status


def _position(page: Page) -> tuple[int, int]:
    text = page.locator(".position").inner_text()
    found = re.search(r"Item (\d+) of (\d+)", text)
    assert found, text
    return int(found.group(1)), int(found.group(2))


def _press(page: Page, key: str) -> None:
    """Press a shortcut once the page's script has run."""
    page.wait_for_load_state()
    page.keyboard.press(key)


def _current_id(page: Page) -> int:
    return int(page.locator("form[action$='/review/decide'] input[name=item_id]").first.get_attribute("value") or 0)


def test_a_curator_reviews_with_the_keyboard_and_undoes(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sign_in(page, ui_server, "curator")
    page.goto(QUEUE)
    expect(page.get_by_role("heading", name=f"Review: {EVAL}")).to_be_visible()
    at, total = _position(page)
    assert (at, total) == (1, len(_pending(engine)))
    shots(page, "queue first item")

    first = _current_id(page)
    _press(page, "a")
    expect(page.get_by_role("status").first).to_contain_text(f"Item {first} approved")
    assert _status(engine, first) == ItemStatus.APPROVED.value
    assert _position(page) == (1, total - 1)
    assert _current_id(page) != first
    shots(page, "after approve")

    _press(page, "u")
    expect(page.get_by_role("status").first).to_contain_text("Undone")
    assert _status(engine, first) == ItemStatus.UNIQUE.value
    assert _position(page) == (1, total) and _current_id(page) == first

    _press(page, "s")
    expect(page.locator(".position")).to_contain_text(f"Item 2 of {total}")
    second = _current_id(page)
    _press(page, "b")
    expect(page.locator(".position")).to_contain_text(f"Item 1 of {total}")
    _press(page, "s")
    expect(page.locator(".position")).to_contain_text(f"Item 2 of {total}")

    # r puts the cursor in Reason; Enter there rejects (never approves).
    _press(page, "r")
    expect(page.get_by_label("Reason", exact=True)).to_be_focused()
    page.keyboard.type("a build warning, not an incident")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").first).to_contain_text(f"Item {second} rejected")
    assert _status(engine, second) == ItemStatus.REJECTED.value
    with Session(engine) as session:
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "item.reject", AuditEvent.object_id == str(second))).one()
        assert event.details["reason"] == "a build warning, not an incident" and event.actor == "token:curator"
    shots(page, "after reject")

    # Rejecting without a reason is refused and changes nothing.
    third = _current_id(page)
    page.get_by_role("button", name="Reject", exact=True).click()  # the browser's own check stops an empty Reason
    assert _status(engine, third) == ItemStatus.UNIQUE.value


def test_escape_leaves_a_field_and_question_mark_lists_the_keys(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "curator")
    page.goto(QUEUE)
    at, total = _position(page)
    reason = page.get_by_label("Reason", exact=True)
    _press(page, "r")
    expect(reason).to_be_focused()
    page.keyboard.type("half a thought")
    # Escape leaves the field with what was typed; the next key is a shortcut again, not text.
    page.keyboard.press("Escape")
    expect(reason).not_to_be_focused()
    expect(reason).to_have_value("half a thought")
    help_list = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_list).to_have_count(0)
    page.keyboard.press("?")
    expect(help_list).to_be_visible()
    expect(reason).to_have_value("half a thought")
    listed = help_list.locator("dt").all_inner_texts()
    for key in ("a", "r", "e", "s", "/", "Esc", "?"):
        assert key in listed, (key, listed)
    expect(help_list).to_contain_text("Approve this item")
    expect(help_list).to_contain_text("Reason: type why, then Enter rejects this item")
    shots(page, "keyboard shortcuts")
    page.keyboard.press("Escape")
    expect(help_list).to_be_hidden()
    page.keyboard.press("?")
    expect(help_list).to_be_visible()
    page.keyboard.press("a")  # no shortcut fires while the list is open
    page.keyboard.press("?")
    expect(help_list).to_be_hidden()
    assert _position(page) == (at, total)

    # The text filter (a search field) keeps its text on Escape.
    _press(page, "/")
    text = page.get_by_label("Text", exact=True)
    expect(text).to_be_focused()
    page.keyboard.type("S3A")
    page.keyboard.press("Escape")
    expect(text).not_to_be_focused()
    expect(text).to_have_value("S3A")
    page.keyboard.press("s")
    expect(page.locator(".position")).to_contain_text(f"Item {at + 1} of {total}")


def test_an_item_is_shown_beside_its_nearest_earlier_items_with_the_differences_marked(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sign_in(page, ui_server, "curator")
    # A report written like 13398683 about another connector waits for review; its neighbour is 13398683.
    with Session(engine) as session:
        siblings = session.exec(select(Item).where(col(Item.external_id).in_([f"PLANT-{name}" for name in CONNECTORS]))).all()
        original = session.exec(select(Item).where(Item.external_id == "13398683")).one()
    hidden = _sealed_ids(engine)
    near = next(item for item in siblings if item.id not in hidden and item.status == ItemStatus.UNIQUE.value)
    connector = near.external_id.removeprefix("PLANT-")
    page.goto(f"{QUEUE}?text={connector}+DeleteOperation")
    for _ in range(60):  # the server builds its dedup index in the background on first use
        if "index is loading" not in page.content():
            break
        page.wait_for_timeout(500)
        page.reload()
    expect(page.get_by_role("heading", name=near.title)).to_be_visible()
    comparison = page.locator(".comparison").filter(has_text=f"Item {original.id}")
    expect(comparison).to_have_count(1)
    # The words the copy changed are marked on each side.
    expect(comparison.locator("ins", has_text="greatly").first).to_be_visible()
    expect(comparison.locator("ins", has_text=connector).first).to_be_visible()
    expect(comparison.locator("del", has_text="significantly").first).to_be_visible()
    shots(page, "neighbours side by side")
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "item.similar_read")).one() >= 1


def test_only_earlier_items_with_a_useful_similarity_are_shown_and_the_rest_are_counted(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "curator")
    page.goto(QUEUE)
    for _ in range(60):  # the server builds its dedup index in the background on first use
        if "index is loading" not in page.content():
            break
        page.wait_for_timeout(500)
        page.reload()
    _, total = _position(page)
    cosines: list[float] = []
    left_out = 0
    for at in range(1, min(total, 20) + 1):
        page.goto(f"{QUEUE}?at={at}")
        section = page.locator("section").filter(has=page.get_by_role("heading", name="Nearest earlier items"))
        if section.count() == 0:  # a sealed-bound item: no neighbours at all
            continue
        shown = [float(value) for value in re.findall(r"\(cosine (-?[0-9.]+)\)", section.inner_text())]
        note = section.locator(".below-floor")
        counted = re.match(r"(\d+) nearest", note.inner_text()) if note.count() else None
        hidden = int(counted.group(1)) if counted else 0
        assert len(shown) + hidden <= NEIGHBOURS
        if not shown:
            expect(section).to_contain_text(f"No earlier item is close to this one (a body cosine of {NEIGHBOUR_FLOOR:.2f} or more)")
        if hidden and not left_out:
            shots(page, "neighbours below the floor counted")
        cosines += shown
        left_out += hidden
    assert cosines and min(cosines) >= NEIGHBOUR_FLOOR, cosines
    assert left_out > 0, "no page left out a distant neighbour: the walk proves nothing"


def test_filters_and_bulk_decisions(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sign_in(page, ui_server, "curator")
    page.goto(QUEUE)
    page.get_by_label("Text", exact=True).fill("S3A")
    page.get_by_role("button", name="Filter").click()
    hidden = _sealed_ids(engine)
    matching = [item for item in _pending(engine) if ("s3a" in item.title.lower() or "s3a" in item.input.lower()) and item.id not in hidden]
    assert len(matching) >= 2
    expect(page.locator(".position")).to_contain_text(f"of {len(matching)}")
    shots(page, "filtered")

    picked = [item.id for item in matching[:2]]
    for item_id in picked:
        page.get_by_label(f"Select item {item_id}", exact=True).check()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Approve selected").click()
    expect(page.get_by_role("status").first).to_contain_text("approved 2")
    assert all(_status(engine, item_id) == ItemStatus.APPROVED.value for item_id in picked if item_id)
    shots(page, "after bulk approve")

    # Rejecting a selection needs a reason.
    rest = [item.id for item in _pending(engine) if item.id not in hidden][:1]
    page.goto(QUEUE)
    page.get_by_label(f"Select item {rest[0]}", exact=True).check()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Reject selected").click()
    expect(page.get_by_role("status").first).to_contain_text("say why")
    assert rest[0] is not None and _status(engine, rest[0]) == ItemStatus.UNIQUE.value


def test_sealed_bound_items_are_reviewed_by_metadata_until_the_audited_sealed_view(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sealed = _sealed_ids(engine)
    assert sealed, "a 20% slice of the pool is sealed-bound"
    with Session(engine) as session:
        texts = [(item.title, item.input[:60]) for item in session.exec(select(Item).where(col(Item.id).in_(sorted(sealed)))).all()]
    sign_in(page, ui_server, "curator")
    page.goto(QUEUE)
    expect(page.get_by_text("shown by their metadata only")).to_be_visible()
    expect(page.get_by_role("button", name="Open sealed view")).to_have_count(0)
    pages = [page.content()]
    while page.get_by_role("link", name=re.compile(r"^Next \d+")).count():
        page.get_by_role("link", name=re.compile(r"^Next \d+")).click()
        pages.append(page.content())
    sealed_entry = page.locator("a", has_text="sealed-bound item").first
    sealed_entry.click()
    expect(page.get_by_role("heading", name=re.compile(r"^Sealed-bound item \d+"))).to_be_visible()
    pages.append(page.content())
    shots(page, "sealed-bound item by metadata")
    for html in pages:
        for title, start in texts:
            assert title not in html and start not in html

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, ui_server, "sealer")
    page.goto(QUEUE)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Open sealed view").click()
    expect(page.get_by_role("status").first).to_contain_text("Sealed view opened")
    expect(page.get_by_text("Sealed view open until")).to_be_visible()
    html = page.content()
    assert any(title in html for title, _ in texts)
    shots(page, "sealed view open")
    with Session(engine) as session:
        opened = session.exec(select(AuditEvent).where(AuditEvent.action == "eval.sealed_review_opened")).all()
        reads = session.exec(select(AuditEvent).where(AuditEvent.action == "item.sealed_review_read", AuditEvent.actor == "token:sealer")).all()
    assert len(opened) == 1 and opened[0].actor == "token:sealer"
    assert reads and any(event.count for event in reads)


def test_a_reader_cannot_review(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sign_in(page, ui_server, "reader")
    answer = page.goto(QUEUE)
    assert answer is not None and answer.status == 403
    expect(page.get_by_text("needs a token with the 'curate' scope")).to_be_visible()
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shots(page, "reader refused")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    target = next(item for item in _pending(engine) if item.id is not None)
    assert target.id is not None
    for path, form in (("decide", {"item_id": str(target.id), "decision": "approve"}), ("bulk", {"item": str(target.id), "decision": "approve"}), ("sealed", {})):
        refused = context.request.post(f"{QUEUE}/{path}", form={"csrf": csrf or "", **form}, max_redirects=0)
        assert refused.status == 403, path
    assert _status(engine, target.id) == ItemStatus.UNIQUE.value


def test_a_curator_edits_an_item_from_the_queue_and_approves_it_once_dedup_decided_again(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    hidden = _sealed_ids(engine)
    pending = _pending(engine)
    position, item = next((index + 1, item) for index, item in enumerate(pending) if item.id not in hidden)
    assert item.id is not None
    sign_in(page, ui_server, "curator")
    page.goto(f"{QUEUE}?at={position}")
    assert _current_id(page) == item.id
    _press(page, "e")
    expect(page.get_by_label("Reference")).to_be_visible()
    page.get_by_label("Reference").fill("Upgrade to a release that carries the fix.")
    page.get_by_label("Input").fill(f"What went wrong here, and what fixes it?\n\n{item.input}")
    page.get_by_label("Note").fill("turned the report into a question with a reference answer")
    shots(page, "edit from the queue")
    page.get_by_role("button", name="Save").click()
    # Back in the queue where the person was, told what happened.
    expect(page).to_have_url(re.compile(rf"/ui/evals/{EVAL}/review\?.*at={position}"))
    expect(page.get_by_role("status").first).to_contain_text("Saved revision")
    with Session(engine) as session:
        edited = session.get(Item, item.id)
        assert edited is not None and edited.status == ItemStatus.CANDIDATE.value and edited.curated_revision is not None
    # Dedup decides the edited text again; then the item waits for review with the curator's text.
    run_curation(engine, make_settings(str(engine.url.render_as_string(hide_password=False))), encoder=shared_encoder())
    assert _status(engine, item.id) == ItemStatus.UNIQUE.value
    page.goto(QUEUE)
    page.get_by_label("Text", exact=True).fill("What went wrong here")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("heading", name=item.title)).to_be_visible()
    expect(page.locator("pre.item-text").nth(1)).to_have_text("Upgrade to a release that carries the fix.")
    shots(page, "edited item back in the queue")
    _press(page, "a")
    expect(page.get_by_role("status").first).to_contain_text(f"Item {item.id} approved")
    assert _status(engine, item.id) == ItemStatus.APPROVED.value


def test_the_queue_says_why_dedup_kept_the_item_unique(page: Page, ui_server: UiServer, shots: Shots) -> None:
    engine = ui_server.engine
    sealed = _sealed_ids(engine)
    visible = [(position, item) for position, item in enumerate(_pending(engine), start=1) if item.id not in sealed]
    (position, first), other = visible[0], visible[-1][1]
    details = {"rules": "r2", "vetoed": [{"item": other.id, "stage": "embedding", "score": 0.9312, "why": "different scope: only one names a module (hdfs)"}]}
    with write_session(engine) as session:
        session.add(DedupDecision(item_id=first.id or 0, status=ItemStatus.UNIQUE.value, stage="none", details=details))
        session.commit()
    sign_in(page, ui_server, "curator")
    page.goto(f"{QUEUE}?at={position}")
    assert _current_id(page) == first.id
    why = page.get_by_role("region", name="Why dedup decided so")
    expect(why).to_contain_text("Unique: every close enough match was refused")
    refused = why.get_by_role("table", name="Refused matches")
    expect(refused).to_contain_text("different scope: only one names a module (hdfs)")
    expect(refused.get_by_role("link", name=f"item {other.id}")).to_have_attribute("href", f"/ui/items/{other.id}")
    shots(page, "why unique")
