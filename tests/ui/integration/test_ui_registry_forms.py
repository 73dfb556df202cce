"""Registering models and endpoints from `/ui/registry`: admins only, the API's validation (a taken
name, an unregistered model, a URL that is no URL: refused and named, the form as typed, nothing
written), audited with the person; an endpoint's terms given as yes or no count as checked now."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.model_registry import Endpoint, Model
from tests.ui_support import make_token, newest_csrf, sign_in


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _names(engine: Engine) -> tuple[list[str], list[str]]:
    with Session(engine) as session:
        return sorted(session.exec(select(Model.name)).all()), sorted(session.exec(select(Endpoint.name)).all())


def test_an_admin_registers_a_model_and_its_endpoint(browser: TestClient, engine: Engine) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    page = browser.get("/ui/registry").text
    assert 'action="/ui/registry/models"' in page and 'action="/ui/registry/endpoints"' not in page  # no model yet: no endpoint form
    model = browser.post("/ui/registry/models", data={"csrf": newest_csrf(engine), "name": "acme-1", "provider": "acme", "training_cutoff": "2024-10-01"})
    assert model.status_code == 303
    endpoint = browser.post(
        "/ui/registry/endpoints",
        data={
            "csrf": newest_csrf(engine),
            "name": "acme-1-zdr",
            "model": "acme-1",
            "base_url": "https://api.acme.example/v1",
            "trains_on_inputs": "no",
            "retention_days": "0",
            "augmentations": ["tools"],
            "logprobs": "completions_echo",
        },
    )
    assert endpoint.status_code == 303 and endpoint.headers["location"] == "/ui/registry#endpoint-acme-1-zdr"
    with Session(engine) as session:
        stored = session.exec(select(Endpoint)).one()
        assert (stored.trains_on_inputs, stored.retention_days, stored.terms_checked_at is not None, stored.checked_by) == ("no", 0, True, "token:lead")
        assert stored.logprobs == "completions_echo"
        assert session.exec(select(Model)).one().training_cutoff.isoformat() == "2024-10-01"  # type: ignore[union-attr]
        actors = {event.action: event.actor for event in session.exec(select(AuditEvent)).all() if event.action in ("model.create", "endpoint.create")}
    assert actors == {"model.create": "token:lead", "endpoint.create": "token:lead"}
    listed = browser.get("/ui/registry").text
    assert 'id="endpoint-acme-1-zdr"' in listed and "tools" in listed and 'data-logprobs="completions_echo"' in listed
    assert '<label for="endpoint-logprobs">Log-probabilities' in listed


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"name": "acme-1"}, "already registered"),
        ({"name": "Bad Name!"}, "name"),
        ({"name": "acme-2", "training_cutoff": "last spring"}, "training cutoff"),
    ],
)
def test_a_refused_model_comes_back_as_typed(browser: TestClient, engine: Engine, form: dict[str, str], says: str) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    assert browser.post("/ui/registry/models", data={"csrf": newest_csrf(engine), "name": "acme-1"}).status_code == 303
    answer = browser.post("/ui/registry/models", data={"csrf": newest_csrf(engine), "provider": "typed-provider", **form})
    assert answer.status_code in (409, 422) and says in answer.text.lower() and 'value="typed-provider"' in answer.text
    assert _names(engine) == (["acme-1"], [])


def test_a_refused_endpoint_writes_nothing_and_says_why(browser: TestClient, engine: Engine) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    assert browser.post("/ui/registry/models", data={"csrf": newest_csrf(engine), "name": "acme-1"}).status_code == 303
    not_a_url = browser.post("/ui/registry/endpoints", data={"csrf": newest_csrf(engine), "name": "e1", "model": "acme-1", "base_url": "api.acme.example"})
    assert not_a_url.status_code == 422 and "base url" in not_a_url.text.lower() and 'value="api.acme.example"' in not_a_url.text
    no_model = browser.post("/ui/registry/endpoints", data={"csrf": newest_csrf(engine), "name": "e1", "model": "nobody", "base_url": "https://x.example/v1"})
    assert no_model.status_code == 404 and "nobody" in no_model.text
    assert _names(engine) == (["acme-1"], [])


def test_only_admins_register(browser: TestClient, engine: Engine) -> None:
    reader, _ = make_token(engine, "reader", "read,curate,ingest")
    sign_in(browser, reader)
    assert 'action="/ui/registry/models"' not in browser.get("/ui/registry").text
    assert browser.post("/ui/registry/models", data={"csrf": newest_csrf(engine), "name": "acme-1"}).status_code == 403
    assert browser.post("/ui/registry/endpoints", data={"csrf": newest_csrf(engine), "name": "e", "model": "acme-1", "base_url": "https://x.example"}).status_code == 403
    assert _names(engine) == ([], [])
