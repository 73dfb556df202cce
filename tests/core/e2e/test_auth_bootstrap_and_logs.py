"""The bootstrap admin token, and that tokens and secrets never reach the logs."""

from __future__ import annotations

import io
import logging

import httpx
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import select

from schemas.token import ApiToken
from service.app import create_app
from service.core.db import write_transaction
from service.core.settings import Settings
from service.core.tokens import BOOTSTRAP_TOKEN_NAME, ensure_bootstrap_admin
from tests.conftest import LiveServer

ADMIN_TOKEN = "bootstrap-admin-token-0123456789abcdef0123"


def test_admin_token_from_settings_is_an_admin(engine: Engine, settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"admin_token": SecretStr(ADMIN_TOKEN)}), engine=engine)
    from fastapi.testclient import TestClient

    with TestClient(app) as client:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert client.post("/v1/sources", json={"name": "ops"}, headers=headers).status_code == 201
        assert client.get("/v1/items", headers=headers).status_code == 200  # admin implies read
    with write_transaction(engine) as session:
        ensure_bootstrap_admin(session=session, admin_token=ADMIN_TOKEN + "-rotated")
        rows = session.exec(select(ApiToken).where(ApiToken.name == BOOTSTRAP_TOKEN_NAME)).all()
    assert len(rows) == 1
    with TestClient(app) as client:
        # the lifespan restores the configured value; the rotated one no longer matches it
        assert client.get("/v1/items", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).status_code == 200
        assert client.get("/v1/items", headers={"Authorization": f"Bearer {ADMIN_TOKEN}-rotated"}).status_code == 401


def test_tokens_and_secrets_never_appear_in_logs(live_server: LiveServer, log_stream: io.StringIO) -> None:
    token = live_server.token("admin")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}) as client:
        created = client.post("/v1/sources", json={"name": "ops"})
        secret = created.json()["webhook_secret"]
        client.get("/v1/items")
        client.get("/v1/items", headers={"Authorization": "Bearer gs_wrong0123456789abcdefghij"})
    logging.getLogger("goldenset.test").info("echo of a careless caller: Authorization: Bearer %s and %s", token, secret)
    text = log_stream.getvalue()
    assert "GET /v1/items" in text
    assert '"request_id": "' in text
    assert token not in text and secret not in text and "gs_wrong0123456789abcdefghij" not in text
