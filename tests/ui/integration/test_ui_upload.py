"""`/ui/upload`: a file of real incidents ingested from the browser with a typed mapping into a new
source; rejected records counted by reason and listed with where they were and why; a mapping or a
document that cannot be read stores nothing; scopes checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditEvent
from schemas.item import Item
from schemas.source import Source
from tests.ui_support import make_token, newest_csrf, sign_in

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def browser(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as client:
        yield client


def _reports(shared_data: Path, count: int) -> list[str]:
    with (shared_data / "gitbugs_hadoop" / "reports.jsonl").open(encoding="utf-8") as lines:
        return [next(lines).rstrip("\n") for _ in range(count)]


def _items(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(Item)).one()


def test_a_file_with_a_typed_mapping_makes_a_source_and_shows_rejections_by_reason(browser: TestClient, engine: Engine, shared_data: Path) -> None:
    lines = _reports(shared_data, 40)
    broken = json.loads(lines[5])
    broken["created"] = "sometime last week"
    lines[5] = json.dumps(broken)
    lines[9] = json.dumps({**json.loads(lines[9]), "title": ""})
    lines[12] = "{not json"
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    mapping = (ROOT / "examples" / "mappings" / "hadoop_jira.yaml").read_text(encoding="utf-8")
    answer = browser.post(
        "/ui/upload",
        data={"csrf": newest_csrf(engine), "new_source": "hadoop", "mapping": mapping},
        files={"file": ("reports.jsonl", "\n".join(lines).encode(), "application/x-ndjson")},
    )
    assert answer.status_code == 200, answer.text
    assert 'data-count="read">40<' in answer.text and 'data-count="new">37<' in answer.text and 'data-count="rejected">3<' in answer.text
    assert "line 6" in answer.text and "line 13" in answer.text
    with Session(engine) as session:
        source = session.exec(select(Source).where(Source.name == "hadoop")).one()
        assert source.kind == "file" and source.mapping is not None and source.mapping["external_id"] == "id"
        (ingest,) = session.exec(select(AuditEvent).where(AuditEvent.action == "items.ingest")).all()
        assert ingest.actor == "token:lead"
    assert _items(engine) == 37
    # The same file again into the existing source changes nothing.
    again = browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "source": "hadoop"}, files={"file": ("reports.jsonl", "\n".join(lines).encode())})
    assert 'data-count="unchanged">37<' in again.text and _items(engine) == 37


def test_what_cannot_be_read_stores_nothing_and_says_why(browser: TestClient, engine: Engine, shared_data: Path) -> None:
    admin, _ = make_token(engine, "lead", "admin")
    sign_in(browser, admin)
    body = "\n".join(_reports(shared_data, 3)).encode()
    typo = "external_id: id\nbogus_field: 3\n"
    bad_mapping = browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "new_source": "x", "mapping": typo}, files={"file": ("r.jsonl", body)})
    assert bad_mapping.status_code == 422 and "bogus_field" in bad_mapping.text and "Nothing was ingested" in bad_mapping.text
    not_json = browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "new_source": "x", "format": "json"}, files={"file": ("r.json", b"[{\"a\": 1},")})
    assert not_json.status_code == 422 and "nothing was ingested" in not_json.text
    empty = browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "new_source": "x"}, files={"file": ("r.jsonl", b"")})
    assert empty.status_code == 422 and "empty" in empty.text
    nowhere = browser.post("/ui/upload", data={"csrf": newest_csrf(engine)}, files={"file": ("r.jsonl", body)})
    assert nowhere.status_code == 422 and "choose a source" in nowhere.text
    assert _items(engine) == 0


def test_ingest_may_upload_into_a_source_but_only_admin_adds_one(browser: TestClient, engine: Engine, shared_data: Path) -> None:
    body = "\n".join(_reports(shared_data, 3)).encode()
    reader, _ = make_token(engine, "reader", "read")
    sign_in(browser, reader)
    assert browser.get("/ui/upload").status_code == 403
    assert browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "new_source": "x"}, files={"file": ("r.jsonl", body)}).status_code == 403
    ingester, _ = make_token(engine, "pipeline", "ingest,read")
    sign_in(browser, ingester)
    assert browser.get("/ui/upload").status_code == 200
    refused = browser.post("/ui/upload", data={"csrf": newest_csrf(engine), "new_source": "x"}, files={"file": ("r.jsonl", body)})
    assert refused.status_code == 403 and "admin" in refused.text
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Source)).one() == 0
    assert _items(engine) == 0
