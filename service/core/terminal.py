"""What every `goldenset` command shares: the consoles, the actor name written to the audit trail,
the exit statuses, the error exit, the migrated database engine and the progress bar.

Exit statuses (the CLI's contract; each command's help says which it uses): 0 done; 1 a check
found something (a release that does not verify, a leak); 2 bad usage, or a refusal that names
what is missing; 3 some records or decisions were refused, the rest kept; 4 refused credentials
or a refused gate; 5 the work ran and failed; 6 another process holds the lock; 7 the sealed-read
budget is spent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from sqlalchemy.engine import Engine, make_url

from curation.refusals import Refused
from service.core.db import make_engine, migrate, normalise_database_url
from service.core.remote import is_remote
from service.core.settings import get_settings

out = Console()
err = Console(stderr=True)
CLI_ACTOR = "cli"

EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3
EXIT_REFUSED = 4
EXIT_FAILED = 5
EXIT_BUSY = 6
EXIT_BUDGET = 7


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print `message` as an error and return the exit (raise it) with status `code`."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


REFUSAL_EXITS = {403: EXIT_REFUSED, 404: EXIT_USAGE}
"""A refusal's exit status by its HTTP status: a gate (403) is 4, something missing (404) is 2, any
other refused decision (409, 422) is 3."""


REASON_EXITS = {"busy": EXIT_BUSY, "cannot_refresh": EXIT_USAGE}
"""Exit statuses by a refusal's machine-readable reason, where its HTTP status alone would give
another than the command gives on the database: `busy` (another process held the lock too long,
409) is 6, `cannot_refresh` (a refresh that cannot run as asked, 409) is 2. Read before the
status, by `refusal_exit` and by `service.core.remote.remote_failure` for the API's problems."""


def refusal_exit(exc: Refused) -> typer.Exit:
    """The one answer of every command to a decision the domain refused (`curation.refusals.Refused`):
    its reason and detail printed, and the exit status that fits its reason (`REASON_EXITS`) or
    else its HTTP status (`REFUSAL_EXITS`). Commands do not catch refusals themselves;
    `service.cli` turns them into this."""
    return fail(f"refused ({exc.reason}): {exc.detail}", REASON_EXITS.get(exc.reason, REFUSAL_EXITS.get(exc.status, EXIT_REJECTED)))


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (the API's shapes) on stdout instead of a table.")]
"""The `--json` flag every listing command takes."""


def print_json(value: Any) -> None:
    """`value` as indented JSON alone on stdout (dates as ISO 8601), for scripts and `jq`."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def print_rows(rows: list[dict[str, Any]], columns: dict[str, str], *, as_json: bool, caption: str | None = None) -> None:
    """A listing: the rows as JSON (`print_json`, every field) with `as_json`, else a table of
    `columns` (field → heading); None shows as `-`, lists joined with commas."""
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(*columns.values(), caption=caption)
    for row in rows:
        cells = []
        for key in columns:
            value = row.get(key)
            cells.append("-" if value is None or value == "" else ", ".join(map(str, value)) if isinstance(value, list) else str(value))
        table.add_row(*cells)
    out.print(table)


def missing_database(url: str) -> str | None:
    """Why a command must not run on `url`: a file-backed SQLite database that does not exist
    (opening it would create an empty one and answer as if nothing had been stored); else None."""
    parsed = make_url(normalise_database_url(url))
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:") or Path(database).exists():
        return None
    return (
        f"there is no database at {Path(database).resolve()} (GOLDENSET_DATABASE_URL={url}); "
        "create it with `goldenset migrate` (or `make run`), run from the folder that holds ./var/, "
        "or point GOLDENSET_URL at a running goldenset to work over its API"
    )


def unreachable_database(exc: BaseException) -> str | None:
    """The one line telling that the configured database could not be reached, when `exc` says so
    (a PostgreSQL server refusing or dropping connections); None for any other error."""
    from service.core.disconnects import connection_lost

    if not connection_lost(exc):
        return None
    url = make_url(normalise_database_url(get_settings().database_url)).render_as_string(hide_password=True)
    orig = getattr(exc, "orig", None) or exc
    reason = " ".join(str(orig).split()).split(" Is the server running")[0][:300]
    return f"cannot reach the database {url} (GOLDENSET_DATABASE_URL): {reason}; is it running, and does the URL name it?"


def open_engine(*, create: bool = False) -> Engine:
    """The configured database, migrated to the newest schema. Without `create`, a SQLite
    database that does not exist ends the command (`missing_database`) instead of being created:
    only `migrate`, `serve` and `scheduler` create one. The engine's pool is sized and timed by the
    settings (`GOLDENSET_DB_POOL_SIZE`, `GOLDENSET_DB_MAX_OVERFLOW`, `GOLDENSET_DB_POOL_TIMEOUT`), as
    the app's own engine is."""
    if not create and is_remote():
        raise fail("this command works on the database (GOLDENSET_DATABASE_URL), not over the API; leave out --url / unset GOLDENSET_URL to run it here, where the database is")
    settings = get_settings()
    url = settings.database_url
    if not create and (problem := missing_database(url)) is not None:
        raise fail(problem)
    engine = make_engine(url, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow, pool_timeout=settings.db_pool_timeout)
    migrate(engine)
    return engine


def print_secret(value: str) -> None:
    """Print a secret alone on stdout, unwrapped and unstyled, so scripts can capture it."""
    typer.echo(value)


def progress_bar(*, unit: Literal["items", "bytes"] = "items", remaining: bool = False, transient: bool = True, disable: bool = False) -> Progress:
    """A progress bar on stderr: the task's description, the bar, then items done of the total (or
    bytes and speed), the time elapsed and, with `remaining`, the time left."""
    counted: tuple[ProgressColumn, ...] = (MofNCompleteColumn(),) if unit == "items" else (DownloadColumn(), TransferSpeedColumn())
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), *counted, TimeElapsedColumn(), *((TimeRemainingColumn(),) if remaining else ()))
    return Progress(*columns, console=err, transient=transient, disable=disable)


def chart_format(path: Path) -> Literal["svg", "png"]:
    """The image format a `--chart` file names by its suffix; any other suffix ends the command (exit 2)."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in ("svg", "png"):
        raise fail(f"--chart {path}: name the file .svg or .png")
    return "svg" if suffix == "svg" else "png"
