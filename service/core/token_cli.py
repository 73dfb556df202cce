"""`goldenset token create|list|revoke`: API tokens, on the configured database."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from sqlmodel import Session, col, select

from schemas.common import utcnow
from schemas.token import ApiToken
from service.core.db import write_transaction
from service.core.terminal import CLI_ACTOR, JsonOption, err, fail, open_engine, out, print_json, print_secret
from service.core.tokens import create_token, format_expiry, parse_expiry, revoke_token

token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the token.")],
    scopes: Annotated[str, typer.Option("--scopes", help="Comma-separated: ingest, curate, read, sealed, admin.")],
    expires_in: Annotated[str | None, typer.Option("--expires-in", help="Expire after this many days or hours from now: 90d, 12h.")] = None,
    expires: Annotated[str | None, typer.Option("--expires", help="Expire at this ISO 8601 date or date-time (UTC unless it has a zone; a date alone: its midnight UTC).")] = None,
) -> None:
    """Create a token and print it once (only its hash is stored). Without --expires-in or
    --expires it never expires; an expiry in the past is refused (exit 2)."""
    try:
        expires_at = parse_expiry(expires_in=expires_in, expires=expires)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    with write_transaction(open_engine()) as session:
        try:
            plaintext, token = create_token(session=session, name=name, scopes=scopes, actor=CLI_ACTOR, expires_at=expires_at)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    lifetime = "never expires" if expires_at is None else f"expires {format_expiry(expires_at)}"
    err.print(f"token {token.id} ({token.name}) with scopes {', '.join(token.scopes)}, {lifetime}; it is shown only now:", highlight=False)
    print_secret(plaintext)


@token_app.command("list")
def token_list(as_json: JsonOption = False) -> None:
    """List tokens (never their values): scopes, creation, expiry (`never` without one; `expired`
    once past), last use (to the minute; `-` when never used) and revocation. Times are UTC."""
    with Session(open_engine()) as session:
        tokens = session.exec(select(ApiToken).order_by(col(ApiToken.id))).all()
    now = utcnow()
    if as_json:
        print_json([token.model_dump(mode="json", exclude={"token_hash"}) | {"expired": token.expired(now)} for token in tokens])
        return
    table = Table("id", "name", "prefix", "scopes", "created", "expires", "last used", "revoked", caption="times are UTC")
    for token in tokens:
        last_used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "-"
        expiry = "never" if token.expires_at is None else f"{token.expires_at:%Y-%m-%d %H:%M}" + (" (expired)" if token.expired(now) else "")
        table.add_row(str(token.id), token.name, token.prefix, ",".join(token.scopes), f"{token.created_at:%Y-%m-%d %H:%M}", expiry, last_used, "yes" if token.revoked else "")
    out.print(table)


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(help="The token's id (see `goldenset token list`).")]) -> None:
    """Revoke a token; requests bearing it get 401 from now on."""
    with write_transaction(open_engine()) as session:
        try:
            revoke_token(session=session, token_id=token_id, actor=CLI_ACTOR)
        except LookupError as exc:
            raise fail(str(exc)) from exc
    out.print(f"token {token_id} revoked")


def register(app: typer.Typer) -> None:
    """Add `token` to the `goldenset` app."""
    app.add_typer(token_app, name="token")
