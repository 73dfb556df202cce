"""Signing in to the web UI from a test client, as a browser does: the sign-in form's CSRF cookie,
the token posted, the session's CSRF value for the forms that follow."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.token import UiSession
from service.core.db import write_transaction
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.core.tokens import create_token


def make_token(engine: Engine, name: str, scopes: str) -> tuple[str, int]:
    """A new token's value and id."""
    with write_transaction(engine) as session:
        plaintext, stored = create_token(session=session, name=name, scopes=scopes)
    assert stored.id is not None
    return plaintext, stored.id


def sign_in(client: TestClient, token: str) -> str:
    """Sign in with `token`; the answer's text (the sign-in form again when refused, else "")."""
    client.get("/ui/login")
    answer = client.post("/ui/login", data={"token": token, "csrf": client.cookies[LOGIN_CSRF_COOKIE]})
    return answer.text if answer.status_code == 200 else ""


def newest_csrf(engine: Engine) -> str:
    """The CSRF value of the newest UI session (the one the test just signed in)."""
    with Session(engine) as session:
        return session.exec(select(UiSession.csrf).order_by(col(UiSession.id).desc())).first() or ""
