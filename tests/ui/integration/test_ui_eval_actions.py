"""`/ui/evals/new` and "Refresh now": an admin creates an eval with the API's validation, its
first release waits, and a refresh from the page writes it; refused forms change nothing and come
back as typed; people without `admin` are refused."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.evals import Eval
from schemas.release import Release
from service.ui.pages import NOTICE_COOKIE
from tests.eval_support import ingest_and_curate, kev_records
from tests.ui_support import make_token, newest_csrf, sign_in


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


FORM = {
    "name": "oncall",
    "description": "On-call incidents",
    "sources": ["kev"],
    "target_size": "40",
    "schedule": "0 3 1 * *",
    "max_age_days": "",
    "sealed_fraction": "0.2",
    "approval_policy": "manual",
    "sealed_read_budget": "3",
}


def _evals(engine: Engine) -> list[Eval]:
    with Session(engine) as session:
        return list(session.exec(select(Eval)).all())


def test_an_admin_creates_an_eval_and_refreshes_it_from_the_browser(browser: TestClient, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", kev_records()[:60])
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    form = browser.get("/ui/evals/new")
    assert form.status_code == 200 and 'value="kev"' in form.text and 'value="0 3 1 * *"' in form.text
    created = browser.post("/ui/evals/new", data={"csrf": newest_csrf(engine), **FORM, "approval_policy": "auto"})
    assert created.status_code == 303 and created.headers["location"] == "/ui/evals/oncall/releases"
    assert "first release waits" in unquote(browser.cookies.get(NOTICE_COOKIE) or "")
    (evaluation,) = _evals(engine)
    assert (evaluation.sources, evaluation.target_size, evaluation.max_age_days, evaluation.description) == (["kev"], 40, None, "On-call incidents")
    with Session(engine) as session:
        assert session.exec(select(AuditEvent).where(AuditEvent.action == "eval.create")).one().actor == "token:lead"
        assert session.exec(select(Release)).first() is None
    page = browser.get("/ui/evals/oncall/releases")
    assert "Refresh now" in page.text
    refreshed = browser.post("/ui/evals/oncall/refresh", data={"csrf": newest_csrf(engine)})
    assert refreshed.status_code == 303 and refreshed.headers["location"] == "/ui/evals/oncall/releases/1"
    assert "Wrote release 1 of oncall" in unquote(browser.cookies.get(NOTICE_COOKIE) or "")
    again = browser.post("/ui/evals/oncall/refresh", data={"csrf": newest_csrf(engine)})
    assert again.status_code == 303 and "already covers this period" in unquote(browser.cookies.get(NOTICE_COOKIE) or "")
    with Session(engine) as session:
        (release,) = session.exec(select(Release)).all()
        assert release.dev_count + release.sealed_count == 40


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"sources": ["nowhere"]}, "nowhere"),
        ({"schedule": "every month"}, "schedule"),
        ({"sealed_fraction": "1.5"}, "sealed fraction"),
        ({"name": "Bad Name!"}, "name"),
        ({"target_size": "0"}, "target size"),
        ({"linking_share": "0.95"}, "linking share"),
    ],
)
def test_a_refused_form_comes_back_as_typed_and_creates_nothing(browser: TestClient, engine: Engine, change: dict[str, object], says: str) -> None:
    ingest_and_curate(engine, "kev", kev_records()[:5])
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    answer = browser.post("/ui/evals/new", data={"csrf": newest_csrf(engine), **FORM, **change})
    assert answer.status_code in (409, 422), answer.text
    assert "The eval was not created" in answer.text and says in answer.text.lower()
    assert 'value="On-call incidents"' in answer.text
    assert _evals(engine) == []


def test_a_taken_name_is_refused(browser: TestClient, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", kev_records()[:5])
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    assert browser.post("/ui/evals/new", data={"csrf": newest_csrf(engine), **FORM}).status_code == 303
    taken = browser.post("/ui/evals/new", data={"csrf": newest_csrf(engine), **FORM})
    assert taken.status_code == 409 and "already exists" in taken.text
    assert len(_evals(engine)) == 1


def test_without_admin_neither_creating_nor_refreshing(browser: TestClient, engine: Engine) -> None:
    ingest_and_curate(engine, "kev", kev_records()[:5])
    curator, _ = make_token(engine, "curator", "read,curate")
    sign_in(browser, curator)
    assert browser.get("/ui/evals/new").status_code == 403
    assert browser.post("/ui/evals/new", data={"csrf": newest_csrf(engine), **FORM}).status_code == 403
    assert _evals(engine) == []
    assert "New eval" not in browser.get("/ui/evals").text
    assert browser.post("/ui/evals/oncall/refresh", data={"csrf": newest_csrf(engine)}).status_code == 403
