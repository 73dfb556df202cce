"""`goldenset source test NAME`: test a connector source's connection as `POST /v1/sources/{name}/test`
does (`service.sources.connection_test`), on the database or over the API (--url, an admin token),
and print the result: the HTTP status, the records on the first page and the time taken, or what
stopped it and what to change. Nothing is stored but the audit event (`source.test`, actor `cli`
on the database, the token over the API).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from schemas.source import ConnectionOutcome, ConnectionTestResult
from service.core.remote import remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_FAILED, EXIT_REFUSED, JsonOption, err, open_engine, out, print_json


def source_test(name: Annotated[str, typer.Argument(help="The connector source to test.")], as_json: JsonOption = False) -> None:
    """Test a connector source's connection: read one page from its vendor with the stored
    settings and credentials (within about 10 s, waiting for no rate limit), store nothing, and
    print how it went. Over the API with --url (an admin token).

    Exit status: 0 when the connection works, 4 when the vendor refused the credentials, 5 when
    the test failed otherwise (the host unreachable, an address not found, a timeout, a rate
    limit, unusable settings: the message says what to change); 2 when there is no such source,
    3 for a source without a connector."""
    with remote_client() as client:
        if client is not None:
            answer = client.test_source(name)
            result = ConnectionTestResult.model_validate(answer.model_dump(mode="json"))
        else:
            from service.sources.connection_test import run_connection_test

            result = run_connection_test(engine=open_engine(), name=name, secret_key=get_settings().secret_key.get_secret_value(), actor=CLI_ACTOR)
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        _print(result)
    if result.outcome == ConnectionOutcome.BAD_CREDENTIALS:
        raise typer.Exit(EXIT_REFUSED)
    if not result.ok:
        raise typer.Exit(EXIT_FAILED)


def _print(result: ConnectionTestResult) -> None:
    if result.ok:
        out.print(f"source {result.source}: connection OK: {escape(result.detail)}", highlight=False)
        return
    status = f", HTTP {result.http_status}" if result.http_status is not None else ""
    err.print(f"[bold red]source {result.source}: connection failed[/] ({result.outcome.value}{status}, {result.elapsed_seconds:.2f} s): {escape(result.detail)}", highlight=False)
    if result.action:
        err.print(f"what to do: {escape(result.action)}", highlight=False)
