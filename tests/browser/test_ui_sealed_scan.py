"""No page shows sealed content to a person without the `sealed` scope: every page of the UI that a
curator, a reader and an admin can reach by following links (and the pages of every item, eval
and release), fetched with their signed-in browser session, is scanned for the text of each item
in (or bound for) a sealed slice."""

from __future__ import annotations

import re
from collections import deque
from html import unescape

from playwright.sync_api import BrowserContext, Page
from sqlmodel import Session, col, select

from schemas.item import Item
from service.items.reads import withheld
from tests.browser.conftest import EVAL, UiServer, sign_in
from tests.conftest import TEST_SECRET_KEY

MAX_PAGES = 400
SKIPPED = ("/ui/logout", "/ui/static/")
_LINK = re.compile(r"""href="(/ui[^"#]*)\"""")


def _secrets(server: UiServer) -> dict[int, list[str]]:
    """For each sealed-bound item, the pieces of its content that no other item shares (so
    finding one on a page can only mean the sealed item leaked)."""
    with Session(server.engine) as session:
        items = list(session.exec(select(Item).order_by(col(Item.id))).all())
        sealed = withheld(session=session, item_ids=[item.id for item in items if item.id is not None], secret_key=TEST_SECRET_KEY)
    open_text = "\n".join(f"{item.external_id}\n{item.title}\n{item.input}\n{item.reference}" for item in items if item.id not in sealed)
    found: dict[int, list[str]] = {}
    for item in items:
        if item.id in sealed:
            pieces = [item.external_id, item.title, item.input[:80]]
            found[item.id] = [piece for piece in pieces if len(piece) >= 8 and piece not in open_text]
    assert found and all(found.values()), "the seed has sealed items with text of their own"
    return found


def _crawl(context: BrowserContext, start: list[str]) -> dict[str, str]:
    """Every `/ui` page reachable from `start` by links, by URL, as HTML (downloads included)."""
    seen: dict[str, str] = {}
    queue = deque(start)
    while queue and len(seen) < MAX_PAGES:
        url = queue.popleft()
        if url in seen or url.startswith(SKIPPED):
            continue
        answer = context.request.get(url, max_redirects=0)
        body = answer.text()
        seen[url] = body
        for link in _LINK.findall(body):
            target = unescape(link)
            if target not in seen:
                queue.append(target)
    return seen


def test_no_page_shows_sealed_content_to_a_person_without_the_sealed_scope(page: Page, context: BrowserContext, ui_server: UiServer) -> None:
    secrets = _secrets(ui_server)
    with Session(ui_server.engine) as session:
        every_item = [f"/ui/items/{item_id}" for item_id in session.exec(select(Item.id)).all()]
    start = ["/ui", "/ui/evals", f"/ui/evals/{EVAL}/review", f"/ui/evals/{EVAL}/releases", "/ui/items", "/ui/registry", "/ui/evidence", "/ui/audit", *every_item]
    for role in ("curator", "reader", "admin"):
        context.clear_cookies()
        sign_in(page, ui_server, role)
        pages = _crawl(context, start)
        assert len(pages) > len(every_item), f"{role} reached only {len(pages)} pages"
        assert any("/diff/" in url for url in pages), "the crawl reached a release diff"
        leaks = [(url, item_id, piece[:40]) for url, html in pages.items() for item_id, pieces in secrets.items() for piece in pieces if piece in unescape(html)]
        assert not leaks, f"{role} saw sealed content: {leaks[:5]}"
