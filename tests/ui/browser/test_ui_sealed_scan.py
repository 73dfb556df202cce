"""No page shows sealed content to a person without the `sealed` scope: every page of the UI that a
curator, a reader and an admin can reach by following links (and the pages of every item, eval
and release), fetched with their signed-in browser session, is scanned for the text of each item
in (or bound for) a sealed slice; and so is the answer to every form those pages offer (approve,
reject, rulings, undo, edits, settings, answers to dedup questions), submitted as the browser
would, with the page it leads to; and then every page again, since a write may have moved a sealed
item where it can be read (a ruling joining it with a dev item would)."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser

from playwright.sync_api import BrowserContext, Page
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.evals import EvalItem, Split
from schemas.item import Item
from service.items.shaping import withheld
from tests.conftest import TEST_SECRET_KEY
from tests.sealed_support import ask_about
from tests.ui.browser.conftest import EVAL, UiServer, seed_pool, sign_in

MAX_PAGES = 400
MAX_FORMS = 250
SKIPPED = ("/ui/logout", "/ui/static/")
FORM_SKIPPED = ("/ui/logout", "/ui/login")
_LINK = re.compile(r"""href="(/ui[^"#]*)\"""")


def seed(engine: Engine) -> dict[str, str]:
    """The default pool, and dedup questions pairing sealed-bound items with a released dev item:
    answered `same` by someone who cannot read them, they would follow it to the dev side."""
    tokens = seed_pool(engine)
    with Session(engine) as session:
        items = [item_id for item_id in session.exec(select(Item.id)).all() if item_id is not None]
        hidden = sorted(withheld(session=session, item_ids=items, secret_key=TEST_SECRET_KEY))
        dev = session.exec(select(EvalItem.item_id).where(EvalItem.split == Split.DEV.value).order_by(col(EvalItem.item_id))).first()
    assert hidden and dev is not None
    ask_about(engine, hidden[:3], dev)
    return tokens


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


@dataclass
class _Form:
    action: str
    fields: dict[str, str] = field(default_factory=dict)
    buttons: list[tuple[str, str]] = field(default_factory=list)


class _Forms(HTMLParser):
    """The POST forms of a page: each with its fields' values (a text field left empty gets a
    word, a choice its first option) and its named submit buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []
        self._current: _Form | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {key: value or "" for key, value in attrs}
        if tag == "form" and named.get("method", "get").lower() == "post":
            self._current = _Form(unescape(named.get("action", "")))
            self.forms.append(self._current)
        form, name = self._current, named.get("name", "")
        if form is None or not name:
            return
        if tag == "button" or (tag == "input" and named.get("type") == "submit"):
            form.buttons.append((name, named.get("value", "")))
        elif tag == "input" and named.get("type") in ("checkbox", "radio"):
            form.fields.setdefault(name, named.get("value", "on"))
        elif tag == "input":
            form.fields[name] = named.get("value") or ("" if named.get("type") == "hidden" else "walked")
        elif tag == "textarea":
            form.fields[name] = "walked"
        elif tag == "select":
            self._select = name
        elif tag == "option" and self._select is not None:
            form.fields.setdefault(self._select, named.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None
        elif tag == "select":
            self._select = None


def _submit_forms(context: BrowserContext, pages: dict[str, str]) -> dict[str, str]:
    """Submit every POST form of `pages` once per named button (or once when it has none), and
    return each answer, and the page a redirect leads to, by a label naming the form."""
    answers: dict[str, str] = {}
    tried: set[tuple[str, str]] = set()
    for url, html in pages.items():
        parser = _Forms()
        parser.feed(html)
        for form in parser.forms:
            for button in form.buttons or [("", "")]:
                if form.action.startswith(FORM_SKIPPED) or (form.action, button[1]) in tried or len(tried) >= MAX_FORMS:
                    continue
                tried.add((form.action, button[1]))
                data: dict[str, str | float | bool] = {**form.fields, **({button[0]: button[1]} if button[0] else {})}
                answer = context.request.post(form.action or url, form=data, max_redirects=0)
                label = f"POST {form.action} {button[1]} (from {url})"
                answers[label] = answer.text()
                location = answer.headers.get("location")
                if location and location.startswith("/ui"):
                    answers[f"{label} -> {location}"] = context.request.get(location, max_redirects=0).text()
    return answers


def test_no_page_shows_sealed_content_to_a_person_without_the_sealed_scope(page: Page, context: BrowserContext, ui_server: UiServer) -> None:
    secrets = _secrets(ui_server)
    with Session(ui_server.engine) as session:
        every_item = [f"/ui/items/{item_id}" for item_id in session.exec(select(Item.id)).all()]
    start = ["/ui", "/ui/evals", f"/ui/evals/{EVAL}/review", f"/ui/evals/{EVAL}/releases", "/ui/items", "/ui/registry", "/ui/evidence", "/ui/audit", "/ui/dedup/questions"]
    start += [*(f"/ui/dedup/questions?at={at}" for at in range(1, 4)), *every_item]
    for role in ("curator", "reader", "admin"):
        context.clear_cookies()
        sign_in(page, ui_server, role)
        pages = _crawl(context, start)
        assert len(pages) > len(every_item), f"{role} reached only {len(pages)} pages"
        assert any("/diff/" in url for url in pages), "the crawl reached a release diff"
        answers = _submit_forms(context, pages)
        again = _crawl(context, start)
        if role == "curator":
            assert any("/review" in label for label in answers) and any("/edit" in label for label in answers), f"{role} submitted {len(answers)} forms"
        seen = pages | answers | {f"{url} (after the forms)": html for url, html in again.items()}
        leaks = [(url, item_id, piece[:40]) for url, html in seen.items() for item_id, pieces in secrets.items() for piece in pieces if piece in unescape(html)]
        assert not leaks, f"{role} saw sealed content: {leaks[:5]}"
