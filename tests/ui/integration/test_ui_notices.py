"""The one-shot notice after an action, and the messages of refusal pages: escaped, with each
backtick-quoted part (a command, a setting) shown as code and never as raw HTML."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from service.core.db import write_transaction
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.core.tokens import create_token
from service.ui.pages import NOTICE_COOKIE, code_spans


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _sign_in(browser: TestClient, engine: Engine) -> None:
    with write_transaction(engine) as session:
        token, _ = create_token(session=session, name="reader", scopes="read")
    browser.get("/ui/login")
    answer = browser.post("/ui/login", data={"token": token, "csrf": browser.cookies[LOGIN_CSRF_COOKIE]})
    assert answer.status_code == 303


def test_backtick_quoted_parts_become_code_and_everything_else_is_escaped() -> None:
    assert code_spans("run `goldenset curate` first") == "run <code>goldenset curate</code> first"
    assert code_spans("`a` and `b`") == "<code>a</code> and <code>b</code>"
    assert code_spans("one ` alone") == "one ` alone"
    assert code_spans("<b>`<i>x</i>`</b> & more") == "&lt;b&gt;<code>&lt;i&gt;x&lt;/i&gt;</code>&lt;/b&gt; &amp; more"
    assert code_spans("") == ""


def test_a_notice_shows_its_commands_as_code(browser: TestClient, engine: Engine) -> None:
    _sign_in(browser, engine)
    notice = "Nothing to do: run `goldenset curate` first. <script>alert(1)</script> `<img src=x>`"
    browser.cookies.set(NOTICE_COOKIE, quote(notice), path="/ui")
    answer = browser.get("/ui/items")
    assert answer.status_code == 200
    assert '<p class="notice" role="status">Nothing to do: run <code>goldenset curate</code> first.' in answer.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; <code>&lt;img src=x&gt;</code>" in answer.text
    assert "<script>alert" not in answer.text and "<img src=x>" not in answer.text


def test_a_refusal_page_shows_its_commands_as_code(browser: TestClient) -> None:
    browser.get("/ui/login")
    answer = browser.post("/ui/login", data={"token": " ", "csrf": browser.cookies[LOGIN_CSRF_COOKIE]})
    assert answer.status_code == 200
    assert "Paste an API token (create one with <code>goldenset token create</code>)." in answer.text
