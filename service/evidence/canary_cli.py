"""`goldenset canary scan PATH...`: look for evals' canaries and copies of released items in text
dumps (`curation.evidence.canary`), and report which eval, release and items leaked.

Exit status: 0 when nothing was found, 1 when something was, 2 on a usage error.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.evidence.canary import ItemCopy, ScanConfig, ScanIndex, Scanner, ScanReport, WatchedItem, iter_files
from schemas.evals import Eval, Split
from schemas.release import Release, ReleaseItem
from service.core.terminal import EXIT_FOUND, EXIT_USAGE, err, fail, open_engine, out, progress_bar
from service.evals.definitions import CANARY_PREFIX

canary_app = typer.Typer(help="Find leaked evals: canary strings and copies of released items in text dumps.", no_args_is_help=True)
TEXT_FIELDS = ("title", "input", "reference")


def build_index(engine: Engine, *, evals: list[str] | None = None, config: ScanConfig | None = None) -> ScanIndex:
    """The canaries of the evals (all, or those named) and every item they ever released, with
    the (eval, release) pairs it was in and whether it is sealed; content as last released."""
    with Session(engine) as session:
        query = select(Eval)
        if evals:
            query = query.where(col(Eval.name).in_(evals))
        chosen = list(session.exec(query).all())
        missing = sorted(set(evals or []) - {evaluation.name for evaluation in chosen})
        if missing:
            raise ValueError(f"unknown eval(s): {', '.join(missing)}")
        names = {evaluation.id: evaluation.name for evaluation in chosen}
        rows = session.execute(
            sa_select(col(ReleaseItem.id), col(ReleaseItem.item_id), col(ReleaseItem.split), col(Release.eval_id), col(Release.number))
            .join(Release, col(Release.id) == col(ReleaseItem.release_id))
            .where(col(Release.eval_id).in_(list(names)))
        ).all()
        places: dict[int, set[tuple[str, int]]] = defaultdict(set)
        sealed: set[int] = set()
        newest: dict[int, int] = {}
        for row_id, item_id, split, eval_id, number in rows:
            places[item_id].add((names[eval_id], number))
            if split == Split.SEALED.value:
                sealed.add(item_id)
            newest[item_id] = max(newest.get(item_id, 0), row_id)
        contents = dict(session.exec(select(ReleaseItem.item_id, ReleaseItem.content).where(col(ReleaseItem.id).in_(list(newest.values())))).all()) if newest else {}
    items = []
    for item_id, content in sorted(contents.items()):
        document = json.loads(content)
        fields = {name: str(document.get(name) or "") for name in TEXT_FIELDS if document.get(name)}
        items.append(WatchedItem(item_id=item_id, fields=fields, releases=tuple(sorted(places[item_id])), sealed=item_id in sealed))
    config = config or ScanConfig(canary_prefix=CANARY_PREFIX.strip())
    return ScanIndex({evaluation.name: evaluation.canary for evaluation in chosen}, items, config)


def _where(releases: tuple[tuple[str, int], ...]) -> str:
    by_eval: dict[str, list[int]] = defaultdict(list)
    for eval_name, number in releases:
        by_eval[eval_name].append(number)
    return "; ".join(f"{name} release {', '.join(str(n) for n in sorted(numbers))}" for name, numbers in sorted(by_eval.items()))


def print_report(report: ScanReport) -> None:
    rate = report.bytes / 1e6 / report.seconds if report.seconds else 0.0
    if report.canaries:
        table = Table(title="Canaries found")
        for column in ("file", "byte offset", "eval", "canary GUID"):
            table.add_column(column)
        for hit in report.canaries:
            table.add_row(hit.path, str(hit.offset), hit.eval or "[yellow]unknown eval[/]", hit.guid)
        out.print(table)
    if report.copies:
        table = Table(title="Copies of released items found")
        for column in ("file", "byte offset", "item", "field", "kind", "containment", "similarity", "released in", "split"):
            table.add_column(column)
        for copy in report.copies:
            split = "[bold red]sealed[/]" if copy.sealed else "dev"
            table.add_row(copy.path, str(copy.offset), str(copy.item_id), copy.field, copy.kind, f"{copy.containment:.2f}", f"{copy.similarity:.2f}", _where(copy.releases), split)
        out.print(table)
    leaked = sorted({copy.item_id for copy in report.copies})
    evals = sorted({hit.eval for hit in report.canaries if hit.eval} | {name for copy in report.copies for name, _ in copy.releases})
    summary = f"scanned {report.files} file(s), {report.bytes / 1e6:.1f} MB in {report.seconds:.1f} s ({rate:.1f} MB/s): "
    if report.found:
        summary += f"{len(report.canaries)} canary hit(s), {len(report.copies)} copy(ies) of {len(leaked)} item(s); evals leaked: {', '.join(evals) or 'none known'}"
    else:
        summary += "nothing found"
    (err if report.found else out).print(summary, highlight=False)
    by_item: dict[int, list[ItemCopy]] = defaultdict(list)
    for copy in report.copies:
        by_item[copy.item_id].append(copy)
    for item_id, copies in sorted(by_item.items()):
        split = "sealed" if copies[0].sealed else "dev"
        first = copies[0]
        err.print(f"leaked: item {item_id} ({split}) of {_where(first.releases)}: {len(copies)} copy(ies), first in {first.path} at byte {first.offset}", highlight=False)
    for problem in report.unreadable:
        err.print(f"[yellow]unreadable:[/] {problem}", highlight=False)


@canary_app.command("scan")
def scan(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively; .gz read as text) to scan.", exists=True)],
    eval_names: Annotated[list[str] | None, typer.Option("--eval", help="Only this eval's canary and items (repeat); default: every eval.")] = None,
    min_containment: Annotated[float, typer.Option(min=0.05, max=1.0, help="Share of an item field's distinctive 3-word grams a copy must hold.")] = 0.5,
    min_similarity: Annotated[float, typer.Option(min=0.0, max=1.0, help="MinHash Jaccard estimate a copy must reach.")] = 0.4,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Scan text dumps for evals' canary strings and verbatim or near-verbatim copies of released
    items; report which eval, release and items leaked. Exit 1 when anything is found."""
    engine = open_engine()
    config = ScanConfig(min_containment=min_containment, min_similarity=min_similarity, canary_prefix=CANARY_PREFIX.strip())
    try:
        index = build_index(engine, evals=eval_names, config=config)
    except ValueError as exc:
        raise fail(str(exc), EXIT_USAGE) from exc
    total = sum(path.stat().st_size for path in iter_files(paths))
    if not as_json:
        out.print(f"watching {len(index.guids)} canary(ies) and {index.watched_fields} text field(s) of released items", highlight=False)
    with progress_bar(unit="bytes", transient=False, disable=as_json) as progress:
        task = progress.add_task("scanning", total=total)
        report = Scanner(index, timer=time.perf_counter).scan_paths(paths, progress=lambda count: progress.advance(task, count))
    if as_json:
        document = {
            "files": report.files,
            "bytes": report.bytes,
            "seconds": round(report.seconds, 3),
            "canaries": [asdict(hit) for hit in report.canaries],
            "copies": [asdict(copy) for copy in report.copies],
            "unreadable": report.unreadable,
        }
        typer.echo(json.dumps(document, indent=2))
    else:
        print_report(report)
    if report.found:
        raise typer.Exit(EXIT_FOUND)


def register(app: typer.Typer) -> None:
    """Add the `canary` commands to the `goldenset` app."""
    app.add_typer(canary_app, name="canary")
