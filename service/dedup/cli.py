"""The `goldenset curate` command, and curation after a file ingest. The embedding model and the
dedup engine load only when something is to be curated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from sqlmodel import Session, col, select

from service.core.settings import get_settings
from service.core.terminal import EXIT_BUSY, EXIT_FAILED, err, fail, open_engine, out, progress_bar
from service.dedup.dedup_cli import dedup_app

REDECIDE_SHOWN = 20

if TYPE_CHECKING:
    from curation.dedup.deduplicator import CurationSummary


def curate_after_ingest() -> None:
    """Curate what an ingest left pending; a busy lock, stale fingerprints, a failing embedding
    server or an embedding endpoint the gate refuses are reported, not fatal: the ingest is done.
    The gate is asked first (`endpoint_refusal`), so its refusal is reported before any work; one
    that comes later (the endpoint changed meanwhile) ends the command as every refusal does."""
    from curation.dedup.index import MixedRecipeError
    from embedding.http_encoder import EmbeddingServiceError
    from service.dedup.http_backend import endpoint_refusal
    from service.dedup.runner import CurationBusy

    with Session(open_engine()) as session:
        refusal = endpoint_refusal(session, get_settings(), None)
    if refusal is not None:
        err.print(f"not curated now: {refusal}", highlight=False)
        return
    try:
        _run_curation(limit=None)
    except (CurationBusy, EmbeddingServiceError) as exc:
        err.print(f"not curated now: {exc}", highlight=False)
    except MixedRecipeError as exc:
        err.print(f"[yellow]not curated:[/] {exc}", highlight=False)


def _run_curation(limit: int | None) -> CurationSummary | None:
    """Curate with a progress bar and print the summary; None when nothing was pending."""
    from curation.dedup.state import pending_count
    from service.dedup.encoder import get_encoder
    from service.dedup.runner import run_curation

    settings = get_settings()
    engine = open_engine()
    with Session(engine) as session:
        pending = pending_count(session)
    if limit is not None:
        pending = min(pending, limit)
    if pending == 0:
        err.print("nothing to curate: no pending candidates")
        return None
    with err.status("loading the embedding model"):
        encoder = get_encoder(settings, engine)
    with progress_bar() as progress:
        task = progress.add_task("curating", total=pending)

        def on_batch(state: CurationSummary) -> None:
            progress.update(task, completed=state.decided + state.references, description=f"curating ({state.duplicate} duplicates so far)")

        summary = run_curation(engine, settings, encoder=encoder, limit=limit, on_batch=on_batch)
    _print_curation(summary)
    return summary


def _run_refingerprint() -> None:
    """Re-fingerprint with a progress bar and print what was done."""
    from curation.dedup.equivalence import EquivalenceCheck
    from curation.dedup.fingerprints import MinHashRecipe
    from curation.dedup.refingerprint import RefingerprintSummary, stale_count
    from service.dedup.encoder import get_encoder
    from service.dedup.runner import run_refingerprint

    settings = get_settings()
    engine = open_engine()
    with err.status("loading the embedding model"):
        encoder = get_encoder(settings, engine)
    with Session(engine) as session:
        stale = stale_count(session, recipe=MinHashRecipe(), model_id=encoder.model_id)
    if stale == 0:
        err.print("every fingerprint is up to date")
        return
    adopted: list[EquivalenceCheck] = []
    with progress_bar() as progress:
        task = progress.add_task("re-fingerprinting", total=stale)

        def on_batch(state: RefingerprintSummary) -> None:
            progress.update(task, completed=state.items)

        summary = run_refingerprint(engine, settings, encoder=encoder, on_batch=on_batch, on_adopt=adopted.append)
    for check in adopted:
        err.print(
            f"adopted the vectors stored under {check.from_model_id} instead of re-encoding them: {check.to_model_id} agrees with them "
            f"to a min cosine of {check.min_cosine:.5f} over {check.texts} stored texts",
            highlight=False,
        )
    if summary.items or not adopted:
        err.print(f"re-fingerprinted {summary.items} items ({summary.encoded} texts encoded)")


def _run_redecide() -> None:
    """Re-decide with a progress bar and print what changed."""
    from curation.dedup.redecide import REOPENED_STATUSES
    from schemas.item import Item
    from service.dedup.encoder import get_encoder
    from service.dedup.runner import run_redecide

    settings = get_settings()
    engine = open_engine()
    with Session(engine) as session:
        decided = len(session.exec(select(Item.id).where(col(Item.status).in_(REOPENED_STATUSES))).all())
    with err.status("loading the embedding model"):
        encoder = get_encoder(settings, engine)
    with progress_bar() as progress:
        task = progress.add_task("re-deciding", total=decided)

        def on_batch(state: CurationSummary) -> None:
            progress.update(task, completed=min(decided, state.decided), description=f"re-deciding ({state.duplicate} duplicates so far)")

        summary = run_redecide(engine, settings, encoder=encoder, on_batch=on_batch)
    table = Table(title="re-decided", show_header=False)
    table.add_row("decided again", str(summary.reopened))
    table.add_row("kept as people decided (overrides, reviewed, released)", str(summary.kept))
    table.add_row("unchanged", str(summary.unchanged))
    for kind, count in sorted(summary.by_kind.items()):
        table.add_row(f"  changed: {kind}" + (" (another item matched)" if kind == "duplicate -> duplicate" else ""), str(count))
    out.print(table)
    if summary.changes:
        shown = summary.changes[:REDECIDE_SHOWN]
        with Session(engine) as session:
            titles = {item.id: item.title for item in session.exec(select(Item).where(col(Item.id).in_([change.item_id for change in shown])))}
        changed = Table(title=f"changes (first {len(shown)} of {len(summary.changes)})")
        for column in ("item", "before", "after", "title"):
            changed.add_column(column)
        for change in shown:
            before = change.before.status + (f" of {change.before.duplicate_of}" if change.before.duplicate_of else "")
            after = change.after.status + (f" of {change.after.duplicate_of}" if change.after.duplicate_of else "")
            changed.add_row(str(change.item_id), before, after, titles.get(change.item_id, "")[:80])
        out.print(changed)


def _print_curation(summary: CurationSummary) -> None:
    table = Table(title="curation", show_header=False)
    for label, value in (("decided", summary.decided), ("unique", summary.unique), ("duplicate", summary.duplicate), ("contaminated", summary.contaminated)):
        table.add_row(label, str(value))
    if summary.asked:
        table.add_row("  of the unique: asked a curator (goldenset dedup questions)", str(summary.asked))
    if summary.references:
        table.add_row("reference items indexed", str(summary.references))
    for stage, count in sorted(summary.by_stage.items()):
        table.add_row(f"  by stage: {stage}", str(count))
    table.add_row("encoder calls (texts)", str(summary.encoded))
    out.print(table)


def curate(
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Decide at most N candidates.")] = None,
    refingerprint: Annotated[
        bool, typer.Option("--refingerprint", help="First recompute fingerprints made with another recipe or embedding model (after an upgrade or a model change).")
    ] = False,
    redecide: Annotated[
        bool,
        typer.Option(
            "--redecide",
            help=(
                "Decide again every item dedup decided, under the current rules and thresholds (after an upgrade or a threshold change); "
                "overrides, reviewed and released items stay as they are. Prints what changed."
            ),
        ),
    ] = False,
) -> None:
    """Decide pending candidates (oldest incident first): unique, or duplicate of an earlier item, or contaminated by a reference corpus.

    Duplicates are found by exact hash, near-verbatim MinHash or paraphrase embedding.

    Exit status: 0 when done (or nothing was pending), 6 when another process is curating,
    2 when the stored fingerprints were made with another recipe or model (rerun with --refingerprint),
    4 when the `http` embedding backend's endpoint fails the gate (refused: the message names the
    condition), 5 when the embedding server failed or answered something unusable."""
    from curation.dedup.index import MixedRecipeError
    from embedding.http_encoder import EmbeddingServiceError
    from service.dedup.runner import CurationBusy

    try:
        if refingerprint:
            _run_refingerprint()
        if redecide:
            if limit is not None:
                raise fail("--redecide decides every item again; it does not take --limit")
            _run_redecide()
        else:
            _run_curation(limit=limit)
    except CurationBusy as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    except MixedRecipeError as exc:
        raise fail(str(exc)) from exc
    except EmbeddingServiceError as exc:
        raise fail(str(exc), EXIT_FAILED) from exc


def register(app: typer.Typer) -> None:
    """Add `curate` and the `dedup` group (`service.dedup.dedup_cli`) to the `goldenset` app."""
    app.command()(curate)
    app.add_typer(dedup_app, name="dedup")
