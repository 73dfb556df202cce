"""`goldenset review` in the terminal: decisions by id, or an interactive pass over pending items
with their nearest curated neighbours (from stored embeddings: the model is loaded, never run)."""

from __future__ import annotations

from collections.abc import Sequence

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup import Deduplicator
from curation.index import MixedRecipeError
from schemas.item import Item
from schemas.review import Decision, ReviewDecision
from service.cli_common import CLI_ACTOR
from service.db import write_session
from service.review import ReviewRefused, decide, nearest_neighbours, pending_items, review_batch
from service.settings import get_settings

EXIT_REFUSED = 3
EXCERPT = 600


def decide_ids(engine: Engine, decisions: Sequence[ReviewDecision], *, out: Console, err: Console) -> None:
    """Apply decisions by id; print what was done and each refusal (exit 3 if any)."""
    with write_session(engine) as session:
        outcome = review_batch(session=session, decisions=decisions, actor=CLI_ACTOR)
    if outcome.approved:
        out.print(f"approved: {', '.join(str(item_id) for item_id in outcome.approved)}")
    if outcome.rejected:
        out.print(f"rejected: {', '.join(str(item_id) for item_id in outcome.rejected)}")
    for error in outcome.errors:
        err.print(f"[yellow]item {error.external_id}[/]: {error.detail}", highlight=False)
    if outcome.errors:
        raise typer.Exit(EXIT_REFUSED)


def _deduplicator(engine: Engine, err: Console) -> Deduplicator | None:
    from service.curation import DedupReader, get_encoder

    settings = get_settings()
    try:
        with err.status("loading the dedup index"):
            encoder = get_encoder(settings)
            reader = DedupReader(settings, encoder=lambda: encoder)
            with Session(engine) as session:
                return reader.deduplicator(session)
    except (MixedRecipeError, OSError) as exc:
        err.print(f"[yellow]neighbours not shown:[/] {exc}", highlight=False)
        return None


def _show(session: Session, item: Item, source: str, deduplicator: Deduplicator | None, out: Console) -> None:
    text = item.input if len(item.input) <= EXCERPT else item.input[:EXCERPT] + " …"
    body = f"[bold]{item.title}[/]\n{text}"
    if item.reference:
        body += f"\n[dim]reference:[/] {item.reference[:EXCERPT]}"
    out.print(Panel(body, title=f"item {item.id} · {source} · {item.external_id} · {item.occurred_at:%Y-%m-%d}", title_align="left"))
    if deduplicator is None:
        return
    neighbours = nearest_neighbours(session=session, deduplicator=deduplicator, item=item, k=3)
    if not neighbours:
        out.print("[dim]no curated neighbours[/]")
        return
    table = Table("nearest", "score", "status", "date", "title", title=None, show_edge=False)
    for entry, other in neighbours:
        table.add_row(str(other.id), f"{entry.score:.2f}", other.status, f"{other.occurred_at:%Y-%m-%d}", other.title[:90])
    out.print(table)


def interactive_review(engine: Engine, *, sources: Sequence[str], limit: int, neighbours: bool, out: Console, err: Console) -> None:
    """Ask about each pending item of `sources`, newest first; each decision is committed at once."""
    with Session(engine) as session:
        pending = pending_items(session=session, sources=sources, limit=limit)
    if not pending:
        out.print(f"nothing to review in {', '.join(sources)}: no items waiting (unique and undecided)")
        return
    deduplicator = _deduplicator(engine, err) if neighbours else None
    counts = {"approved": 0, "rejected": 0, "skipped": 0}
    out.print(f"{len(pending)} item(s) to review in {', '.join(sources)}")
    for item, source in pending:
        assert item.id is not None
        with Session(engine) as session:
            _show(session, item, source, deduplicator, out)
        answer = typer.prompt("[a]pprove, [r]eject, [s]kip, [q]uit", default="s").strip().lower()[:1]
        if answer == "q":
            break
        if answer not in ("a", "r"):
            counts["skipped"] += 1
            continue
        reason = ""
        while answer == "r" and not reason.strip():
            reason = typer.prompt("reason for rejecting")
        decision = Decision.APPROVE if answer == "a" else Decision.REJECT
        with write_session(engine) as session:
            try:
                decide(session=session, item_id=item.id, decision=decision, reason=reason, actor=CLI_ACTOR)
                session.commit()
            except ReviewRefused as exc:
                session.rollback()
                err.print(f"[yellow]not decided:[/] {exc.detail}", highlight=False)
                continue
        counts["approved" if decision is Decision.APPROVE else "rejected"] += 1
    out.print(f"approved {counts['approved']}, rejected {counts['rejected']}, skipped {counts['skipped']}")
