"""The eval commands: `eval create|list|withdraw|delete`, `refresh`, `verify` and `export` (the
options people type are read by `service.evals.options`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.table import Table
from sqlmodel import Session

from curation.releases.content import canonical_json
from schemas.evals import ApprovalPolicy, EvalCreate, Split
from schemas.release import CrossSplitPair, ExportRow, ReleaseManifest
from schemas.validation import describe_errors
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_BUDGET, EXIT_BUSY, EXIT_FOUND, JsonOption, err, fail, open_engine, out, print_json
from service.evals.export_files import ExportFormat
from service.evals.options import parse_at, quotas, start_of

eval_app = typer.Typer(help="Define and list evals.", no_args_is_help=True)


@eval_app.command("create")
def eval_create(
    name: Annotated[str | None, typer.Argument(help="The eval's name (or `name` in --file).")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="YAML or JSON with the eval's settings; options given here override it.")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="A source the eval takes items from (repeat for more).")] = None,
    description: Annotated[str | None, typer.Option(help="What the eval measures.")] = None,
    target_size: Annotated[int | None, typer.Option("--target-size", help="Items per release (default 200).")] = None,
    schedule: Annotated[str | None, typer.Option(help="Refresh schedule, crontab in UTC (default '0 3 1 * *').")] = None,
    max_age_days: Annotated[int | None, typer.Option("--max-age-days", help="Retire items older than this (default 365).")] = None,
    earliest: Annotated[str | None, typer.Option(help="Only incidents on or after this date.")] = None,
    quota: Annotated[list[str] | None, typer.Option("--quota", help="SOURCE=N: at most N items of a source (repeat).")] = None,
    sealed_fraction: Annotated[float | None, typer.Option("--sealed-fraction", help="Share of items sealed (default 0.20).")] = None,
    approval: Annotated[ApprovalPolicy | None, typer.Option(help="manual review, or auto-approve items dedup kept as unique.")] = None,
    sealed_read_budget: Annotated[int | None, typer.Option("--sealed-read-budget", help="Sealed reads allowed per release (default 3).")] = None,
    linking_share: Annotated[
        float | None, typer.Option("--linking-share", help="Share of each release's dev split carried from the release before, 0 to 0.9 (default 0.3; 0: none).")
    ] = None,
    balance: Annotated[
        bool | None, typer.Option("--balance/--newest-first", help="Take new items so that each release's composition follows the release before (default), or the newest.")
    ] = None,
    exist_ok: Annotated[bool, typer.Option("--exist-ok", help="Succeed without changes when the eval exists already.")] = False,
) -> None:
    """Define an eval (it gets a canary GUID and a secret seal key)."""
    from service.evals.definitions import create_eval, get_eval, to_read

    document: dict[str, Any] = {}
    if file is not None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise fail(f"cannot read {file}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise fail(f"{file} must hold an object of eval settings")
        document.update(loaded)
    options = {
        "name": name,
        "sources": source or None,
        "description": description,
        "target_size": target_size,
        "schedule": schedule,
        "max_age_days": max_age_days,
        "earliest_occurred_at": start_of(earliest) if earliest else None,
        "source_quotas": quotas(quota) if quota else None,
        "sealed_fraction": sealed_fraction,
        "approval_policy": approval.value if approval else None,
        "sealed_read_budget": sealed_read_budget,
        "linking_share": linking_share,
        "balance_composition": balance,
    }
    document.update({key: value for key, value in options.items() if value is not None})
    try:
        data = EvalCreate.model_validate(document)
    except ValidationError as exc:
        raise fail(f"invalid eval{f' in {file}' if file else ''}: {'; '.join(describe_errors(exc, EvalCreate))}") from exc
    with write_transaction(open_engine()) as session:
        if exist_ok and get_eval(session=session, name=data.name) is not None:
            out.print(f"eval [bold]{data.name}[/] exists already; unchanged")
            return
        try:
            evaluation = create_eval(session=session, data=data, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        read = to_read(session, evaluation)
    out.print(f"eval [bold]{read.name}[/] created: sources {', '.join(read.sources)}, target {read.target_size}, schedule {read.schedule!r}, {read.approval_policy} approval")
    out.print(f"canary: {read.canary}", highlight=False)


@eval_app.command("list")
def eval_list(as_json: JsonOption = False) -> None:
    """List evals with their newest release (over the API with --url)."""
    from schemas.evals import EvalRead
    from service.evals.definitions import list_evals, to_read

    with remote_client() as client:
        if client is not None:
            reads = [EvalRead.model_validate(entry.model_dump(mode="json")) for entry in client.list_evals()]
        else:
            with Session(open_engine()) as session:
                reads = [to_read(session, evaluation) for evaluation in list_evals(session=session)]
    if as_json:
        print_json([read.model_dump(mode="json") for read in reads])
        return
    table = Table("name", "sources", "target", "schedule", "max age", "sealed", "approval", "latest release")
    for read in reads:
        table.add_row(
            read.name,
            ", ".join(read.sources),
            str(read.target_size),
            read.schedule,
            f"{read.max_age_days} d" if read.max_age_days else "-",
            f"{read.sealed_fraction:.0%}",
            read.approval_policy,
            str(read.latest_release) if read.latest_release else "-",
        )
    out.print(table)


@eval_app.command("withdraw")
def eval_withdraw(
    name: Annotated[str, typer.Argument(help="The eval.")],
    release: Annotated[int, typer.Argument(help="The number of the release to withdraw.", min=1)],
    reason: Annotated[str, typer.Option("--reason", help="Why it is withdrawn (kept in the audit trail and shown with the release).")],
) -> None:
    """Withdraw a release: it stays readable by number, marked withdrawn, and no longer counts as
    `latest` nor for the order of periods; the membership changes it made are undone. Only the
    newest release in force can be withdrawn.

    Exit status: 0 when withdrawn, 2 when there is no such release, 3 when it cannot be withdrawn
    (withdrawn already, or a newer release is in force: a refused decision, `service.cli`), 6
    when a refresh held on too long."""
    from service.evals.refresh import RefreshBusy, withdraw

    if not reason.strip():
        raise fail("--reason must say why the release is withdrawn")
    try:
        withdrawn = withdraw(open_engine(), name=name, number=release, actor=CLI_ACTOR, reason=reason)
    except ProblemError as exc:
        raise fail(exc.detail) from exc
    except RefreshBusy as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    out.print(f"release {withdrawn.number} of {name} (period from {withdrawn.period_start:%Y-%m-%d %H:%M} UTC) withdrawn: {reason}", highlight=False)


@eval_app.command("delete")
def eval_delete(name: Annotated[str, typer.Argument(help="The eval.")]) -> None:
    """Delete an eval that has no release in force, with its seal key and canary (one with a release in force, or runs, is kept).

    Exit status: 0 when deleted, 2 when there is no such eval or it has releases, 6 when a refresh
    held on too long."""
    from service.evals.refresh import RefreshBusy, remove_eval

    try:
        remove_eval(open_engine(), name=name, actor=CLI_ACTOR)
    except ProblemError as exc:
        raise fail(exc.detail) from exc
    except RefreshBusy as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    out.print(f"eval [bold]{name}[/] deleted")


def refresh(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval to refresh.")],
    at: Annotated[str | None, typer.Option("--at", help="As of this date or time (default now; no zone means UTC).")] = None,
    allow_future: Annotated[bool, typer.Option("--allow-future", help="Allow a period that starts after the current one (refused otherwise).")] = False,
) -> None:
    """Write the eval's release for the schedule period holding --at (default now), unless that
    period has one already.

    Safe to run from several places at once: one release per period. A period after the current one is refused unless --allow-future: its release would become
    `latest` and hold back every period before it (`goldenset eval withdraw` undoes one).

    Over the API (--url) the service writes it (POST /v1/evals/{name}/refresh, an admin token).

    Exit status: 0 when the period has its release, 2 when the refresh cannot run, 6 when another
    refresh of the eval held on too long."""
    when = parse_at(at) if at else None
    with remote_client() as client:
        if client is not None:
            with err.status(f"refreshing {eval_name}"):
                answer = client.refresh(eval_name, at=when, allow_future=allow_future)
            summary = answer.release
            _refreshed(
                eval_name, summary.number, summary.period_start.astimezone(UTC), summary.period_end.astimezone(UTC), created=answer.created,
                dev=summary.dev_count, sealed=summary.sealed_count, added=len(summary.diff.added), retired=len(summary.diff.retired),
            )  # fmt: skip
            return
    from service.evals.refresh import RefreshBusy, RefreshError, refresh_eval

    engine = open_engine()
    try:
        with err.status(f"refreshing {eval_name}"):
            outcome = refresh_eval(engine, name=eval_name, at=when, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR, allow_future=allow_future)
    except RefreshBusy as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    except RefreshError as exc:
        raise fail(str(exc)) from exc
    release = outcome.release
    diff = release.diff
    _refreshed(
        eval_name, release.number, release.period_start, release.period_end, created=outcome.created,
        dev=release.dev_count, sealed=release.sealed_count, added=len(diff.get("added", [])), retired=len(diff.get("retired", [])),
    )  # fmt: skip


def _refreshed(eval_name: str, number: int, start: datetime, end: datetime, *, created: bool, dev: int, sealed: int, added: int, retired: int) -> None:
    """The one line `refresh` prints, on the database and over the API alike."""
    verb = "written" if created else "already written"
    out.print(
        f"release {number} of {eval_name} {verb} for the period {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC: "
        f"{dev} dev + {sealed} sealed items; {added} added, {retired} retired",
        highlight=False,
    )


def verify(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval.")],
    release: Annotated[str, typer.Option("--release", help="The release number, or 'latest'.")] = "latest",
) -> None:
    """Recompute a release's content digests and Merkle roots from its frozen items.

    On the database (with GOLDENSET_SECRET_KEY) every digest is checked, keyed sealed ones with the
    eval's seal key. Over the API (--url) the dev items as served are checked against the manifest,
    and both Merkle roots against the manifest's digests; sealed digests are keyed, so only the
    server can recompute them.

    Exit status: 0 when everything matches, 1 on any mismatch, 2 when there is no such release."""
    from service.evals.definitions import require_eval, seal_key
    from service.evals.releases import resolve_release, verify_release

    with remote_client() as client:
        if client is not None:
            summary = ReleaseManifest.model_validate(client.manifest(eval_name, release).model_dump(mode="json"))
            rows = [ExportRow.model_validate(row.model_dump(mode="json")) for row in client.iter_export(eval_name, release=release)]
            mismatches = verify_served(summary, rows)
            _cross_split(summary.cross_split_pairs, recorded=True)
            _verified(eval_name, summary.number, len(summary.items), mismatches, served=len(rows))
            return
    with Session(open_engine()) as session:
        try:
            evaluation = require_eval(session=session, name=eval_name)
            stored = resolve_release(session=session, evaluation=evaluation, ref=release)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        try:
            key = seal_key(evaluation, secret_key=get_settings().secret_key.get_secret_value())
        except ValueError as exc:
            raise fail(
                f"the seal key of eval {eval_name!r} cannot be read ({exc}); its sealed digests are keyed with it: run with the GOLDENSET_SECRET_KEY it was created under"
            ) from exc
        report = verify_release(session=session, evaluation=evaluation, release=stored, seal_key=key)
    _cross_split(report.cross_split_pairs, recorded=False)
    _verified(eval_name, report.release, report.items, report.mismatches)


def _cross_split(pairs: list[CrossSplitPair] | None, *, recorded: bool) -> None:
    """Print the release's near-linked dev-sealed pairs (none is the goal; each one's sealed item should be taken as seen)."""
    where = "recorded when the release was written" if recorded else "by the near links stored now"
    if pairs is None:
        out.print("cross-split near pairs: not recorded (release written before near links)")
    elif not pairs:
        out.print(f"cross-split near pairs: none ({where})")
    else:
        out.print(f"cross-split near pairs ({where}): {len(pairs)}; take each sealed item as seen", highlight=False)
        for pair in pairs:
            score = "" if pair.score is None else f" {pair.score:.4f}"
            out.print(f"  dev {pair.dev} ~ sealed {pair.sealed} ({pair.stage}{score})", highlight=False)


def _verified(eval_name: str, number: int, items: int, mismatches: list[str], *, served: int | None = None) -> None:
    if not mismatches:
        checked = f"{served} dev items as served and {items} digests" if served is not None else f"{items} items, digests"
        out.print(f"release {number} of {eval_name}: {checked} and Merkle roots verified")
        return
    for mismatch in mismatches:
        err.print(f"[red]mismatch:[/] {mismatch}", highlight=False)
    raise fail(f"release {number} of {eval_name} does not verify: {len(mismatches)} mismatch(es)", EXIT_FOUND)


def verify_served(summary: ReleaseManifest, rows: list[ExportRow]) -> list[str]:
    """What does not match between a release's manifest and its dev split as served: each row's
    content must hash to its digest and to the manifest's entry for it (a dev item sealed in another
    eval is not served, so the manifest may list more), and both splits' entries must give the manifest's Merkle roots."""
    from curation.releases.content import content_digest, merkle_root

    mismatches: list[str] = []
    listed = {entry.item_id: entry for entry in summary.items}
    for row in rows:
        content = {**row.model_dump(mode="json", exclude={"split", "content_digest", "metadata"}), "metadata": json.loads(row.metadata.item)}
        if content_digest(canonical_json(content)) != row.content_digest:
            mismatches.append(f"item {row.id}: its content does not hash to the digest it was served with")
        entry = listed.get(row.id)
        if entry is None or entry.split != "dev" or entry.content_digest != row.content_digest:
            mismatches.append(f"item {row.id}: served in dev with a digest the manifest does not list for it")
    for split, root in (("dev", summary.dev_merkle_root), ("sealed", summary.sealed_merkle_root)):
        if merkle_root((entry.item_id, entry.content_digest) for entry in summary.items if entry.split == split) != root:
            mismatches.append(f"the {split} split's entries do not give its Merkle root")
    return mismatches


def export(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval.")],
    release: Annotated[str, typer.Option("--release", help="The release number, or 'latest'.")] = "latest",
    split: Annotated[Split, typer.Option(help="dev, or sealed (counted against the sealed-read budget).")] = Split.DEV,
    export_format: Annotated[ExportFormat, typer.Option("--format", help="jsonl (one item a line), parquet, or lm-eval (a task folder).")] = ExportFormat.JSONL,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="The file (jsonl, parquet) or folder (lm-eval) to write; jsonl goes to standard output without it.")] = None,
) -> None:
    """Export a release's split for a harness: JSON Lines, Parquet or an lm-evaluation-harness task folder.

    Every row is one item, with the eval's canary in its `metadata` (Hugging Face `datasets`
    loads one row per item). The release's manifest (Merkle roots, every item's digest) is
    written beside a file as NAME.manifest.json, or as manifest.json in a task folder. The same
    release and split always give the same bytes. Works over the API with --url.

    Exit status: 0 when written, 2 when there is no such release, 4 without the scope, 7 when the
    sealed budget is spent."""
    if export_format is not ExportFormat.JSONL and output is None:
        what = "FOLDER" if export_format is ExportFormat.LM_EVAL else "FILE"
        raise fail(f"--format {export_format.value} writes files: give -o {what}")
    with remote_client() as client:
        if client is not None:
            summary = ReleaseManifest.model_validate(client.manifest(eval_name, release).model_dump(mode="json"))
            rows = (canonical_json(row.model_dump(mode="json")) + "\n" for row in client.iter_export(eval_name, release=release, split=split.value))
            count = _write_export(rows, summary, export_format, output, split)
        else:
            count, summary = _export_here(eval_name, release, split, export_format, output)
    where = f" to {output}" if output else ""
    err.print(f"exported {count} {split.value} items of release {summary.number} of {eval_name}{where}", highlight=False)


def _export_here(eval_name: str, release: str, split: Split, export_format: ExportFormat, output: Path | None) -> tuple[int, ReleaseManifest]:
    """Export from the database. A sealed export first takes one unit of the sealed-read budget in
    a unit of work of its own (`take_sealed_read`), committed before any item is written, so the
    read stays counted and audited however the export ends."""
    from service.evals.definitions import require_eval
    from service.evals.releases import SealedBudgetExceeded, export_lines, manifest, resolve_release, take_sealed_read

    engine = open_engine()
    with Session(engine) as session:
        try:
            evaluation = require_eval(session=session, name=eval_name)
            stored = resolve_release(session=session, evaluation=evaluation, ref=release)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
    if split is Split.SEALED:
        try:
            take_sealed_read(engine, evaluation=evaluation, release=stored, actor=CLI_ACTOR, item_count=stored.sealed_count, purpose="export")
        except SealedBudgetExceeded as exc:
            raise fail(str(exc), EXIT_BUDGET) from exc
    with Session(engine) as session:
        summary = manifest(session=session, evaluation=evaluation, release=stored)
        lines = export_lines(session=session, evaluation=evaluation, release=stored, split=split)
        return _write_export(lines, summary, export_format, output, split), summary


def _write_export(lines: Iterator[str], summary: ReleaseManifest, export_format: ExportFormat, output: Path | None, split: Split) -> int:
    """Write the export lines in `export_format` (`service.evals.export_files`); returns the row count."""
    from service.evals import export_files

    if output is None:
        count = 0
        for count, line in enumerate(lines, start=1):  # noqa: B007
            sys.stdout.write(line)
        sys.stdout.flush()
        return count
    if export_format is ExportFormat.LM_EVAL:
        task, count = export_files.write_lm_eval(lines, output, summary, split.value)
        err.print(f"lm-eval task {task}: run it with `lm_eval --tasks {task} --include_path {output} --model ...`", highlight=False)
        return count
    output.parent.mkdir(parents=True, exist_ok=True)
    count = export_files.write_parquet(lines, output) if export_format is ExportFormat.PARQUET else export_files.write_jsonl(lines, output)
    export_files.write_manifest(summary, export_files.manifest_path(output))
    return count


def register(app: typer.Typer) -> None:
    """Add `eval`, `refresh`, `verify` and `export` to the `goldenset` app."""
    app.add_typer(eval_app, name="eval")
    app.command("refresh")(refresh)
    app.command("verify")(verify)
    app.command("export")(export)
