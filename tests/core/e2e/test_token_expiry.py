"""Token expiry as an attacker meets it: a token past its expiry is refused over real HTTP with a
401 of its own, one before it works, and the command line creates and lists expiries."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.token import ApiToken
from service.core.db import write_transaction
from service.core.tokens import BOOTSTRAP_TOKEN_NAME, create_token, ensure_bootstrap_admin, revoke_token
from tests.conftest import LiveServer
from tests.core.e2e.test_cli import run

BOOTSTRAP_TOKEN = "bootstrap-admin-token-0123456789abcdef0123"


def _get_items(server: LiveServer, token: str) -> httpx.Response:
    return httpx.get(f"{server.url}/v1/items", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_a_token_works_until_its_expiry_and_is_refused_after_it(live_server: LiveServer) -> None:
    # Long enough that the first request lands before it on a machine busy with other tests.
    expires_at = utcnow() + timedelta(seconds=8)
    with write_transaction(live_server.engine) as session:
        plaintext, row = create_token(session=session, name="short-lived", scopes="read", expires_at=expires_at)
        lasting, _ = create_token(session=session, name="lasting", scopes="read", expires_at=utcnow() + timedelta(days=90))
    assert _get_items(live_server, plaintext).status_code == 200
    time.sleep(max(0.0, (expires_at - utcnow()).total_seconds()) + 0.1)
    refused = _get_items(live_server, plaintext)
    assert refused.status_code == 401 and refused.headers["content-type"].startswith("application/problem+json")
    assert refused.headers["www-authenticate"].startswith("Bearer")
    detail = refused.json()["detail"]
    assert detail == f"the bearer token expired on {expires_at:%Y-%m-%d %H:%M} UTC; create a new one with `goldenset token create`"
    assert _get_items(live_server, lasting).status_code == 200  # a later expiry is untouched
    with Session(live_server.engine) as session:
        stored = session.get(ApiToken, row.id)
        assert stored is not None and stored.last_used_at is not None and stored.last_used_at < expires_at


def test_expired_unknown_and_revoked_tokens_get_different_answers(live_server: LiveServer) -> None:
    with Session(live_server.engine, expire_on_commit=False) as session:
        expired, expired_row = create_token(session=session, name="expired", scopes="admin", expires_at=utcnow() + timedelta(hours=1))
        revoked, revoked_row = create_token(session=session, name="revoked", scopes="admin", expires_at=utcnow() + timedelta(hours=1))
        assert revoked_row.id is not None
        revoke_token(session=session, token_id=revoked_row.id)
        # Time passes: the stored expiry is now in the past (create_token refuses a past one).
        session.exec(update(ApiToken).where(col(ApiToken.id) == expired_row.id).values(expires_at=datetime(2025, 1, 2, 3, 4, tzinfo=UTC)))
        session.commit()
    details = {name: _get_items(live_server, token).json()["detail"] for name, token in (("expired", expired), ("revoked", revoked), ("unknown", "gs_" + "x" * 40))}
    assert details["expired"].startswith("the bearer token expired on 2025-01-02 03:04 UTC;")
    assert details["revoked"] == "the bearer token was revoked"
    assert details["unknown"] == "the bearer token is not valid"
    # An expired admin token reaches nothing, the admin routes included.
    assert httpx.post(f"{live_server.url}/v1/sources", json={"name": "ops"}, headers={"Authorization": f"Bearer {expired}"}, timeout=30).status_code == 401


def test_the_bootstrap_admin_token_never_expires(engine: Engine) -> None:
    with Session(engine) as session:
        ensure_bootstrap_admin(session=session, admin_token=BOOTSTRAP_TOKEN)
        # Someone sets an expiry on it (or an older version did): the next start clears it.
        session.exec(update(ApiToken).where(col(ApiToken.name) == BOOTSTRAP_TOKEN_NAME).values(expires_at=datetime(2025, 1, 1, tzinfo=UTC)))
        session.commit()
        ensure_bootstrap_admin(session=session, admin_token=BOOTSTRAP_TOKEN)
        rows = session.exec(select(ApiToken).where(ApiToken.name == BOOTSTRAP_TOKEN_NAME)).all()
    assert [(row.expires_at, row.scopes) for row in rows] == [(None, ["admin"])]


def test_cli_creates_tokens_with_an_expiry_and_lists_it_with_last_use(database_url: str, live_server: LiveServer) -> None:
    created = run(database_url, "token", "create", "--name", "quarterly", "--scopes", "read", "--expires-in", "90d")
    assert created.returncode == 0, created.stderr
    quarterly = created.stdout.strip()
    expected = utcnow() + timedelta(days=90)
    assert "expires " in created.stderr and "UTC; it is shown only now" in created.stderr
    day = (utcnow() + timedelta(days=400)).date()
    dated = run(database_url, "token", "create", "--name", "dated", "--scopes", "read", "--expires", day.isoformat())
    assert dated.returncode == 0, dated.stderr
    assert f"expires {day.isoformat()} 00:00 UTC" in dated.stderr
    hourly = run(database_url, "token", "create", "--name", "hourly", "--scopes", "read", "--expires-in", "12h")
    assert hourly.returncode == 0, hourly.stderr
    forever = run(database_url, "token", "create", "--name", "forever", "--scopes", "read")
    assert forever.returncode == 0 and "never expires" in forever.stderr
    with Session(live_server.engine) as session:
        rows = {row.name: row for row in session.exec(select(ApiToken))}
    stored = rows["quarterly"].expires_at
    assert stored is not None and abs(stored - expected) < timedelta(minutes=1)
    assert rows["dated"].expires_at == datetime(day.year, day.month, day.day, tzinfo=UTC)
    assert rows["forever"].expires_at is None

    assert _get_items(live_server, quarterly).status_code == 200
    listing = run(database_url, "token", "list")
    assert listing.returncode == 0, listing.stderr
    header = next([cell.strip() for cell in line.split("┃")[1:-1]] for line in listing.stdout.splitlines() if line.count("┃") == 9)
    lines = {line.split("│")[2].strip(): [cell.strip() for cell in line.split("│")[1:-1]] for line in listing.stdout.splitlines() if line.count("│") == 9}
    expires, last_used = header.index("expires"), header.index("last used")
    assert lines["quarterly"][expires] == f"{stored:%Y-%m-%d %H:%M}"
    assert lines["quarterly"][last_used].startswith(f"{utcnow():%Y-%m-%d}")
    assert lines["forever"][expires] == "never" and lines["forever"][last_used] == "-"
    assert quarterly not in listing.stdout and "times are UTC" in listing.stdout


def test_cli_refuses_a_past_or_unreadable_expiry_and_stores_nothing(database_url: str, engine: Engine) -> None:
    for args, message in (
        (("--expires", "2020-01-01"), "the expiry 2020-01-01 00:00 UTC is not in the future"),
        (("--expires-in", "0d"), "is not in the future"),
        (("--expires-in", "90days"), "is not a duration; give days or hours, e.g. 90d or 12h"),
        (("--expires", "soon"), "is not an ISO 8601 date or date-time"),
        (("--expires-in", "90d", "--expires", "2099-01-01"), "give --expires-in or --expires, not both"),
    ):
        result = run(database_url, "token", "create", "--name", "x", "--scopes", "read", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in " ".join(result.stderr.split()), (args, result.stderr)
        assert result.stdout == ""
    with Session(engine) as session:
        assert session.exec(select(ApiToken)).all() == []


def test_cli_lists_an_expired_token_as_expired(database_url: str, engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        _, row = create_token(session=session, name="old", scopes="read", expires_at=utcnow() + timedelta(hours=1))
        session.exec(update(ApiToken).where(col(ApiToken.id) == row.id).values(expires_at=datetime(2025, 6, 1, 12, 0, tzinfo=UTC)))
        session.commit()
    listing = run(database_url, "token", "list")
    assert "2025-06-01 12:00 (expired)" in listing.stdout
