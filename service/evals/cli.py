"""The eval commands: `eval create|list|withdraw|delete`, `refresh`, `verify` and `export`."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.table import Table
from sqlmodel import Session

from schemas.evals import ApprovalPolicy, EvalCreate, Split
from service.core.db import write_session
from service.core.problems import ProblemError
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_BUDGET, EXIT_BUSY, EXIT_FOUND, err, fail, open_engine, out

eval_app = typer.Typer(help="Define and list evals.", no_args_is_help=True)


def parse_at(text: str) -> datetime:
    """A refresh time: ISO 8601; without a zone it is UTC; a bare date means the end of that day
    (so `--at 2024-03-01` is the period holding 1 March, its 03:00 tick included)."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, microseconds=-1)
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise fail(f"--at {text!r} is not a date or an ISO 8601 time (e.g. 2024-03-01 or 2024-03-01T03:00:00Z)") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _start_of(text: str) -> datetime:
    """A date (its start, UTC) or an ISO 8601 time (no zone: UTC)."""
    if len(text) == 10:
        return parse_at(text) - timedelta(days=1, microseconds=-1)
    return parse_at(text)


def _quotas(values: list[str]) -> dict[str, int]:
    quotas: dict[str, int] = {}
    for value in values:
        name, _, number = value.partition("=")
        if not name or not number.isdigit():
            raise fail(f"--quota {value!r} must look like SOURCE=N")
        quotas[name] = int(number)
    return quotas


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
        "earliest_occurred_at": _start_of(earliest) if earliest else None,
        "source_quotas": _quotas(quota) if quota else None,
        "sealed_fraction": sealed_fraction,
        "approval_policy": approval.value if approval else None,
        "sealed_read_budget": sealed_read_budget,
    }
    document.update({key: value for key, value in options.items() if value is not None})
    try:
        data = EvalCreate.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors())
        raise fail(f"invalid eval: {problems}") from exc
    with write_session(open_engine()) as session:
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
def eval_list() -> None:
    """List evals with their newest release."""
    from service.evals.definitions import list_evals, to_read

    with Session(open_engine()) as session:
        reads = [to_read(session, evaluation) for evaluation in list_evals(session=session)]
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

    Exit status: 0 when withdrawn, 2 when there is no such release or it cannot be withdrawn
    (withdrawn already, or a newer release is in force), 6 when a refresh held on too long."""
    from curation.releases.withdrawal import WithdrawRefused
    from service.evals.refresh import RefreshBusy, withdraw

    if not reason.strip():
        raise fail("--reason must say why the release is withdrawn")
    try:
        withdrawn = withdraw(open_engine(), name=name, number=release, actor=CLI_ACTOR, reason=reason)
    except ProblemError as exc:
        raise fail(exc.detail) from exc
    except WithdrawRefused as exc:
        raise fail(str(exc)) from exc
    except RefreshBusy as exc:
        raise fail(str(exc), EXIT_BUSY) from exc
    out.print(f"release {withdrawn.number} of {name} (period from {withdrawn.period_start:%Y-%m-%d %H:%M} UTC) withdrawn: {reason}", highlight=False)


@eval_app.command("delete")
def eval_delete(name: Annotated[str, typer.Argument(help="The eval.")]) -> None:
    """Delete an eval that has no release, with its seal key and canary (one with releases is kept).

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
    period has one already. Safe to run from several places at once: one release per period.
    A period after the current one is refused unless --allow-future: its release would become
    `latest` and hold back every period before it (`goldenset eval withdraw` undoes one).

    Exit status: 0 when the period has its release, 2 when the refresh cannot run, 6 when another
    refresh of the eval held on too long."""
    from service.evals.refresh import RefreshBusy, RefreshError, refresh_eval

    when = parse_at(at) if at else None
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
    verb = "written" if outcome.created else "already written"
    out.print(
        f"release {release.number} of {eval_name} {verb} for the period {release.period_start:%Y-%m-%d %H:%M} to {release.period_end:%Y-%m-%d %H:%M} UTC: "
        f"{release.dev_count} dev + {release.sealed_count} sealed items; {len(diff.get('added', []))} added, {len(diff.get('retired', []))} retired",
        highlight=False,
    )


def verify(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval.")],
    release: Annotated[str, typer.Option("--release", help="The release number, or 'latest'.")] = "latest",
) -> None:
    """Recompute a release's content digests and Merkle roots from its frozen items.

    Exit status: 0 when everything matches, 1 on any mismatch, 2 when there is no such release."""
    from service.evals.definitions import require_eval
    from service.evals.releases import resolve_release, verify_release

    with Session(open_engine()) as session:
        try:
            evaluation = require_eval(session=session, name=eval_name)
            stored = resolve_release(session=session, evaluation=evaluation, ref=release)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        report = verify_release(session=session, evaluation=evaluation, release=stored)
    if report.ok:
        out.print(f"release {report.release} of {eval_name}: {report.items} items, digests and Merkle roots verified")
        return
    for mismatch in report.mismatches:
        err.print(f"[red]mismatch:[/] {mismatch}", highlight=False)
    raise fail(f"release {report.release} of {eval_name} does not verify: {len(report.mismatches)} mismatch(es)", EXIT_FOUND)


def export(
    eval_name: Annotated[str, typer.Option("--eval", help="The eval.")],
    release: Annotated[str, typer.Option("--release", help="The release number, or 'latest'.")] = "latest",
    split: Annotated[Split, typer.Option(help="dev, or sealed (counted against the sealed-read budget).")] = Split.DEV,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write here instead of standard output.")] = None,
) -> None:
    """Export a release's split as JSON Lines: a header line with the canary and Merkle roots,
    then one item a line (byte-identical every time for the same release and split).

    Exit status: 0 when written, 2 when there is no such release, 7 when the sealed budget is spent."""
    from service.evals.definitions import require_eval
    from service.evals.releases import SealedBudgetExceeded, consume_sealed_read, export_lines, resolve_release

    engine = open_engine()
    with write_session(engine) as session:
        try:
            evaluation = require_eval(session=session, name=eval_name)
            stored = resolve_release(session=session, evaluation=evaluation, ref=release)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
        if split is Split.SEALED:
            try:
                consume_sealed_read(session=session, evaluation=evaluation, release=stored, actor=CLI_ACTOR, item_count=stored.sealed_count, purpose="export")
            except SealedBudgetExceeded as exc:
                raise fail(str(exc), EXIT_BUDGET) from exc
        lines = export_lines(session=session, evaluation=evaluation, release=stored, split=split)
        count = -1
        if output is None:
            for count, line in enumerate(lines):  # noqa: B007
                sys.stdout.write(line)
            sys.stdout.flush()
        else:
            with output.open("w", encoding="utf-8", newline="\n") as handle:
                for count, line in enumerate(lines):  # noqa: B007
                    handle.write(line)
    err.print(f"exported {count} {split.value} items of release {stored.number} of {eval_name}" + (f" to {output}" if output else ""))


def register(app: typer.Typer) -> None:
    """Add `eval`, `refresh`, `verify` and `export` to the `goldenset` app."""
    app.add_typer(eval_app, name="eval")
    app.command("refresh")(refresh)
    app.command("verify")(verify)
    app.command("export")(export)
