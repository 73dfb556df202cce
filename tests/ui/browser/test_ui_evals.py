"""The eval pages: the list of evals, an eval's releases and settings, a release's manifest with its
verification and downloads, and the difference between two releases, over the default seed (eval
`kev`, releases 1 and 2). A person without the `sealed` scope never sees a sealed item's content or
id on any of them."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.evals import Eval, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.release import Release, ReleaseItem
from schemas.source import Source
from service.core.db import write_session
from service.evals.refresh import refresh_eval
from tests.conftest import TEST_SECRET_KEY
from tests.ui.browser.conftest import EVAL, Shots, UiServer, sign_in


def _eval(engine: Engine) -> Eval:
    with Session(engine) as session:
        return session.exec(select(Eval).where(Eval.name == EVAL)).one()


def _release(engine: Engine, number: int) -> Release:
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == EVAL)).one()
        return session.exec(select(Release).where(Release.eval_id == evaluation.id, Release.number == number)).one()


def _items_of(engine: Engine, number: int) -> dict[int, str]:
    """Item id -> split of every item of release `number`."""
    release = _release(engine, number)
    with Session(engine) as session:
        return dict(session.exec(select(ReleaseItem.item_id, ReleaseItem.split).where(ReleaseItem.release_id == release.id)).all())


def _sealed_marks(engine: Engine) -> list[str]:
    """What would give away a sealed item: its external id, its link, and each title no other item shares."""
    with Session(engine) as session:
        sealed = session.exec(select(Item).join(EvalItem, col(EvalItem.item_id) == col(Item.id)).where(EvalItem.split == Split.SEALED.value)).all()
        sealed_ids = {item.id for item in sealed}
        other_titles = set(session.exec(select(Item.title).where(col(Item.id).not_in(sealed_ids))).all())
    assert sealed, "the seed has sealed items"
    marks = [item.external_id for item in sealed] + [f'/ui/items/{item.id}"' for item in sealed]
    return marks + [item.title for item in sealed if item.title not in other_titles]


def _shows_no_sealed_item(page: Page, marks: list[str]) -> None:
    html = page.content()
    leaked = [mark for mark in marks if mark in html]
    assert not leaked, f"{page.url} shows sealed items: {leaked[:5]}"


def _audit_events(engine: Engine, action: str, actor: str) -> list[AuditEvent]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action, AuditEvent.actor == actor).order_by(col(AuditEvent.id))).all())


def test_the_eval_list_shows_each_eval_with_its_settings_and_pending_review(page: Page, ui_server: UiServer, shots: Shots) -> None:
    evaluation = _eval(ui_server.engine)
    with Session(ui_server.engine) as session:
        latest = session.exec(select(func.max(Release.number)).where(Release.eval_id == evaluation.id)).one()
        pending = session.exec(select(func.count()).select_from(Item).join(Source).where(Source.name == "kev", Item.status == ItemStatus.UNIQUE.value)).one()
    assert pending > 0
    sign_in(page, ui_server, "reader")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Evals").click()
    expect(page.get_by_role("heading", name="Evals", level=1)).to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=EVAL, exact=True))
    expect(row).to_contain_text("manual")
    expect(row).to_contain_text("0 3 1 * *")
    expect(row).to_contain_text("20%")
    expect(row).to_contain_text(str(evaluation.target_size))
    expect(row.get_by_role("link", name=f"release {latest}")).to_have_attribute("href", f"/ui/evals/{EVAL}/releases/{latest}")
    expect(row.get_by_role("cell").nth(7)).to_have_text(str(pending))
    expect(row.get_by_role("link", name="Review")).to_have_attribute("href", f"/ui/evals/{EVAL}/review")
    shots(page, "evals")
    row.get_by_role("link", name="Releases").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/evals/{EVAL}/releases")
    shots(page, "releases")


def test_releases_show_their_sizes_and_compare_leads_to_the_diff_both_ways(page: Page, ui_server: UiServer, shots: Shots) -> None:
    first, second = _items_of(ui_server.engine, 1), _items_of(ui_server.engine, 2)
    added = {item_id: split for item_id, split in second.items() if item_id not in first}
    added_dev = sum(1 for split in added.values() if split == Split.DEV.value)
    added_sealed = len(added) - added_dev
    assert added_dev and added_sealed, "the seed's second release adds dev and sealed items"
    budget = _eval(ui_server.engine).sealed_read_budget

    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/evals/{EVAL}/releases")
    expect(page.get_by_role("heading", name=f"Eval {EVAL}: releases")).to_be_visible()
    for number, items in ((1, first), (2, second)):
        release = _release(ui_server.engine, number)
        assert (release.dev_count, release.sealed_count) == (sum(1 for s in items.values() if s == "dev"), sum(1 for s in items.values() if s == "sealed"))
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name=f"Release {number}", exact=True))
        cells = row.get_by_role("cell")
        expect(cells.nth(3)).to_have_text(str(release.dev_count))
        expect(cells.nth(4)).to_have_text(str(release.sealed_count))
        expect(cells.nth(5)).to_have_text(f"{100 * release.sealed_count / len(items):.1f}%")
        expect(cells.nth(9)).to_have_text(f"0 of {budget}")
        expect(cells.nth(10)).to_have_text(release.dev_root[:12])
    shots(page, "releases")

    page.get_by_label("From release").select_option("1")
    page.get_by_label("To release").select_option("2")
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/evals/{EVAL}/releases/1/diff/2")
    expect(page).to_have_title(f"{EVAL}: release 1 to 2 · goldenset")
    expect(page.get_by_role("heading", name=f"Added ({len(added)})")).to_be_visible()
    expect(page.get_by_role("heading", name="Retired (0)")).to_be_visible()
    expect(page.get_by_role("heading", name="Withheld (0)")).to_be_visible()
    section = page.locator("section").filter(has=page.get_by_role("heading", name=re.compile(r"^Added")))
    expect(section.get_by_role("row")).to_have_count(added_dev + 1)
    expect(section).to_contain_text(f"{added_sealed} sealed item{'s' if added_sealed != 1 else ''}, counted only")
    expect(section.get_by_role("row").nth(1)).to_contain_text("new in release 2")
    shots(page, "diff 1 to 2")

    page.get_by_role("link", name="Swap: release 2 → release 1").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/evals/{EVAL}/releases/2/diff/1")
    expect(page.get_by_role("heading", name="Added (0)")).to_be_visible()
    expect(page.get_by_role("heading", name=f"Retired ({len(added)})")).to_be_visible()
    expect(page.get_by_text("Going back in time")).to_be_visible()
    shots(page, "diff 2 to 1")


def test_a_missing_release_or_eval_gives_a_404_page_naming_what_exists(page: Page, ui_server: UiServer, shots: Shots) -> None:
    with Session(ui_server.engine) as session:
        numbers = session.exec(select(Release.number).join(Eval).where(Eval.name == EVAL).order_by(col(Release.number))).all()
    sign_in(page, ui_server, "reader")
    for url in (f"/ui/evals/{EVAL}/releases/1/diff/9", f"/ui/evals/{EVAL}/releases/9", f"/ui/evals/{EVAL}/compare?a=1&b=9"):
        answer = page.goto(url)
        assert answer is not None and answer.status == 404, url
        expect(page.get_by_role("heading", name="No such release")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text(f"its releases are {', '.join(map(str, numbers))}")
    shots(page, "missing release")
    answer = page.goto("/ui/evals/nope/releases")
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("alert")).to_contain_text(f"Evals: {EVAL}")
    shots(page, "missing eval")


def test_the_manifest_page_verifies_and_its_downloads_match_the_release(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    release = _release(ui_server.engine, 2)
    before = len(_audit_events(ui_server.engine, "release.export", "token:reader"))
    sign_in(page, ui_server, "reader")
    page.goto(f"/ui/evals/{EVAL}/releases/2")
    expect(page.get_by_role("heading", name=f"Eval {EVAL}: release 2")).to_be_visible()
    expect(page.get_by_text("Verify OK")).to_be_visible()
    expect(page.get_by_role("heading", name="Near pairs across the split")).to_be_visible()
    expect(page.get_by_text("no dev item of this release is linked near a sealed item")).to_be_visible()
    dev = page.locator("section").filter(has=page.get_by_role("heading", name=re.compile(r"^Dev items")))
    expect(dev.get_by_role("heading")).to_have_text(f"Dev items ({release.dev_count})")
    expect(dev.get_by_role("row")).to_have_count(release.dev_count + 1)
    expect(page.get_by_text(f"{release.sealed_count} sealed item{'s' if release.sealed_count != 1 else ''}. Their content")).to_be_visible()
    shots(page, "release 2")
    shown = _audit_events(ui_server.engine, "release.items_read", "token:reader")
    assert shown and shown[-1].count == release.dev_count and shown[-1].object_id == f"{EVAL}/2"

    with page.expect_download() as waiting:
        page.get_by_role("link", name="Dev split as JSON Lines").click()
    download = waiting.value
    assert download.suggested_filename == f"{EVAL}-2-dev.jsonl"
    lines = Path(download.path()).read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines]  # one item a line, each carrying the canary and the release
    assert {(item["metadata"]["canary"], item["metadata"]["release"]) for item in items} == {(release.canary, 2)}
    assert len(items) == release.dev_count and {item["split"] for item in items} == {"dev"}
    deadline = time.monotonic() + 10
    while len(_audit_events(ui_server.engine, "release.export", "token:reader")) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    event = _audit_events(ui_server.engine, "release.export", "token:reader")[-1]
    assert event.count == release.dev_count and event.object_id == f"{EVAL}/2"
    assert sorted(event.details["item_ids"]) == sorted(item["id"] for item in items)

    # The manifest downloads as a file: the page stays where it was.
    with page.expect_download() as waiting:
        page.get_by_role("link", name="Manifest JSON").click()
    download = waiting.value
    assert download.suggested_filename == f"{EVAL}-2-manifest.json"
    expect(page).to_have_url(re.compile(rf"/ui/evals/{EVAL}/releases/2$"))
    body = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    assert body["number"] == 2 and body["dev_merkle_root"] == release.dev_root
    assert len(body["items"]) == release.dev_count + release.sealed_count
    answer = context.request.get(page.get_by_role("link", name="Manifest JSON").get_attribute("href") or "")
    assert answer.ok and answer.headers["content-disposition"] == f'attachment; filename="{EVAL}-2-manifest.json"'


def test_an_admin_changes_a_setting_and_a_bad_value_is_shown_not_saved(page: Page, ui_server: UiServer, shots: Shots) -> None:
    before = _eval(ui_server.engine)
    sign_in(page, ui_server, "admin")
    page.goto(f"/ui/evals/{EVAL}/releases")
    page.get_by_label("Target size").fill(str(before.target_size + 37))
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{ui_server.url}/ui/evals/{EVAL}/releases")
    expect(page.get_by_role("status")).to_contain_text(f"target size {before.target_size + 37}")
    shots(page, "settings saved")
    assert _eval(ui_server.engine).target_size == before.target_size + 37

    page.get_by_label("Schedule").fill("every day")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("five fields")
    expect(page.get_by_label("Schedule")).to_have_value("every day")
    shots(page, "settings refused")
    assert _eval(ui_server.engine).schedule == before.schedule

    page.get_by_label("Target size").fill(str(before.target_size))
    page.get_by_label("Schedule").fill(before.schedule)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("saved")
    assert _eval(ui_server.engine).target_size == before.target_size


def test_a_curator_sees_no_settings_form_and_a_forged_change_is_refused(page: Page, context: BrowserContext, ui_server: UiServer, shots: Shots) -> None:
    before = _eval(ui_server.engine)
    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/evals/{EVAL}/releases")
    expect(page.get_by_role("heading", name="Settings")).to_be_visible()
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    expect(page.get_by_label("Target size")).to_have_count(0)
    shots(page, "releases as curator")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    answer = context.request.post(f"/ui/evals/{EVAL}/settings", form={"csrf": csrf, "target_size": "3"}, max_redirects=0)
    assert answer.status == 403
    assert "admin" in answer.text()
    assert _eval(ui_server.engine).target_size == before.target_size


def test_no_page_shows_a_sealed_item_to_a_person_without_the_sealed_scope(page: Page, ui_server: UiServer, shots: Shots) -> None:
    marks = _sealed_marks(ui_server.engine)
    pages = [
        "/ui/evals",
        f"/ui/evals/{EVAL}/releases",
        f"/ui/evals/{EVAL}/releases/1",
        f"/ui/evals/{EVAL}/releases/2",
        f"/ui/evals/{EVAL}/releases/1/diff/2",
        f"/ui/evals/{EVAL}/releases/2/diff/1",
    ]
    for role in ("reader", "curator", "admin"):
        sign_in(page, ui_server, role)
        for url in pages:
            page.goto(url)
            _shows_no_sealed_item(page, marks)
            shots(page, f"{role} {url}")
        page.get_by_role("button", name="Sign out").click()

    # The check can fail: a person with the `sealed` scope sees sealed ids (never their content).
    sign_in(page, ui_server, "sealer")
    shots(page, "overview as sealer")
    page.goto(f"/ui/evals/{EVAL}/releases/2")
    page.get_by_text("Sealed item ids and content digests").click()
    shots(page, "release 2 as sealer")
    html = page.content()
    assert any(mark in html for mark in marks if mark.startswith("/ui/items/"))
    assert not any(mark in html for mark in marks if not mark.startswith("/ui/items/"))


def test_a_diff_gives_each_retired_item_its_reason_and_lists_the_withheld(page: Page, ui_server: UiServer, shots: Shots) -> None:
    # Last in this module: it writes release 3. One dev member is rejected, one waits for review
    # again after a change, one sealed member is rejected.
    with write_session(ui_server.engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == EVAL)).one()
        members = session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id).order_by(col(EvalItem.item_id))).all()
        rejected, waiting = (session.get(Item, member.item_id) for member in [member for member in members if member.split == Split.DEV.value][:2])
        sealed = session.get(Item, next(member.item_id for member in members if member.split == Split.SEALED.value))
        assert rejected and waiting and sealed
        rejected.status, waiting.status, sealed.status = ItemStatus.REJECTED.value, ItemStatus.UNIQUE.value, ItemStatus.REJECTED.value
        session.add_all([rejected, waiting, sealed])
        session.commit()
        ids = {"rejected": rejected.id, "waiting": waiting.id, "sealed": sealed.id}
    refresh_eval(ui_server.engine, name=EVAL, at=datetime(2023, 2, 1, 3, tzinfo=UTC), secret_key=TEST_SECRET_KEY, actor="test")

    sign_in(page, ui_server, "curator")
    page.goto(f"/ui/evals/{EVAL}/releases/2/diff/3")
    expect(page.get_by_role("heading", name="Added (0)")).to_be_visible()
    expect(page.get_by_role("heading", name="Retired (2)")).to_be_visible()
    retired = page.locator("section").filter(has=page.get_by_role("heading", name=re.compile(r"^Retired")))
    expect(retired.get_by_role("row").filter(has=page.get_by_role("link", name=str(ids["rejected"]), exact=True))).to_contain_text("retired at release 3: rejected in review")
    expect(retired).to_contain_text("1 sealed item, counted only")
    withheld = page.locator("section").filter(has=page.get_by_role("heading", name="Withheld (1)"))
    expect(withheld.get_by_role("row").filter(has=page.get_by_role("link", name=str(ids["waiting"]), exact=True))).to_contain_text("waiting for review again")
    assert f'/ui/items/{ids["sealed"]}"' not in page.content()
    shots(page, "diff 2 to 3")
    page.get_by_role("button", name="Sign out").click()

    sign_in(page, ui_server, "sealer")
    page.goto(f"/ui/evals/{EVAL}/releases/2/diff/3")
    retired = page.locator("section").filter(has=page.get_by_role("heading", name="Retired (2)"))
    sealed_row = retired.get_by_role("row").filter(has=page.get_by_role("link", name=str(ids["sealed"]), exact=True))
    expect(sealed_row).to_contain_text("sealed: content not shown")
    expect(sealed_row).to_contain_text("rejected in review")
    shots(page, "diff 2 to 3 as sealer")
