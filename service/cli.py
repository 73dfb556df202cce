"""The `goldenset` command line: a table of commands, each loaded from its package only when it
runs (`goldenset --help` imports none of them, so it answers at once), and the options every
command shares: `--url`/`--token` (or GOLDENSET_URL/GOLDENSET_TOKEN) to work against a running
service over its API instead of a database, and `--version`.

Each package's `register(app)` adds its commands (`service.<domain>.cli`, the process commands in
`service.process_cli`, tokens in `service.core.token_cli`); the table below names which package
holds which command, with the one line `goldenset --help` shows for it (a test checks the lines
against the commands' own help).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from service.core.remote import set_target

if TYPE_CHECKING:
    from typer._click import Command, Context, HelpFormatter

COMMANDS: dict[str, tuple[str, str]] = {
    "migrate": ("service.process_cli", "Create or upgrade the database schema (GOLDENSET_DATABASE_URL; SQLite under ./var/ by default)."),
    "serve": ("service.process_cli", "Migrate, then serve the REST API and, unless --no-scheduler, the scheduler of pulls and curation."),
    "scheduler": ("service.process_cli", "Run only the scheduler (pulls, curation, refreshes), for deployments whose API replicas run `serve --no-scheduler`."),
    "token": ("service.core.token_cli", "Create, list and revoke API tokens."),
    "source": ("service.sources.cli", "Create, list and configure sources."),
    "reference": ("service.sources.cli", "Public reference corpora that candidates are checked against."),
    "ingest": ("service.sources.cli", "Ingest a file of dated incidents into a source, then curate what is pending (unless --no-curate). Re-ingesting is idempotent."),
    "pull": ("service.sources.cli", "Pull a connector source now, from its cursor, showing progress."),
    "curate": ("service.dedup.cli", "Decide pending candidates (oldest incident first): unique, or duplicate of an earlier item, or contaminated by a reference corpus."),
    "dedup": ("service.dedup.cli", "Dedup's figures, and people's rulings on duplicates."),
    "review": ("service.items.cli", "Approve or reject the items dedup kept as unique, or undo a decision."),
    "item": ("service.items.cli", "Show an item and why dedup decided as it did, edit items, and show what each revision changed."),
    "eval": ("service.evals.cli", "Define and list evals."),
    "refresh": ("service.evals.cli", "Write the eval's release for the schedule period holding --at (default now), unless that period has one already."),
    "verify": ("service.evals.cli", "Recompute a release's content digests and Merkle roots from its frozen items."),
    "export": ("service.evals.cli", "Export a release's split for a harness: JSON Lines, Parquet or an lm-evaluation-harness task folder."),
    "model": ("service.runs.cli", "The models under evaluation: list, register, change."),
    "endpoint": ("service.runs.cli", "The endpoints that serve models, with their data-retention terms and augmentation: list, register, change."),
    "run": ("service.runs.cli", "Eval runs: list them, show one with its score, or import an lm-eval run's per-item scores."),
    "audit": ("service.core.audit_cli", "The audit trail: who did what, newest first."),
    "report": ("service.evidence.cli", "Contamination evidence reports, and score changes split into the set and the model."),
    "scale": ("service.evals.scale_cli", "The common scale of an eval's releases: refit it now, show it."),
    "probe": ("service.evidence.cli", "Probe a model for memorised items with the strongest test its endpoint allows (or --test), against the control band."),
    "canary": ("service.evidence.canary_cli", "Find leaked evals: canary strings and copies of released items in text dumps."),
}
"""Every command: name → (the module whose `register` adds it, its line in `goldenset --help`)."""


def load_command(name: str) -> Command:
    """The command `name` as its module registers it (importing that module)."""
    module = importlib.import_module(COMMANDS[name][0])
    holder = typer.Typer()
    module.register(holder)
    group = typer.main.get_group(holder)
    return group.commands[name]


class LazyCommands(TyperGroup):
    """A command group that imports a command's module only to run it or show its own help; the
    group's help lists the table's lines."""

    listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self.listing:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1], short_help=COMMANDS[cmd_name][1])
        return load_command(cmd_name)

    def invoke(self, ctx: Context) -> object:
        """Run the command; a decision the domain refuses is answered here, once for every command
        (`service.core.terminal.refusal_exit`), so no command catches a refusal itself. So is a
        command that needs the embedding model in an install without the `embeddings` extra: one
        line naming it, exit status 2 (`service.core.embedding_extra`)."""
        from curation.refusals import Refused

        try:
            return super().invoke(ctx)
        except Refused as exc:
            from service.core.terminal import refusal_exit

            raise refusal_exit(exc) from exc
        except ModuleNotFoundError as exc:
            from rich.markup import escape

            from service.core.embedding_extra import missing_embeddings
            from service.core.terminal import EXIT_USAGE, err

            message = missing_embeddings(exc)
            if message is None:
                raise
            err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(cls=LazyCommands, help="goldenset: private, continuously refreshed LLM evals from production incidents.", no_args_is_help=True)


def package_version() -> str:
    """The installed goldenset's version."""
    try:
        return version("goldenset")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"goldenset {package_version()}")
        raise typer.Exit()


@app.callback()
def main(
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="GOLDENSET_URL", help="Work against the goldenset API at this URL instead of a database (the commands that read or review)."),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="GOLDENSET_TOKEN", help="The API token to send with --url.", show_default=False)] = None,
    show_version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """goldenset: private, continuously refreshed LLM evals from production incidents.

    Exit statuses: 0 done; 1 a check found something; 2 bad usage, or a refusal naming what is
    missing (no such eval, release, model; no database); 3 some records refused, the rest kept;
    4 refused credentials or a refused gate; 5 the work ran and failed (or the service could not
    be reached); 6 another process holds the lock; 7 the sealed-read budget is spent."""
    set_target(url, token)


def run() -> None:
    """The `goldenset` entry point: the app, with a database that cannot be reached told in one
    line and exit status 2 (as a missing SQLite file is), for every command and `serve`."""
    try:
        app()
    except Exception as exc:
        from service.core.terminal import EXIT_USAGE, fail, unreachable_database

        if (message := unreachable_database(exc)) is None:
            raise
        raise SystemExit(fail(message, EXIT_USAGE).exit_code) from None


if __name__ == "__main__":
    run()
