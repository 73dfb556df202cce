"""The item pages: the list, an item's page with its revisions, dedup history, exposures and
releases, editing with a required note, review and dedup rulings, and what a person without the
`curate` or `sealed` scope sees and may do."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.editing import edit_item
from ingest.mapping import load_mapping
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.dedup import DedupDecision, DedupOverride, DedupStage
from schemas.evals import EvalItem
from schemas.item import Item, ItemRevision, ItemStatus, RevisionKind
from service.core.db import write_session
from service.items.shaping import withheld
from tests.conftest import TEST_SECRET_KEY
from tests.dedup_support import KEV_MAPPING, ingest
from tests.eval_support import kev_records
from tests.ui.browser.conftest import EVAL, Shots, UiServer, seed_pool, sign_in

SOURCE_NOTE = "The vendor rewrote the advisory in May."


def _open_items(engine: Engine) -> list[Item]:
    """The seeded items anyone with `read` may see (none in or bound for a sealed slice), oldest first."""
    with Session(engine) as session:
        items = list(session.exec(select(Item).order_by(col(Item.occurred_at), col(Item.id))).all())
        hidden = withheld(session=session, item_ids=[item.id for item in items if item.id is not None], secret_key=TEST_SECRET_KEY)
    return [item for item in items if item.id not in hidden]


def seed(engine: Engine) -> dict[str, str]:
    """The default pool, plus two items the pages need and the pool lacks: one that dedup decided a
    duplicate (minhash, `guard` rule) of an earlier item, and one a curator edited whose record the
    source then changed (a held source change)."""
    tokens = seed_pool(engine)
    unique = [item for item in _open_items(engine) if item.status == ItemStatus.UNIQUE.value]
    original, copy, edited = unique[0], unique[1], unique[2]
    with write_session(engine) as session:
        item = session.get(Item, copy.id)
        assert item is not None
        item.status, item.duplicate_of = ItemStatus.DUPLICATE.value, original.id
        session.add(item)
        details = {"rule": "guard", "matched_item": original.id, "margin": 0.1234}
        session.add(
            DedupDecision(item_id=copy.id or 0, status=ItemStatus.DUPLICATE.value, stage=DedupStage.MINHASH.value, score=0.8434, matched_item_id=original.id, details=details)
        )
        assert edited.id is not None
        edit_item(session=session, item_id=edited.id, input="A curator's question about this vulnerability.", note="Made gradable", actor="token:curator", now=utcnow())
        session.commit()
    record = next(record for record in kev_records(since="2022-01-01", until="2023-01-01") if record["cveID"] == edited.external_id)
    changed = {**record, "shortDescription": record["shortDescription"] + " " + SOURCE_NOTE}
    mapping = load_mapping(KEV_MAPPING).model_copy(update={"format": "jsonl", "records": None})
    ingest(engine, "kev", [changed], mapping)
    return tokens


def _item(engine: Engine, item_id: int) -> Item:
    with Session(engine) as session:
        item = session.get(Item, item_id)
        assert item is not None
        return item


def _pick(engine: Engine, status: str, *, taken: int = 0, released: bool | None = None) -> Item:
    """An open item of `status` (the `taken`-th, so that tests sharing the server each take their own)."""
    with Session(engine) as session:
        in_release = set(session.exec(select(EvalItem.item_id)).all())
    items = [item for item in _open_items(engine) if item.status == status and item.curated_revision is None]
    if released is not None:
        items = [item for item in items if (item.id in in_release) == released]
    return items[taken]


def _sealed_item(engine: Engine) -> Item:
    with Session(engine) as session:
        items = list(session.exec(select(Item).where(Item.status == ItemStatus.UNIQUE.value).order_by(col(Item.id))).all())
        hidden = withheld(session=session, item_ids=[item.id for item in items if item.id is not None], secret_key=TEST_SECRET_KEY)
    return next(item for item in items if item.id in hidden and item.title)


def _events(engine: Engine, action: str, actor: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action, AuditEvent.actor == actor)).all())


def _read_ids(engine: Engine, action: str, actor: str) -> set[int]:
    return {item for event in _events(engine, action, actor) for item in event.details.get("item_ids", [])}


def test_a_curator_edits_an_item_and_sees_the_revision_with_its_diff(page: Page, ui_server: UiServer, shots: Shots) -> None:
    item = _pick(ui_server.engine, ItemStatus.APPROVED.value, released=True)
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/items?status=approved&text={item.external_id}")
    shots(page, "items filtered")
    page.get_by_role("link", name=str(item.id), exact=True).click()
    expect(page).to_have_url(f"{ui_server.url}/ui/items/{item.id}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(item.title)
    for heading in ("Revisions", "Dedup history", "Exposures", "Releases"):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=re.compile(r"^release \d+$")).first).to_have_attribute("href", re.compile(rf"^/ui/evals/{EVAL}/releases/\d+$"))
    expect(page.locator("pre").first).to_have_text(item.input)
    expect(page.get_by_role("article", name="Revision 1", exact=True)).to_contain_text("first ingested")
    shots(page, "item")

    page.get_by_role("button", name="Edit").click()
    expect(page.get_by_label("Title")).to_have_value(item.title)
    shots(page, "edit form")
    page.get_by_label("Title").fill(item.title + " (rewritten)")
    page.get_by_label("Input").fill("Which product does " + item.input)
    page.get_by_label("Reference").fill("Apply the vendor's fix.")
    page.get_by_label("Note").fill("Turned the incident into a question")
    page.get_by_role("button", name="Save").click()

    expect(page).to_have_url(f"{ui_server.url}/ui/items/{item.id}")
    expect(page.get_by_role("status")).to_contain_text("Saved revision 2")
    revision = page.get_by_role("article", name="Revision 2", exact=True)
    expect(revision).to_contain_text("curator edit")
    expect(revision).to_contain_text("token:curator")
    expect(revision).to_contain_text("Turned the incident into a question")
    expect(revision.locator("ins").first).to_be_visible()
    expect(revision.locator("ins", has_text="(rewritten)")).to_have_count(1)
    expect(revision.locator("del").first).to_be_visible()
    shots(page, "item after the edit")

    saved = _item(ui_server.engine, item.id or 0)
    assert (saved.title, saved.reference, saved.revision, saved.curated_revision) == (item.title + " (rewritten)", "Apply the vendor's fix.", 2, 2)
    assert saved.input == "Which product does " + item.input
    assert saved.status == ItemStatus.CANDIDATE.value
    with Session(ui_server.engine) as session:
        kept = session.exec(select(ItemRevision).where(ItemRevision.item_id == item.id)).one()
    assert (kept.kind, kept.actor, kept.note, kept.previous["title"]) == (RevisionKind.CURATOR.value, "token:curator", "Turned the incident into a question", item.title)
    assert item.id in _read_ids(ui_server.engine, "item.read", "token:curator")


def test_saving_without_a_note_keeps_the_text_and_says_why(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    item = _pick(ui_server.engine, ItemStatus.UNIQUE.value, taken=0)
    sign_in(page, ui_server, "curator")
    back = "/ui/items?status=unique"
    page.goto(f"/ui/items/{item.id}/edit?next={quote(back, safe='')}")
    shots(page, "edit form")
    page.get_by_label("Title").fill("A title typed with care")
    page.get_by_label("Input").fill("An input\nover two lines typed with care")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("Write a note")
    expect(page.get_by_label("Title")).to_have_value("A title typed with care")
    expect(page.get_by_label("Input")).to_have_value("An input\nover two lines typed with care")
    shots(page, "refused without a note")
    assert _item(ui_server.engine, item.id or 0).revision == 1

    page.get_by_label("Note").fill("Clearer wording")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{ui_server.url}{back}")
    expect(page.get_by_role("status")).to_contain_text("Saved revision 2")
    shots(page, "back where the edit started")
    saved = _item(ui_server.engine, item.id or 0)
    assert (saved.title, saved.input, saved.status) == ("A title typed with care", "An input\nover two lines typed with care", ItemStatus.CANDIDATE.value)

    # Only pages of this UI are gone back to; tags alone keep the item's status.
    page.goto(f"/ui/items/{item.id}/edit?next=https://example.org/ui")
    page.get_by_label("Tags").fill("CWE-79, needs-grader")
    page.get_by_label("Note").fill("Tagged")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/items/{item.id}")
    expect(page.get_by_role("status")).to_have_text("Saved revision 3")
    shots(page, "tags saved")
    assert _item(ui_server.engine, item.id or 0).tags == ["CWE-79", "needs-grader"]

    # A form that did not come from a goldenset page is refused, and nothing changes.
    forged = context.request.post(f"/ui/items/{item.id}/edit", form={"title": "Forged", "input": "Forged", "note": "forged", "revision": "3"}, max_redirects=0)
    assert forged.status == 403
    assert _item(ui_server.engine, item.id or 0).title == "A title typed with care"


def test_a_reader_sees_no_controls_and_cannot_change_anything(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    duplicate = _pick(ui_server.engine, ItemStatus.DUPLICATE.value)
    unique = _pick(ui_server.engine, ItemStatus.UNIQUE.value, taken=1)
    sign_in(page, ui_server, "reader")
    for item, label in ((duplicate, "duplicate as a reader"), (unique, "unique as a reader")):
        page.goto(f"/ui/items/{item.id}")
        expect(page.get_by_role("heading", level=1)).to_contain_text(item.title)
        for name in ("Edit", "Approve", "Reject", "Not a duplicate", "Save"):
            expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        expect(page.get_by_text("Duplicate of...")).to_have_count(0)
        shots(page, label)
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    posts: list[tuple[str, dict[str, Any]]] = [
        (f"/ui/items/{unique.id}/edit", {"title": "Defaced", "input": "Defaced", "reference": "", "tags": "", "note": "no", "revision": "1"}),
        (f"/ui/items/{unique.id}/review", {"decision": "approve", "reason": ""}),
        (f"/ui/items/{unique.id}/duplicate-of", {"other": str(duplicate.id), "note": "no"}),
        (f"/ui/items/{duplicate.id}/not-duplicate", {"note": "no"}),
    ]
    for path, form in posts:
        answer = context.request.post(path, form={"csrf": csrf, **form}, max_redirects=0)
        assert answer.status == 403, path
        assert "needs a token with the &#39;curate&#39; scope" in answer.text()
    page.goto(f"/ui/items/{unique.id}/edit")
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    shots(page, "edit refused")
    for before in (unique, duplicate):
        after = _item(ui_server.engine, before.id or 0)
        assert (after.title, after.input, after.status, after.revision, after.duplicate_of) == (before.title, before.input, before.status, 1, before.duplicate_of)


def test_a_sealed_bound_item_shows_its_content_only_with_the_sealed_scope(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    item = _sealed_item(ui_server.engine)
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/items/{item.id}")
    expect(page.get_by_text("its content is withheld")).to_be_visible()
    html = page.content()
    for secret in (item.title, item.input, item.external_id, item.reference):
        assert secret not in html
    for heading in ("Revisions", "Dedup history", "Exposures"):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Edit", exact=True)).to_have_count(0)
    shots(page, "sealed as a curator")
    page.goto(f"/ui/items/{item.id}/edit")
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    assert item.input not in page.content()
    shots(page, "sealed edit refused")
    page.goto(f"/ui/items?text={item.external_id}")
    expect(page.get_by_role("link", name=str(item.id), exact=True)).to_have_count(0)
    expect(page.get_by_role("heading", name="Items")).to_be_visible()
    shots(page, "sealed left out of the list")
    assert item.id not in _read_ids(ui_server.engine, "item.read", "token:curator") | _read_ids(ui_server.engine, "item.sealed_read", "token:curator")

    context.clear_cookies()
    sign_in(page, ui_server, "sealer")
    # The `sealed` scope alone shows nothing: the content needs the audited, budgeted sealed view.
    page.goto(f"/ui/items/{item.id}")
    expect(page.get_by_text("its content is withheld")).to_be_visible()
    assert item.input not in page.content()
    page.get_by_role("link", name=EVAL).first.click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Open sealed view").click()
    expect(page.get_by_text("Sealed view open until")).to_be_visible()
    page.goto(f"/ui/items/{item.id}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(item.title)
    expect(page.locator("pre").first).to_have_text(item.input)
    expect(page.get_by_text("this read is audited")).to_be_visible()
    shots(page, "sealed as a sealer")
    assert item.id in _read_ids(ui_server.engine, "item.sealed_read", "token:sealer")
    assert item.id not in _read_ids(ui_server.engine, "item.read", "token:sealer")


def test_an_item_page_says_why_dedup_decided_so(page: Page, ui_server: UiServer, shots: Shots) -> None:
    duplicate = _pick(ui_server.engine, ItemStatus.DUPLICATE.value)
    sign_in(page, ui_server, "reader")
    page.goto(f"/ui/items/{duplicate.id}")
    why = page.get_by_role("region", name="Why dedup decided so")
    expect(why).to_contain_text(f"Duplicate of item {duplicate.duplicate_of} by the guard rule at the minhash stage")
    expect(why).to_contain_text("threshold 0.720, margin 0.123")
    expect(why.get_by_role("link", name=f"item {duplicate.duplicate_of}")).to_have_attribute("href", f"/ui/items/{duplicate.duplicate_of}")
    shots(page, "why a duplicate")


def test_a_curator_rules_a_duplicate_apart_then_reviews_it(page: Page, ui_server: UiServer, shots: Shots) -> None:
    duplicate = _pick(ui_server.engine, ItemStatus.DUPLICATE.value)
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/items/{duplicate.id}")
    history = page.get_by_role("table").filter(has_text="Matched item")
    expect(history).to_contain_text("minhash")
    expect(history).to_contain_text("guard")
    expect(history).to_contain_text("0.843")
    expect(history.get_by_role("link", name=f"item {duplicate.duplicate_of}")).to_have_attribute("href", f"/ui/items/{duplicate.duplicate_of}")
    shots(page, "duplicate")

    page.get_by_role("button", name="Not a duplicate").click()
    expect(page.get_by_role("alert")).to_contain_text("needs a note")
    shots(page, "ruling refused without a note")
    ruling = page.get_by_role("form", name="Not a duplicate")
    ruling.get_by_label("Note").fill("Different CVEs of the same product")
    ruling.get_by_role("button", name="Not a duplicate").click()
    expect(page.get_by_role("status")).to_contain_text("ruled not a duplicate")
    rulings = page.get_by_role("table").filter(has_text="In force")
    expect(rulings).to_contain_text("is not a duplicate of")
    expect(rulings).to_contain_text("Different CVEs of the same product")
    expect(page.get_by_role("button", name="Not a duplicate")).to_have_count(0)
    shots(page, "ruled not a duplicate")
    after = _item(ui_server.engine, duplicate.id or 0)
    assert (after.status, after.duplicate_of) == (ItemStatus.UNIQUE.value, None)
    with Session(ui_server.engine) as session:
        override = session.exec(select(DedupOverride).where(DedupOverride.item_id == duplicate.id)).one()
    assert (override.kind, override.other_id, override.actor) == ("not_duplicate", duplicate.duplicate_of, "token:curator")

    page.get_by_role("button", name="Reject").click()
    expect(page.get_by_role("alert")).to_contain_text("needs a reason")
    assert _item(ui_server.engine, duplicate.id or 0).status == ItemStatus.UNIQUE.value
    page.get_by_label("Reason").fill("Kept after the ruling")
    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_contain_text("approved")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shots(page, "approved")
    assert _item(ui_server.engine, duplicate.id or 0).status == ItemStatus.APPROVED.value


def test_a_curator_rules_an_item_a_duplicate_of_another(page: Page, ui_server: UiServer, shots: Shots) -> None:
    item, other = _pick(ui_server.engine, ItemStatus.UNIQUE.value, taken=3), _pick(ui_server.engine, ItemStatus.UNIQUE.value, taken=4)
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/items/{item.id}")
    page.get_by_text("Duplicate of...").click()
    form = page.get_by_role("form", name="Duplicate of")
    form.get_by_label("Item id").fill(str(item.id))
    form.get_by_label("Note").fill("Same advisory")
    form.get_by_role("button", name="Rule a duplicate").click()
    expect(page.get_by_role("alert")).to_contain_text("cannot be a duplicate of itself")
    expect(form.get_by_label("Note")).to_have_value("Same advisory")
    shots(page, "ruling refused")
    form.get_by_label("Item id").fill(str(other.id))
    form.get_by_role("button", name="Rule a duplicate").click()
    expect(page.get_by_role("status")).to_contain_text(f"duplicate of item {other.id}")
    expect(page.get_by_role("button", name="Not a duplicate")).to_be_visible()
    shots(page, "ruled a duplicate")
    after = _item(ui_server.engine, item.id or 0)
    assert (after.status, after.duplicate_of) == (ItemStatus.DUPLICATE.value, other.id)


def test_a_held_source_change_is_flagged_with_the_source_diff(page: Page, ui_server: UiServer, shots: Shots) -> None:
    with Session(ui_server.engine) as session:
        item = session.exec(select(Item).where(col(Item.source_changed_at).is_not(None))).one()
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/items/{item.id}")
    flag = page.get_by_role("region", name="The source changed this item after a curator's edit: re-review")
    expect(flag).to_be_visible()
    shots(page, "held source change")
    expect(flag.locator("ins", has_text="rewrote the advisory")).to_have_count(1)
    expect(flag.locator("del", has_text="curator's question")).to_have_count(1)
    expect(page.get_by_role("article", name="Revision 2 (held)")).to_contain_text("held source change")


def test_the_item_list_pages_past_sealed_items_and_filters(page: Page, ui_server: UiServer, shots: Shots) -> None:
    visible = _open_items(ui_server.engine)
    sign_in(page, ui_server, "reader")
    page.get_by_role("link", name="Items", exact=True).click()
    expect(page.get_by_role("heading", name="Items")).to_be_visible()
    rows = page.get_by_role("table").locator("tbody tr")
    expect(rows).to_have_count(min(50, len(visible)))
    newest = max(visible, key=lambda item: (item.occurred_at, item.id or 0))
    expect(rows.first).to_contain_text(str(newest.id))
    shots(page, "items")
    seen = {int(text) for text in rows.locator("td.num").all_inner_texts()}
    page.get_by_role("link", name="Next page").click()
    expect(rows).to_have_count(len(visible) - 50)
    seen |= {int(text) for text in rows.locator("td.num").all_inner_texts()}
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    shots(page, "items page 2")
    assert seen == {item.id for item in visible}

    page.get_by_label("Status").select_option("approved")
    page.get_by_role("button", name="Filter").click()
    expect(rows.first).to_be_visible()
    assert set(rows.locator("td:nth-child(4)").all_inner_texts()) == {"approved"}
    shots(page, "approved items")


def _pill(page: Page, status: str) -> dict[str, Any]:
    """The first status pill of `status` on the page: its text and its computed colours."""
    pill = page.locator(f".state.state-{status}").first
    expect(pill).to_be_visible()
    colours: dict[str, Any] = pill.evaluate("(element) => { const style = getComputedStyle(element); return {background: style.backgroundColor, colour: style.color}; }")
    return {"text": pill.inner_text(), **colours}


def test_statuses_differ_in_colour_and_in_words(page: Page, ui_server: UiServer, shots: Shots) -> None:
    sign_in(page, ui_server, "reader")
    pills = {}
    for status in ("unique", "approved", "duplicate"):
        page.goto(f"/ui/items?status={status}")
        pills[status] = _pill(page, status)
        shots(page, f"items {status}")
    assert pills["unique"]["text"] == "unique · waiting for review"
    assert pills["approved"]["text"] == "approved" and pills["duplicate"]["text"] == "duplicate"
    backgrounds = {pill["background"] for pill in pills.values()}
    assert len(backgrounds) == 3, pills  # waiting is no longer the green of approved
    assert pills["unique"]["background"] == "rgb(255, 241, 204)"  # amber
