"""A token is its id, not its name: a second token carrying another's name (a name freed by a
revocation, or a row written before names were unique) can neither re-read the first one's sealed
run, nor post results into its runs, nor find its runs by idempotency key; the audit trail tells
the two apart. Names are unique among active tokens."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from schemas.release import SealedRead
from schemas.runs import Result, Run
from schemas.token import ApiToken
from service.core.crypto import new_secret, sha256_hex
from service.core.db import write_session, write_transaction
from service.core.tokens import TOKEN_PREFIX, create_token, revoke_token
from tests.run_support import auth, register, released_eval

SEALED_RUN = {"model": "m1", "endpoint": "m1-no", "split": "sealed"}


@pytest.fixture
def api(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client


def _token(engine: Engine, name: str, *scopes: str) -> tuple[str, int]:
    with write_transaction(engine) as session:
        plaintext, stored = create_token(session=session, name=name, scopes=list(scopes))
    assert stored.id is not None
    return plaintext, stored.id


def _namesake(engine: Engine, name: str, *scopes: str) -> tuple[str, int]:
    """A second active token with `name`, as a database written before names were unique holds."""
    plaintext = new_secret(TOKEN_PREFIX)
    with Session(engine, expire_on_commit=False) as session:
        stored = ApiToken(name=name, token_hash=sha256_hex(plaintext), prefix=plaintext[:10], scopes=list(scopes))
        session.add(stored)
        session.commit()
    assert stored.id is not None
    return plaintext, stored.id


def test_token_names_are_unique_among_active_tokens(engine: Engine) -> None:
    _, first = _token(engine, "pipeline", "read")
    with write_session(engine) as session, pytest.raises(ValueError, match=rf"already named 'pipeline' \(id {first}\).*goldenset token revoke {first}"):
        create_token(session=session, name="pipeline", scopes=["read"])
    with write_transaction(engine) as session:
        revoke_token(session=session, token_id=first)
    _, second = _token(engine, "pipeline", "read")  # the name is free again once its token is revoked
    assert second != first


def test_a_namesake_reads_no_sealed_run_and_posts_no_results_of_another_token(engine: Engine, api: TestClient) -> None:
    released = released_eval(engine, budget=3)
    register(engine)
    owner_plain, owner_id = _token(engine, "final", "read", "sealed")
    other_plain, other_id = _namesake(engine, "final", "read", "sealed")
    owner, other = auth(owner_plain), auth(other_plain)

    started = api.post("/v1/evals/ops/runs", json=SEALED_RUN, headers={**owner, "Idempotency-Key": "nightly"})
    assert started.status_code == 201, started.text
    run = started.json()
    assert run["actor"] == "token:final" and run["token_id"] == owner_id
    assert sorted(item["item_id"] for item in run["items"]) == released.sealed

    # Same name, same scopes, another token: the sealed items stay closed, and nothing is spent.
    reread = api.get(f"/v1/runs/{run['id']}/items", headers=other)
    assert reread.status_code == 403 and "start a sealed run of your own" in reread.json()["detail"]
    assert not any(str(item["content"]["title"]) in reread.text for item in run["items"])
    # The namesake's key finds nothing of the owner's: a key the name used before is a conflict, not the run.
    replayed = api.post("/v1/evals/ops/runs", json=SEALED_RUN, headers={**other, "Idempotency-Key": "nightly"})
    assert replayed.status_code == 409 and "use a new key" in replayed.json()["detail"]
    scores = {"results": [{"item_id": item["item_id"], "score": 1.0} for item in run["items"][:3]]}
    posted = api.post(f"/v1/runs/{run['id']}/results", json=scores, headers=other)
    assert posted.status_code == 403 and "another token" in posted.json()["detail"]
    with Session(engine) as session:
        assert session.exec(select(Result)).all() == []
        assert [read.token_id for read in session.exec(select(SealedRead)).all()] == [owner_id]

    # The token that started the run re-reads it and scores it; both are recorded by id.
    assert api.get(f"/v1/runs/{run['id']}/items", headers=owner).status_code == 200
    assert api.post(f"/v1/runs/{run['id']}/results", json=scores, headers=owner).json()["stored"] == 3
    with Session(engine) as session:
        assert {result.token_id for result in session.exec(select(Result)).all()} == {owner_id}
        events = session.exec(select(AuditEvent).where(AuditEvent.actor == "token:final").order_by(col(AuditEvent.id))).all()
    by_action = {(event.action, event.token_id) for event in events}
    assert {("run.sealed_start", owner_id), ("release.sealed_run", owner_id), ("run.sealed_items_read", owner_id), ("run.results", owner_id)} <= by_action
    assert all(token_id == owner_id for _, token_id in by_action)

    # The audit trail tells the two apart: by name both, by id one.
    admin = auth(_token(engine, "auditor", "admin")[0])
    by_name = api.get("/v1/audit", params={"token": "final"}, headers=admin).json()["events"]
    by_id = api.get("/v1/audit", params={"token_id": owner_id}, headers=admin).json()["events"]
    assert by_name and {event["token_id"] for event in by_id} == {owner_id} and len(by_id) == len(by_name)
    assert api.get("/v1/audit", params={"token_id": other_id}, headers=admin).json()["events"] == []


def test_runs_recorded_before_token_ids_are_reread_by_no_token_and_scored_by_admins_only(engine: Engine, api: TestClient) -> None:
    released_eval(engine, budget=3)
    register(engine)
    owner_plain, _ = _token(engine, "final", "read", "sealed")
    run = api.post("/v1/evals/ops/runs", json=SEALED_RUN, headers=auth(owner_plain)).json()
    with write_session(engine) as session:  # as the migration leaves a run started before it
        stored = session.get(Run, run["id"])
        assert stored is not None
        stored.token_id = None
        session.add(stored)
        session.commit()
    assert api.get(f"/v1/runs/{run['id']}/items", headers=auth(owner_plain)).status_code == 403
    scores = {"results": [{"item_id": run["items"][0]["item_id"], "score": 0.5}]}
    assert api.post(f"/v1/runs/{run['id']}/results", json=scores, headers=auth(owner_plain)).status_code == 403
    admin_plain, admin_id = _token(engine, "boss", "admin")
    assert api.post(f"/v1/runs/{run['id']}/results", json=scores, headers=auth(admin_plain)).json()["stored"] == 1
    with Session(engine) as session:
        assert session.exec(select(Result.token_id)).all() == [admin_id]
