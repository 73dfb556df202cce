"""What every `goldenset` command shares: the consoles, the actor name written to the audit trail,
the exit statuses, the error exit, the migrated database engine and the progress bar.

Exit statuses (the CLI's contract; each command's help says which it uses): 0 done; 1 a check
found something (a release that does not verify, a leak); 2 bad usage, or a refusal that names
what is missing; 3 some records or decisions were refused, the rest kept; 4 refused credentials
or a refused gate; 5 the work ran and failed; 6 another process holds the lock; 7 the sealed-read
budget is spent.
"""

from __future__ import annotations

from typing import Literal

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
from sqlalchemy.engine import Engine
from sqlmodel import Session

from service.core.db import make_engine, migrate, write_session
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


def open_engine() -> Engine:
    """The configured database, migrated to the newest schema."""
    engine = make_engine(get_settings().database_url)
    migrate(engine)
    return engine


def open_write_session() -> Session:
    """A write session on the configured database (`service.core.db.write_session`)."""
    return write_session(open_engine())


def print_secret(value: str) -> None:
    """Print a secret alone on stdout, unwrapped and unstyled, so scripts can capture it."""
    typer.echo(value)


def progress_bar(*, unit: Literal["items", "bytes"] = "items", remaining: bool = False, transient: bool = True, disable: bool = False) -> Progress:
    """A progress bar on stderr: the task's description, the bar, then items done of the total (or
    bytes and speed), the time elapsed and, with `remaining`, the time left."""
    counted: tuple[ProgressColumn, ...] = (MofNCompleteColumn(),) if unit == "items" else (DownloadColumn(), TransferSpeedColumn())
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), *counted, TimeElapsedColumn(), *((TimeRemainingColumn(),) if remaining else ()))
    return Progress(*columns, console=err, transient=transient, disable=disable)
