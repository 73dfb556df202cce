"""The `goldenset` command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlmodel import Session, col, select

from ingest.connectors.base import ConfigError
from ingest.connectors.registry import UnknownConnector
from ingest.mapping import MappingError, load_mapping
from ingest.readers import DocumentError, detect_format, iter_records
from schemas.problem import IngestSummary
from schemas.source import SourceCreate, SourceKind, check_source_name
from schemas.token import ApiToken
from service.cli_canary import register as register_canary_commands
from service.cli_common import CLI_ACTOR, err, out
from service.cli_common import fail as _fail
from service.cli_common import open_engine as _engine
from service.cli_evals import register as register_eval_commands
from service.cli_evidence import register as register_evidence_commands
from service.db import write_session
from service.ingestion import ingest_records
from service.settings import get_settings
from service.sources import create_source, get_source, list_sources, set_source_mapping, source_mapping
from service.tokens import create_token, revoke_token

if TYPE_CHECKING:
    from curation.dedup import CurationSummary

app = typer.Typer(help="goldenset: private, continuously refreshed LLM evals from production incidents.", no_args_is_help=True)
token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
source_app = typer.Typer(help="Create and list sources.", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(source_app, name="source")
reference_app = typer.Typer(help="Public reference corpora that candidates are checked against.", no_args_is_help=True)
app.add_typer(reference_app, name="reference")

EXIT_REJECTED = 3
EXIT_AUTH = 4
EXIT_PULL_FAILED = 5
EXIT_BUSY = 6
MAX_ERRORS_SHOWN = 25




def _session() -> Session:
    return write_session(_engine())


def _print_secret(value: str) -> None:
    """Print a secret alone on stdout, unwrapped and unstyled, so scripts can capture it."""
    typer.echo(value)


@app.command("migrate")
def migrate_command() -> None:
    """Create or upgrade the database schema (GOLDENSET_DATABASE_URL; SQLite under ./var/ by default)."""
    _engine()
    out.print("database schema is up to date")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    no_scheduler: Annotated[bool, typer.Option("--no-scheduler", help="Serve only; run `goldenset scheduler` elsewhere.")] = False,
) -> None:
    """Migrate, then serve the REST API (docs at /docs, OpenAPI at /openapi.json) and, unless
    --no-scheduler, the scheduler of pulls and curation."""
    import uvicorn

    from service.app import create_app
    from service.logs import configure_logging
    from service.scheduler import GoldensetScheduler

    settings = get_settings()
    configure_logging(settings.log_level, json_format=settings.log_json)
    engine = _engine()
    scheduler = None if no_scheduler else GoldensetScheduler(engine, settings)
    if scheduler is not None:
        scheduler.start()
    try:
        uvicorn.run(create_app(settings, engine=engine), host=host, port=port, log_config=None, proxy_headers=False)
    finally:
        if scheduler is not None:
            scheduler.shutdown()


@app.command()
def scheduler() -> None:
    """Run only the scheduler (for deployments whose API replicas run `serve --no-scheduler`)."""
    from service.logs import configure_logging
    from service.scheduler import GoldensetScheduler

    settings = get_settings()
    configure_logging(settings.log_level, json_format=settings.log_json)
    GoldensetScheduler(_engine(), settings, blocking=True).start()


@app.command()
def pull(source: Annotated[str, typer.Option("--source", help="The connector source to pull.")]) -> None:
    """Pull a connector source now, from its cursor, showing progress.

    Exit status: 0 on success (3 when some records were rejected), 4 when the credentials were
    refused, 5 when the pull failed otherwise (it resumes from the last stored page next time),
    2 when it could not start."""
    from ingest.connectors.base import AuthError, ConnectorError
    from ingest.pull import PullProgress
    from service.pulls import PullRefused, pull_source

    engine = _engine()
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task(f"pulling {source}", total=None)

        def on_page(state: PullProgress) -> None:
            progress.update(task, completed=state.records, total=state.total, description=f"pulling {source} (page {state.pages})")

        try:
            summary = pull_source(engine=engine, name=source, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR, on_page=on_page)
        except PullRefused as exc:
            raise _fail(str(exc)) from exc
        except AuthError as exc:
            raise _fail(str(exc), EXIT_AUTH) from exc
        except ConnectorError as exc:
            raise _fail(str(exc), EXIT_PULL_FAILED) from exc
    _print_summary(summary)
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


def _print_summary(summary: IngestSummary) -> None:
    table = Table(title=f"ingest into {summary.source}", show_header=False)
    for label, value in (("read", summary.read), ("new", summary.new), ("updated", summary.updated), ("unchanged", summary.unchanged), ("rejected", summary.rejected)):
        table.add_row(label, str(value))
    for reason, count in sorted(summary.rejected_by_reason.items()):
        table.add_row(f"  rejected: {reason}", str(count))
    for kind, count in sorted(summary.redacted.items()):
        table.add_row(f"redacted <{kind}>", str(count))
    out.print(table)
    for error in summary.errors[:MAX_ERRORS_SHOWN]:
        out.print(f"[yellow]{error.locator}[/]: {error.reason}: {error.detail}", highlight=False)
    if len(summary.errors) > MAX_ERRORS_SHOWN:
        out.print(f"... and {len(summary.errors) - MAX_ERRORS_SHOWN} more rejected records")


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="A JSONL, CSV or JSON file of records.", exists=False)],
    source: Annotated[str, typer.Option("--source", help="Source name; created (kind 'file') if new.")],
    mapping: Annotated[Path | None, typer.Option("--mapping", help="Mapping file (YAML or JSON); stored on the source.")] = None,
    format: Annotated[str | None, typer.Option("--format", help="jsonl, csv or json; default from the mapping or the extension.")] = None,
    curate: Annotated[
        bool | None, typer.Option("--curate/--no-curate", help="Curate pending candidates afterwards (default: GOLDENSET_CURATE_AFTER_INGEST, true).", show_default=False)
    ] = None,
) -> None:
    """Ingest a file of dated incidents into a source, then curate what is pending (unless
    --no-curate). Re-ingesting is idempotent.

    Exit status: 0 when every record was stored, 3 when some were rejected (the rest are stored),
    2 when nothing could be read."""
    settings = get_settings()
    summary = _ingest_file(file, source, mapping, format, kind=SourceKind.FILE.value)
    if settings.curate_after_ingest if curate is None else curate:
        _curate_after_ingest()
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


def _ingest_file(file: Path, source: str, mapping: Path | None, format: str | None, *, kind: str) -> IngestSummary:
    """Ingest `file` into `source` (created with `kind` if new), with progress; prints the summary."""
    try:
        check_source_name(source)
        parsed_mapping = load_mapping(mapping) if mapping is not None else None
        data = file.read_bytes()
    except (ValueError, MappingError) as exc:
        raise _fail(str(exc)) from exc
    except OSError as exc:
        raise _fail(f"cannot read {file}: {exc.strerror}") from exc
    settings = get_settings()
    with _session() as session:
        stored_source = get_source(session=session, name=source)
        mapping_document = parsed_mapping.model_dump(mode="json", exclude_defaults=True) if parsed_mapping else None
        if stored_source is None:
            stored_source, _ = create_source(
                session=session,
                data=SourceCreate(name=source, kind=kind, mapping=mapping_document),
                secret_key=settings.secret_key.get_secret_value(),
                actor=CLI_ACTOR,
            )
            err.print(f"created source [bold]{source}[/]")
        elif (stored_source.kind == SourceKind.REFERENCE.value) != (kind == SourceKind.REFERENCE.value):
            raise _fail(f"source {source!r} is a {stored_source.kind} source; reference corpora and incident sources cannot share a name")
        elif mapping_document is not None:
            set_source_mapping(session=session, source=stored_source, mapping=mapping_document, actor=CLI_ACTOR)
        effective = source_mapping(stored_source)
        try:
            records = list(iter_records(data, detect_format(file, format, effective.format), effective.records))
        except DocumentError as exc:
            raise _fail(f"{file}: {exc}; nothing was ingested") from exc
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as progress:
            task = progress.add_task(f"ingesting {file.name}", total=len(records))
            summary = ingest_records(
                session=session, source=stored_source, records=records, mapping=effective, actor=CLI_ACTOR, on_progress=lambda n: progress.advance(task, n)
            )
    _print_summary(summary)
    return summary


@reference_app.command("add")
def reference_add(
    name: Annotated[str, typer.Argument(help="The corpus's source name, e.g. a public benchmark's.")],
    file: Annotated[Path, typer.Argument(help="A JSONL, CSV or JSON file of the benchmark's items.")],
    mapping: Annotated[Path | None, typer.Option("--mapping", help="Mapping file (YAML or JSON).")] = None,
    format: Annotated[str | None, typer.Option("--format", help="jsonl, csv or json.")] = None,
) -> None:
    """Index a public benchmark's items as a reference corpus. They are never released; a
    candidate that copies or paraphrases one becomes `contaminated`, with the match."""
    summary = _ingest_file(file, name, mapping, format, kind=SourceKind.REFERENCE.value)
    _curate_after_ingest()
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


def _curate_after_ingest() -> None:
    from curation.index import MixedRecipeError
    from service.curation import CurationBusy

    try:
        _run_curation(limit=None)
    except CurationBusy as exc:
        err.print(f"not curated now: {exc}", highlight=False)
    except MixedRecipeError as exc:
        err.print(f"[yellow]not curated:[/] {exc}", highlight=False)


def _run_curation(limit: int | None) -> CurationSummary | None:
    """Curate with a progress bar and print the summary; None when nothing was pending."""
    from service.curation import get_encoder, pending_count, run_curation

    settings = get_settings()
    engine = _engine()
    with Session(engine) as session:
        pending = pending_count(session)
    if limit is not None:
        pending = min(pending, limit)
    if pending == 0:
        err.print("nothing to curate: no pending candidates")
        return None
    with err.status("loading the embedding model"):
        encoder = get_encoder(settings)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task("curating", total=pending)

        def on_batch(state: CurationSummary) -> None:
            progress.update(task, completed=state.decided + state.references, description=f"curating ({state.duplicate} duplicates so far)")

        summary = run_curation(engine, settings, encoder=encoder, limit=limit, on_batch=on_batch)
    _print_curation(summary)
    return summary


def _run_refingerprint() -> None:
    """Re-fingerprint with a progress bar and print what was done."""
    from curation.fingerprints import MinHashRecipe
    from curation.refingerprint import RefingerprintSummary, stale_count
    from service.curation import get_encoder, run_refingerprint

    settings = get_settings()
    engine = _engine()
    with err.status("loading the embedding model"):
        encoder = get_encoder(settings)
    with Session(engine) as session:
        stale = stale_count(session, recipe=MinHashRecipe(), model_id=encoder.model_id)
    if stale == 0:
        err.print("every fingerprint is up to date")
        return
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as progress:
        task = progress.add_task("re-fingerprinting", total=stale)

        def on_batch(state: RefingerprintSummary) -> None:
            progress.update(task, completed=state.items)

        summary = run_refingerprint(engine, settings, encoder=encoder, on_batch=on_batch)
    err.print(f"re-fingerprinted {summary.items} items ({summary.encoded} texts encoded)")


def _print_curation(summary: CurationSummary) -> None:
    table = Table(title="curation", show_header=False)
    for label, value in (("decided", summary.decided), ("unique", summary.unique), ("duplicate", summary.duplicate), ("contaminated", summary.contaminated)):
        table.add_row(label, str(value))
    if summary.references:
        table.add_row("reference items indexed", str(summary.references))
    for stage, count in sorted(summary.by_stage.items()):
        table.add_row(f"  by stage: {stage}", str(count))
    table.add_row("encoder calls (texts)", str(summary.encoded))
    out.print(table)


@app.command()
def curate(
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Decide at most N candidates.")] = None,
    refingerprint: Annotated[
        bool, typer.Option("--refingerprint", help="First recompute fingerprints made with another recipe or embedding model (after an upgrade or a model change).")
    ] = False,
) -> None:
    """Decide pending candidates (oldest incident first): unique, or duplicate of an earlier item
    (exact, near-verbatim MinHash or paraphrase embedding), or contaminated by a reference corpus.

    Exit status: 0 when done (or nothing was pending), 6 when another process is curating,
    2 when the stored fingerprints were made with another recipe or model (rerun with --refingerprint)."""
    from curation.index import MixedRecipeError
    from service.curation import CurationBusy

    try:
        if refingerprint:
            _run_refingerprint()
        _run_curation(limit=limit)
    except CurationBusy as exc:
        raise _fail(str(exc), EXIT_BUSY) from exc
    except MixedRecipeError as exc:
        raise _fail(str(exc)) from exc


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses the token.")],
    scopes: Annotated[str, typer.Option("--scopes", help="Comma-separated: ingest, curate, read, sealed, admin.")],
) -> None:
    """Create a token and print it once (only its hash is stored)."""
    with _session() as session:
        try:
            plaintext, token = create_token(session=session, name=name, scopes=scopes, actor=CLI_ACTOR)
        except ValueError as exc:
            raise _fail(str(exc)) from exc
    err.print(f"token {token.id} ({token.name}) with scopes {', '.join(token.scopes)}; it is shown only now:")
    _print_secret(plaintext)


@token_app.command("list")
def token_list() -> None:
    """List tokens (never their values)."""
    with _session() as session:
        tokens = session.exec(select(ApiToken).order_by(col(ApiToken.id))).all()
    table = Table("id", "name", "prefix", "scopes", "created", "last used", "revoked")
    for token in tokens:
        last_used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "-"
        table.add_row(str(token.id), token.name, token.prefix, ",".join(token.scopes), f"{token.created_at:%Y-%m-%d %H:%M}", last_used, "yes" if token.revoked else "")
    out.print(table)


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(help="The token's id (see `goldenset token list`).")]) -> None:
    """Revoke a token; requests bearing it get 401 from now on."""
    with _session() as session:
        try:
            revoke_token(session=session, token_id=token_id, actor=CLI_ACTOR)
        except LookupError as exc:
            raise _fail(str(exc)) from exc
    out.print(f"token {token_id} revoked")


@source_app.command("create")
def source_create(
    name: Annotated[str, typer.Argument(help="Source name.")],
    mapping: Annotated[Path | None, typer.Option("--mapping", help="Mapping file; default: the connector's, or the native item shape.")] = None,
    kind: Annotated[str, typer.Option("--kind", help="push, file, or a connector kind (jira, github, pagerduty, ...).")] = SourceKind.PUSH.value,
    connector: Annotated[Path | None, typer.Option("--connector", help="YAML or JSON file with the connector configuration, credentials included.")] = None,
    interval: Annotated[int | None, typer.Option("--interval", help="Pull every N seconds (connector sources).")] = None,
) -> None:
    """Create a source and print its webhook secret once."""
    try:
        document = load_mapping(mapping).model_dump(mode="json", exclude_defaults=True) if mapping else None
        connector_document = _read_document(connector) if connector else None
        data = SourceCreate(name=name, kind=kind, mapping=document, connector=connector_document, pull_interval_seconds=interval)
    except (ValueError, MappingError, OSError) as exc:
        raise _fail(str(exc)) from exc
    with _session() as session:
        try:
            _, secret = create_source(session=session, data=data, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR)
        except (FileExistsError, ConfigError, UnknownConnector) as exc:
            raise _fail(str(exc)) from exc
    err.print(f"source {name} created; its webhook secret (for the Goldenset-Signature header) is shown only now:")
    _print_secret(secret)


def _read_document(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path} must hold an object of settings")
    return document


@source_app.command("list")
def source_list() -> None:
    """List sources with their item counts."""
    with _session() as session:
        sources = list_sources(session=session)
    table = Table("name", "kind", "items", "created")
    for source in sources:
        table.add_row(source.name, source.kind, str(source.item_count), f"{source.created_at:%Y-%m-%d %H:%M}")
    out.print(table)


register_eval_commands(app)
register_canary_commands(app)
register_evidence_commands(app)

if __name__ == "__main__":
    app()
