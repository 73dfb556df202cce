"""What every `goldenset` command module shares: the consoles, the actor name written to the
audit trail, the usage exit status, the error exit and the migrated database engine."""

from __future__ import annotations

import typer
from rich.console import Console
from sqlalchemy.engine import Engine

from service.db import make_engine, migrate
from service.settings import get_settings

out = Console()
err = Console(stderr=True)
CLI_ACTOR = "cli"
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print `message` as an error and return the exit (raise it) with status `code`."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def open_engine() -> Engine:
    """The configured database, migrated to the newest schema."""
    engine = make_engine(get_settings().database_url)
    migrate(engine)
    return engine
