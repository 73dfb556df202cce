"""The `goldenset dedup` group: `stats`, dedup's figures, and people's rulings on duplicates,
`not-duplicate` and `duplicate-of` (registered by `service.dedup.cli`).

Exit status of the rulings: 0 when ruled, 3 when refused (the reason is printed), 2 on bad usage.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated

import typer
from rich.table import Table
from sqlmodel import Session

from curation.dedup.overrides import OverrideRefused, rule_duplicate_of, rule_not_duplicate
from schemas.common import MAX_ROW_ID
from schemas.dedup import DedupStats
from schemas.item import Item
from service.core.db import write_transaction
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_REJECTED, fail, open_engine, out
from service.dedup.reads import stats_for_readers

dedup_app = typer.Typer(help="Dedup's figures, and people's rulings on duplicates.", no_args_is_help=True)
ItemArgument = Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The item's id.")]
NoteOption = Annotated[str, typer.Option("--note", help="Why (required): kept with the ruling and in the audit trail.")]


@dedup_app.command("stats")
def stats(as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON (the shape of `GET /v1/dedup/stats`).")] = False) -> None:
    """What dedup decided: items by status, decisions in force by stage and rule, cluster sizes and
    the largest clusters (a sealed representative's title withheld), rulings in force by kind and
    the share of decided items marked duplicate. Works over the API with --url."""
    with remote_client() as client:
        if client is not None:
            figures = DedupStats.model_validate(client.dedup_stats().model_dump(mode="json"))
        else:
            with Session(open_engine()) as session:
                figures = stats_for_readers(session=session, secret_key=get_settings().secret_key.get_secret_value())
    if as_json:
        typer.echo(figures.model_dump_json(indent=2))
        return
    _print_stats(figures)


def _print_stats(figures: DedupStats) -> None:
    out.print(f"{figures.items} items; {figures.duplicate_share:.1%} of those dedup decided are duplicates", highlight=False)
    statuses = Table("status", "items", title="items by status")
    for status, count in figures.by_status.items():
        statuses.add_row(status, str(count))
    decisions = Table("stage", "rule", "decisions", title="decisions in force")
    for row in figures.decisions:
        decisions.add_row(row.stage, row.rule or "-", str(row.count))
    sizes = Table("items in the cluster", "clusters", title="cluster sizes")
    for size in figures.cluster_sizes:
        sizes.add_row(str(size.size), str(size.clusters))
    largest = Table("representative", "status", "items", "title", title="largest clusters")
    for cluster in figures.largest_clusters:
        largest.add_row(str(cluster.representative), cluster.status, str(cluster.size), "(sealed)" if cluster.sealed else cluster.title[:90])
    rulings = Table("kind", "rulings in force", title="people's rulings")
    for kind, count in figures.overrides.items():
        rulings.add_row(kind, str(count))
    for table in (statuses, decisions, sizes, largest, rulings):
        out.print(table)


def _rule(rule: Callable[..., Item]) -> Item:
    """Apply a ruling in its own transaction; a refusal ends the command with its reason (exit 3)."""
    try:
        with write_transaction(open_engine()) as session:
            return rule(session=session)
    except OverrideRefused as exc:
        raise fail(f"refused ({exc.reason}): {exc.detail}", EXIT_REJECTED) from exc


@dedup_app.command("not-duplicate")
def not_duplicate(item: ItemArgument, note: NoteOption) -> None:
    """Rule that a duplicate (or contaminated) item is not a duplicate of the item it names: it
    becomes unique (and waits for review), and no curation run matches the pair again.

    Exit status: 0 when ruled, 3 when refused (the reason is printed), 2 on bad usage."""
    _rule(partial(rule_not_duplicate, item_id=item, note=note, actor=CLI_ACTOR))
    out.print(f"item {item} is unique now: ruled not a duplicate, and never matched with that item again", highlight=False)


@dedup_app.command("duplicate-of")
def duplicate_of(item: ItemArgument, other: Annotated[int, typer.Argument(min=1, max=MAX_ROW_ID, help="The id of the item it duplicates.")], note: NoteOption) -> None:
    """Rule by hand that ITEM, a curated item, is a duplicate of OTHER, which is no duplicate
    itself: it becomes duplicate (contaminated when OTHER belongs to a reference corpus) and stays
    so whenever it is curated again.

    Exit status: 0 when ruled, 3 when refused (the reason is printed), 2 on bad usage."""
    ruled = _rule(partial(rule_duplicate_of, item_id=item, other_id=other, note=note, actor=CLI_ACTOR))
    out.print(f"item {item} is {ruled.status} of item {other} now, by this ruling, on every curation run", highlight=False)
