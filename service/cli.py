"""The `goldenset` command line: the process commands (`migrate`, `serve`, `scheduler`), API tokens,
and each domain's commands, registered from its package (`service.<domain>.cli`)."""

from __future__ import annotations

import gc
import logging
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table
from sqlmodel import col, select

from schemas.common import utcnow
from schemas.token import ApiToken
from service.core.settings import Role, Settings, describe_settings_error, get_settings, warn_if_development_secret_key
from service.core.terminal import CLI_ACTOR, EXIT_USAGE, err, fail, open_engine, open_write_session, out, print_secret
from service.core.tokens import create_token, format_expiry, parse_expiry, revoke_token
from service.dedup import cli as dedup_cli
from service.evals import cli as eval_cli
from service.evidence import canary_cli
from service.evidence import cli as evidence_cli
from service.items import cli as item_cli
from service.sources import cli as source_cli

app = typer.Typer(help="goldenset: private, continuously refreshed LLM evals from production incidents.", no_args_is_help=True)
token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")


def _startup_settings() -> Settings:
    """The settings a process command starts with; refused ones end the command with one line on
    stderr naming each variable and what it needs (never its value) and exit status 2."""
    try:
        return get_settings()
    except ValidationError as exc:
        # soft_wrap: the message stays one line however narrow the terminal; no traceback.
        err.print(f"[bold red]error:[/] {describe_settings_error(exc)}; goldenset did not start", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None


def _start_tracing(settings: Settings, role: Role) -> None:
    """Turn tracing on when GOLDENSET_OTEL_ENABLED asks (`service.core.tracing`); without the
    OpenTelemetry packages the command ends with one line naming the extra to install, exit status 2."""
    from service.core.tracing import TracingUnavailable, configure_tracing

    try:
        configure_tracing(settings, role=role)
    except TracingUnavailable as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}; goldenset did not start", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None


def _freeze_startup_objects() -> None:
    """Move every object alive after start (modules, routes, models, the ORM's mappings: about a
    million, never garbage) out of the garbage collector's sight, so its full collections scan
    only what requests allocate: otherwise each one stalls every request for ~200 ms."""
    gc.collect()
    gc.freeze()


@app.command("migrate")
def migrate_command() -> None:
    """Create or upgrade the database schema (GOLDENSET_DATABASE_URL; SQLite under ./var/ by default)."""
    _startup_settings()
    open_engine()
    out.print("database schema is up to date")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    no_scheduler: Annotated[bool, typer.Option("--no-scheduler", help="Serve only; run `goldenset scheduler` elsewhere.")] = False,
) -> None:
    """Migrate, then serve the REST API (docs at /docs, OpenAPI at /openapi.json) and, unless
    --no-scheduler, the scheduler of pulls and curation (role `all`). With --no-scheduler the
    process is an API replica (role `api`): it never loads the embedding model nor curates, unless
    GOLDENSET_API_CURATES=true."""
    import uvicorn

    from service.app import create_app
    from service.core.logs import configure_logging
    from service.core.tracing import instrument_app, instrument_engine
    from service.scheduler import GoldensetScheduler

    settings = _startup_settings()
    configure_logging(settings.log_level, json_format=settings.log_json)
    role: Role = "api" if no_scheduler else "all"
    _start_tracing(settings, role)
    warn_if_development_secret_key(settings)
    engine = open_engine()
    instrument_engine(engine)
    scheduler = None if no_scheduler else GoldensetScheduler(engine, settings)
    if scheduler is not None:
        scheduler.start()
    try:
        app = create_app(settings, engine=engine, role=role)
        instrument_app(app)
        _freeze_startup_objects()
        uvicorn.run(app, host=host, port=port, log_config=None, proxy_headers=False)
    finally:
        if scheduler is not None:
            scheduler.shutdown()


@app.command()
def scheduler() -> None:
    """Run only the scheduler (role `worker`: pulls, curation every GOLDENSET_CURATE_INTERVAL_SECONDS,
    refreshes), for deployments whose API replicas run `serve --no-scheduler`."""
    from service.core.logs import configure_logging
    from service.core.tracing import instrument_engine
    from service.scheduler import GoldensetScheduler

    settings = _startup_settings()
    configure_logging(settings.log_level, json_format=settings.log_json)
    _start_tracing(settings, "worker")
    warn_if_development_secret_key(settings)
    engine = open_engine()
    instrument_engine(engine)
    worker = GoldensetScheduler(engine, settings, blocking=True)
    if settings.scheduler_metrics_port is not None:
        from service.core.metrics import serve_scheduler_metrics

        serve_scheduler_metrics(engine, settings.scheduler_metrics_port, scheduler_running=lambda: worker.scheduler.running)
    # APScheduler's own INFO lines are quiet (service.core.logs): say here that the process is up.
    logging.getLogger("goldenset.scheduler").info("scheduler started: curation every %s s, pulls and refreshes on their schedules", settings.curate_interval_seconds)
    worker.start()


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
    with open_write_session() as session:
        try:
            plaintext, token = create_token(session=session, name=name, scopes=scopes, actor=CLI_ACTOR, expires_at=expires_at)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    lifetime = "never expires" if expires_at is None else f"expires {format_expiry(expires_at)}"
    err.print(f"token {token.id} ({token.name}) with scopes {', '.join(token.scopes)}, {lifetime}; it is shown only now:", highlight=False)
    print_secret(plaintext)


@token_app.command("list")
def token_list() -> None:
    """List tokens (never their values): scopes, creation, expiry (`never` without one; `expired`
    once past), last use (to the minute; `-` when never used) and revocation. Times are UTC."""
    with open_write_session() as session:
        tokens = session.exec(select(ApiToken).order_by(col(ApiToken.id))).all()
    now = utcnow()
    table = Table("id", "name", "prefix", "scopes", "created", "expires", "last used", "revoked", caption="times are UTC")
    for token in tokens:
        last_used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "-"
        expiry = "never" if token.expires_at is None else f"{token.expires_at:%Y-%m-%d %H:%M}" + (" (expired)" if token.expired(now) else "")
        table.add_row(str(token.id), token.name, token.prefix, ",".join(token.scopes), f"{token.created_at:%Y-%m-%d %H:%M}", expiry, last_used, "yes" if token.revoked else "")
    out.print(table)


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(help="The token's id (see `goldenset token list`).")]) -> None:
    """Revoke a token; requests bearing it get 401 from now on."""
    with open_write_session() as session:
        try:
            revoke_token(session=session, token_id=token_id, actor=CLI_ACTOR)
        except LookupError as exc:
            raise fail(str(exc)) from exc
    out.print(f"token {token_id} revoked")


for commands in (source_cli, dedup_cli, eval_cli, item_cli, canary_cli, evidence_cli):
    commands.register(app)

if __name__ == "__main__":
    app()
