"""The source commands: `source create|list|configure|test` (`configure` in `service.sources.configure_cli`,
`test` in `service.sources.connection_cli`), `ingest FILE`, `reference add` and `pull`."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table
from sqlmodel import Session

from ingest.connectors.base import ConfigError
from ingest.connectors.registry import UnknownConnector
from ingest.mapping import MappingError, load_mapping
from ingest.preparing import usable_cores
from ingest.readers import DocumentError, detect_format, iter_records
from schemas.problem import IngestSummary
from schemas.source import SourceCreate, SourceKind, SourceRead, check_source_name
from service.core.db import write_transaction
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import (
    CLI_ACTOR,
    EXIT_FAILED,
    EXIT_REFUSED,
    EXIT_REJECTED,
    JsonOption,
    err,
    fail,
    open_engine,
    out,
    print_json,
    print_secret,
    progress_bar,
)
from service.dedup.cli import curate_after_ingest
from service.sources.configure_cli import source_configure
from service.sources.connection_cli import source_test
from service.sources.definitions import SourceKindClash, create_source, file_source, list_sources, source_mapping
from service.sources.ingestion import ingest_records

source_app = typer.Typer(help="Create, list and configure sources.", no_args_is_help=True)
reference_app = typer.Typer(help="Public reference corpora that candidates are checked against.", no_args_is_help=True)
MAX_ERRORS_SHOWN = 25


def print_summary(summary: IngestSummary) -> None:
    """An ingest's counts, redactions and the first rejected records, with why."""
    table = Table(title=f"ingest into {summary.source}", show_header=False)
    for label, value in summary.counts().items():
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


def pull(source: Annotated[str, typer.Option("--source", help="The connector source to pull.")]) -> None:
    """Pull a connector source now, from its cursor, showing progress.

    Exit status: 0 on success (3 when some records were rejected), 4 when the credentials were
    refused, 5 when the pull failed otherwise (it resumes from the last stored page next time).
    A pull that cannot start is refused with its reason: 2 when the source does not exist, 3 when
    it cannot be pulled now (disabled, not a connector source, unusable settings, or a pull of it
    already running)."""
    from ingest.connectors.base import AuthError, ConnectorError
    from ingest.pull import PullProgress
    from service.sources.pulls import pull_source

    engine = open_engine()
    with progress_bar() as progress:
        task = progress.add_task(f"pulling {source}", total=None)

        def on_page(state: PullProgress) -> None:
            progress.update(task, completed=state.records, total=state.total, description=f"pulling {source} (page {state.pages})")

        try:
            summary = pull_source(engine=engine, name=source, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR, on_page=on_page)
        except AuthError as exc:
            raise fail(str(exc), EXIT_REFUSED) from exc
        except ConnectorError as exc:
            raise fail(str(exc), EXIT_FAILED) from exc
    print_summary(summary)
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


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
        curate_after_ingest()
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


def _ingest_file(file: Path, source: str, mapping: Path | None, format: str | None, *, kind: str) -> IngestSummary:
    """Ingest `file` into `source` (created with `kind` if new), with progress; prints the summary."""
    try:
        check_source_name(source)
        parsed_mapping = load_mapping(mapping) if mapping is not None else None
        data = file.read_bytes()
    except (ValueError, MappingError) as exc:
        raise fail(str(exc)) from exc
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror}") from exc
    settings = get_settings()
    engine = open_engine()
    with write_transaction(engine) as session:
        try:
            stored_source, created = file_source(
                session=session,
                name=source,
                kind=kind,
                mapping=parsed_mapping.model_dump(mode="json", exclude_defaults=True) if parsed_mapping else None,
                secret_key=settings.secret_key.get_secret_value(),
                actor=CLI_ACTOR,
            )
        except SourceKindClash as exc:
            raise fail(str(exc)) from exc
    if created:
        err.print(f"created source [bold]{source}[/]")
    effective = source_mapping(stored_source)
    try:
        records = list(iter_records(data, detect_format(file, format, effective.format), effective.records))
    except DocumentError as exc:
        raise fail(f"{file}: {exc}; nothing was ingested") from exc
    with progress_bar() as progress:
        task = progress.add_task(f"ingesting {file.name}", total=len(records))
        summary = ingest_records(
            units=partial(write_transaction, engine),
            source=stored_source,
            records=records,
            mapping=effective,
            actor=CLI_ACTOR,
            on_progress=lambda n: progress.advance(task, n),
            workers=settings.ingest_workers or usable_cores(),
        )
    print_summary(summary)
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
    curate_after_ingest()
    if summary.rejected:
        raise typer.Exit(EXIT_REJECTED)


@source_app.command("create")
def source_create(
    name: Annotated[str, typer.Argument(help="Source name.")],
    mapping: Annotated[Path | None, typer.Option("--mapping", help="Mapping file; default: the connector's, or the native item shape.")] = None,
    kind: Annotated[
        str, typer.Option("--kind", help="push, file, or a connector kind (jira, github, pagerduty, servicenow, opsgenie, sentry, incidentio, ...).")
    ] = SourceKind.PUSH.value,
    connector: Annotated[Path | None, typer.Option("--connector", help="YAML or JSON file with the connector configuration, credentials included.")] = None,
    interval: Annotated[int | None, typer.Option("--interval", help="Pull every N seconds (connector sources).")] = None,
) -> None:
    """Create a source and print its webhook secret once."""
    try:
        document = load_mapping(mapping).model_dump(mode="json", exclude_defaults=True) if mapping else None
        connector_document = _read_document(connector) if connector else None
        data = SourceCreate(name=name, kind=kind, mapping=document, connector=connector_document, pull_interval_seconds=interval)
    except (ValueError, MappingError, OSError) as exc:
        raise fail(str(exc)) from exc
    with write_transaction(open_engine()) as session:
        try:
            _, secret = create_source(session=session, data=data, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR)
        except (FileExistsError, ConfigError, UnknownConnector) as exc:
            raise fail(str(exc)) from exc
    err.print(f"source {name} created; its webhook secret (for the Goldenset-Signature header) is shown only now:")
    print_secret(secret)


def _read_document(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path} must hold an object of settings")
    return document


@source_app.command("list")
def source_list(as_json: JsonOption = False) -> None:
    """List sources with their item counts (over the API with --url)."""
    with remote_client() as client:
        if client is not None:
            sources = [SourceRead.model_validate(source.model_dump(mode="json")) for source in client.list_sources()]
        else:
            with Session(open_engine()) as session:
                sources = list_sources(session=session)
    if as_json:
        print_json([source.model_dump(mode="json") for source in sources])
        return
    table = Table("name", "kind", "items", "created")
    for source in sources:
        table.add_row(source.name, source.kind, str(source.item_count), f"{source.created_at:%Y-%m-%d %H:%M}")
    out.print(table)


source_app.command("configure")(source_configure)
source_app.command("test")(source_test)


def register(app: typer.Typer) -> None:
    """Add `pull`, `ingest`, `source` and `reference` to the `goldenset` app."""
    app.command()(pull)
    app.command()(ingest)
    app.add_typer(source_app, name="source")
    app.add_typer(reference_app, name="reference")
