"""`goldenset audit`: the audit trail, newest first, filtered as `GET /v1/audit` filters it, on
the database or over the API with `--url` (an admin token)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice
from typing import Annotated, Any

import typer

from service.core.remote import remote_client
from service.core.terminal import JsonOption, fail, open_engine, print_rows

AUDIT_COLUMNS = {"at": "at (UTC)", "actor": "actor", "action": "action", "object_type": "object", "object_id": "id", "count": "count", "sealed": "sealed"}


def _instant(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise fail(f"{option} {text!r} is not an ISO 8601 date or time (e.g. 2024-03-01 or 2024-03-01T12:00:00Z)") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def audit(
    action: Annotated[str | None, typer.Option(help="Exact action, or a prefix ending in '*' (e.g. 'run.*').")] = None,
    actor: Annotated[str | None, typer.Option(help="Exact actor, e.g. 'token:pipeline' or 'cli'.")] = None,
    object_type: Annotated[str | None, typer.Option("--object-type", help="e.g. eval, release, endpoint, item.")] = None,
    object_id: Annotated[str | None, typer.Option("--object-id", help="e.g. ops/3 for release 3 of eval ops.")] = None,
    since: Annotated[str | None, typer.Option(help="Events at or after this time (no zone: UTC).")] = None,
    sealed: Annotated[bool, typer.Option("--sealed", help="Only events about the sealed slice.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="At most this many events.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The audit trail: who did what, newest first."""
    filters: dict[str, Any] = {"action": action, "actor": actor, "object_type": object_type, "object_id": object_id, "since": _instant(since, "--since")}
    with remote_client() as client:
        if client is not None:
            events = [event.model_dump(mode="json") for event in islice(client.iter_audit(**filters, sealed=sealed or None, page_size=min(limit, 500)), limit)]
        else:
            events = _here(filters, sealed=sealed, limit=limit)
    print_rows(events, AUDIT_COLUMNS, as_json=as_json)


def _here(filters: dict[str, Any], *, sealed: bool, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` events from the database, following pages."""
    from sqlmodel import Session

    from service.core.audit import list_events
    from service.core.settings import get_settings

    secret_key = get_settings().secret_key.get_secret_value()
    events: list[dict[str, Any]] = []
    cursor: str | None = None
    with Session(open_engine()) as session:
        while len(events) < limit:
            page = list_events(session=session, secret_key=secret_key, **filters, sealed_only=sealed, limit=min(500, limit - len(events)), cursor=cursor)
            events.extend(event.model_dump(mode="json") for event in page.events)
            cursor = page.next_cursor
            if cursor is None:
                break
    return events


def register(app: typer.Typer) -> None:
    """Add `audit` to the `goldenset` app."""
    app.command("audit")(audit)
