"""`goldenset review` in the terminal: decisions by id, or an interactive pass over pending items
with their nearest curated neighbours (from stored embeddings: the model is loaded, never run),
then over the duplicates dedup decided with a low margin, each beside the item it matched."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.panel import Panel
from rich.table import Table
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.index import MixedRecipeError
from curation.dedup.overrides import OverrideRefused, rule_not_duplicate
from curation.dedup.similarity import nearest_neighbours
from curation.dedup.stats import LOW_MARGIN, low_margin_duplicates
from curation.review import ReviewRefused, decide, pending_items, review_batch
from schemas.dedup import LowMarginDuplicate
from schemas.item import Item
from schemas.review import Decision, ReviewDecision
from schemas.source import Source
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_REJECTED, err, fail, open_engine, out

EXCERPT = 600


def decide_ids(engine: Engine, decisions: Sequence[ReviewDecision]) -> None:
    """Apply decisions by id; print what was done and each refusal (exit 3 if any)."""
    with write_transaction(engine) as session:
        outcome = review_batch(session=session, decisions=decisions, actor=CLI_ACTOR)
    if outcome.approved:
        out.print(f"approved: {', '.join(str(item_id) for item_id in outcome.approved)}")
    if outcome.rejected:
        out.print(f"rejected: {', '.join(str(item_id) for item_id in outcome.rejected)}")
    for error in outcome.errors:
        err.print(f"[yellow]item {error.external_id}[/]: {error.detail}", highlight=False)
    if outcome.errors:
        raise typer.Exit(EXIT_REJECTED)


def _deduplicator(engine: Engine) -> Deduplicator | None:
    from service.dedup.encoder import get_encoder
    from service.dedup.reader import DedupReader

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


def _panel(item: Item, source: str) -> Panel:
    text = item.input if len(item.input) <= EXCERPT else item.input[:EXCERPT] + " …"
    body = f"[bold]{item.title}[/]\n{text}"
    if item.reference:
        body += f"\n[dim]reference:[/] {item.reference[:EXCERPT]}"
    return Panel(body, title=f"item {item.id} · {source} · {item.external_id} · {item.occurred_at:%Y-%m-%d}", title_align="left")


def _show(session: Session, item: Item, source: str, deduplicator: Deduplicator | None) -> None:
    out.print(_panel(item, source))
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


def interactive_review(engine: Engine, *, sources: Sequence[str], limit: int, neighbours: bool, margin: float = LOW_MARGIN) -> None:
    """Ask about each pending item of `sources`, newest first, then about each duplicate of theirs
    decided with a margin under `margin`, closest call first; each decision is committed at once."""
    with Session(engine) as session:
        pending = pending_items(session=session, sources=sources, limit=limit)
        doubtful = low_margin_duplicates(session=session, sources=sources, margin=margin, limit=limit) if margin > 0 else []
    if not pending and not doubtful:
        out.print(f"nothing to review in {', '.join(sources)}: no items waiting (unique and undecided) and no duplicates decided with a margin under {margin}")
        return
    if pending and not _review_pending(engine, pending, sources=sources, neighbours=neighbours):
        return
    if doubtful:
        _review_doubtful(engine, doubtful, margin=margin)


def _review_pending(engine: Engine, pending: list[tuple[Item, str]], *, sources: Sequence[str], neighbours: bool) -> bool:
    """Approve or reject pending items; False when the person quit."""
    deduplicator = _deduplicator(engine) if neighbours else None
    counts = {"approved": 0, "rejected": 0, "skipped": 0}
    out.print(f"{len(pending)} item(s) to review in {', '.join(sources)}")
    going = True
    for item, source in pending:
        assert item.id is not None
        with Session(engine) as session:
            _show(session, item, source, deduplicator)
        answer = typer.prompt("[a]pprove, [r]eject, [s]kip, [q]uit", default="s").strip().lower()[:1]
        if answer == "q":
            going = False
            break
        if answer not in ("a", "r"):
            counts["skipped"] += 1
            continue
        reason = ""
        while answer == "r" and not reason.strip():
            reason = typer.prompt("reason for rejecting")
        decision = Decision.APPROVE if answer == "a" else Decision.REJECT
        try:
            with write_transaction(engine) as session:
                decide(session=session, item_id=item.id, decision=decision, reason=reason, actor=CLI_ACTOR)
        except ReviewRefused as exc:
            err.print(f"[yellow]not decided:[/] {exc.detail}", highlight=False)
            continue
        counts["approved" if decision is Decision.APPROVE else "rejected"] += 1
    out.print(f"approved {counts['approved']}, rejected {counts['rejected']}, skipped {counts['skipped']}")
    return going


def _review_doubtful(engine: Engine, doubtful: list[LowMarginDuplicate], *, margin: float) -> None:
    """Show each low-margin duplicate beside the item it matched: keep it, or rule it not a duplicate."""
    counts = {"kept": 0, "ruled not a duplicate": 0, "skipped": 0}
    out.print(f"{len(doubtful)} duplicate(s) decided with a margin under {margin}: check each against the item it matched")
    for entry in doubtful:
        with Session(engine) as session:
            item, matched = session.get(Item, entry.item_id), session.get(Item, entry.matched_item_id)
            if item is None or matched is None:
                continue
            matched_source = session.get(Source, matched.source_id)
        beside = Table.grid(expand=True, padding=(0, 1))
        beside.add_column(ratio=1)
        beside.add_column(ratio=1)
        beside.add_row(_panel(item, entry.source), _panel(matched, matched_source.name if matched_source else "?"))
        out.print(beside)
        out.print(f"{entry.status} of item {entry.duplicate_of} · stage {entry.stage} · rule {entry.rule} · score {entry.score:.3f} · margin {entry.margin:.3f}", highlight=False)
        answer = typer.prompt("[k]eep as duplicate, [n]ot a duplicate, [s]kip, [q]uit", default="s").strip().lower()[:1]
        if answer == "q":
            break
        if answer == "k":
            counts["kept"] += 1
            continue
        if answer != "n":
            counts["skipped"] += 1
            continue
        note = ""
        while not note.strip():
            note = typer.prompt("why is it not a duplicate")
        try:
            with write_transaction(engine) as session:
                rule_not_duplicate(session=session, item_id=entry.item_id, note=note, actor=CLI_ACTOR)
        except OverrideRefused as exc:
            err.print(f"[yellow]not ruled:[/] {exc.detail}", highlight=False)
            continue
        counts["ruled not a duplicate"] += 1
    out.print(", ".join(f"{label} {count}" for label, count in counts.items()))


def review(
    eval_name: Annotated[str | None, typer.Option("--eval", help="Review items of this eval's sources.")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Review items of this source (repeat).")] = None,
    approve: Annotated[list[int] | None, typer.Option("--approve", help="Approve this item id (repeat); no prompts.")] = None,
    reject: Annotated[list[int] | None, typer.Option("--reject", help="Reject this item id (repeat; needs --reason); no prompts.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (required to reject).")] = "",
    limit: Annotated[int, typer.Option(help="Show at most this many pending items, and as many low-margin duplicates.", min=1)] = 50,
    neighbours: Annotated[bool, typer.Option("--neighbours/--no-neighbours", help="Show each item's nearest curated items.")] = True,
    margin: Annotated[float, typer.Option("--margin", min=0, max=1, help="Then show duplicates decided with a margin under this (0: none).")] = LOW_MARGIN,
) -> None:
    """Approve or reject items dedup kept as unique. With --approve/--reject, decide those ids;
    otherwise list the pending items of the eval's sources (newest first) with their nearest
    neighbours and ask about each: [a]pprove, [r]eject (with a reason), [s]kip, [q]uit. Then show
    each duplicate decided with a low margin (closest call first) beside the item it matched:
    [k]eep as duplicate, [n]ot a duplicate (with a note), [s]kip, [q]uit.

    Exit status: 0 when every decision was taken, 3 when some were refused, 2 on bad usage."""
    if approve or reject:
        decisions = [ReviewDecision(item_id=item_id, decision=Decision.APPROVE, reason=reason) for item_id in approve or []]
        decisions += [ReviewDecision(item_id=item_id, decision=Decision.REJECT, reason=reason) for item_id in reject or []]
        decide_ids(open_engine(), decisions)
        return
    sources = list(source or [])
    engine = open_engine()
    if eval_name is not None:
        from service.evals.definitions import require_eval

        with Session(engine) as session:
            try:
                sources += require_eval(session=session, name=eval_name).sources
            except ProblemError as exc:
                raise fail(exc.detail) from exc
    if not sources:
        raise fail("name the items to review: --eval NAME or --source NAME, or decide ids with --approve/--reject")
    interactive_review(engine, sources=sources, limit=limit, neighbours=neighbours, margin=margin)


def register(app: typer.Typer) -> None:
    """Add `review` to the `goldenset` app."""
    app.command()(review)
