"""Pages: the audit log, newest first, with the filters of `GET /v1/audit` (actor, action or a
prefix ending in `*`, object type and id, a day range, the sealed slice only) and paged by its
cursor. Reading it needs `admin`, as that route does.

Decisions and changes come first: reads of content outside the sealed slice
(`service.core.audit.CONTENT_READS`, one for every page view) are left out unless the `reads`
filter asks for them (`with`, or `only`) or the action filter names one; the page says how many it
left out. Reads of sealed content are always shown.

Events hold ids, counts and settings, never item content; the free text a person wrote about an
item (a rejection's reason, an edit's note) is shown only to a person with the `sealed` scope when
the item is in, or bound for, a sealed slice: the words of a reason can repeat the item's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from schemas.audit import AuditAction, AuditEventRead
from schemas.lifecycle import ItemAction
from schemas.token import Scope
from service.core.audit import CONTENT_READS, count_events, list_events
from service.core.problems import ProblemError
from service.items.shaping import withheld
from service.ui.pages import need, page, secret_key, ui_router

router = ui_router()

PAGE_SIZES = (20, 50, 100, 200)
DEFAULT_PAGE = 50
FREE_TEXT = ("reason", "note")
"""Detail keys that hold what a person wrote about an item."""
WITHHELD_TEXT = "(withheld: the item is sealed)"
DETAILS_SHOWN = 600
"""Characters of an event's details shown in the table; the rest open on demand."""
READS_SHOWN = {"": "Decisions and changes", "with": "Everything, reads too", "only": "Reads only"}
"""The choices of the `reads` filter: by default, content reads are left out."""
ACTIONS = sorted({*(action.value for action in AuditAction), *(action.value for action in ItemAction)})
"""Every action the service records, offered in the action filter (with their `kind.*` prefixes)."""
PREFIXES = sorted({action.split(".")[0] + ".*" for action in ACTIONS})


@dataclass
class EventRow:
    event: AuditEventRead
    details: str
    short: bool


def _day(value: str, name: str, errors: dict[str, str]) -> date | None:
    if not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        errors[name] = f"{value!r} is not a date: give it as YYYY-MM-DD"
        return None


def _item_id(event: AuditEventRead) -> int | None:
    if event.object_type != "item" or event.object_id is None or not event.object_id.isdigit():
        return None
    return int(event.object_id)


def shown_details(session: Session, events: list[AuditEventRead], *, secret_key: str, may_see_sealed: bool) -> list[EventRow]:
    """Each event with its details as compact JSON, the free text about sealed items withheld
    unless the viewer may see them."""
    hidden: set[int] = set()
    if not may_see_sealed:
        wanted = {item_id for event in events if (item_id := _item_id(event)) is not None and any(key in event.details for key in FREE_TEXT)}
        hidden = withheld(session=session, item_ids=wanted, secret_key=secret_key) if wanted else set()
    rows = []
    for event in events:
        details = dict(event.details)
        if _item_id(event) in hidden:
            details.update({key: WITHHELD_TEXT for key in FREE_TEXT if details.get(key)})
        text = json.dumps(details, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        rows.append(EventRow(event, text, len(text) <= DETAILS_SHOWN))
    return rows


@router.get("/ui/audit")
def audit(
    request: Request,
    actor: str = "",
    action: str = "",
    object_type: str = "",
    object_id: str = "",
    since: str = "",
    until: str = "",
    sealed: str = "",
    reads: str = "",
    limit: str = "",
    cursor: str = "",
) -> HTMLResponse:
    who = need(request, Scope.ADMIN, "Reading the audit log")
    key = secret_key(request)
    filters = {"actor": actor.strip(), "action": action.strip(), "object_type": object_type.strip(), "object_id": object_id.strip(), "since": since.strip(), "until": until.strip()}
    reads = reads if reads in READS_SHOWN else ""
    # An action typed in the filter is shown whatever it is: the person asked for it.
    hide_reads = reads == "" and not filters["action"]
    size = int(limit) if limit.isdigit() and int(limit) in PAGE_SIZES else DEFAULT_PAGE
    errors: dict[str, str] = {}
    first, last = _day(since, "since", errors), _day(until, "until", errors)
    rows: list[EventRow] = []
    next_cursor: str | None = None
    hidden_reads = 0
    if not errors:
        matching: dict[str, Any] = {
            "actor": filters["actor"] or None,
            "action": filters["action"] or None,
            "object_type": filters["object_type"] or None,
            "object_id": filters["object_id"] or None,
            "since": datetime.combine(first, time(0), tzinfo=UTC) if first else None,
            "until": datetime.combine(last + timedelta(days=1), time(0), tzinfo=UTC) if last else None,
            "sealed_only": sealed == "yes",
        }
        with Session(request.app.state.engine) as session:
            try:
                found = list_events(
                    session=session,
                    secret_key=key,
                    **matching,
                    only_actions=CONTENT_READS if reads == "only" else None,
                    leave_out_actions=CONTENT_READS if hide_reads else (),
                    limit=size,
                    cursor=cursor or None,
                )
            except ProblemError as exc:
                errors["cursor"] = f"{exc.detail}: start again from the newest events"
            else:
                rows = shown_details(session, found.events, secret_key=key, may_see_sealed=Scope.SEALED.value in who.scopes)
                next_cursor = found.next_cursor
                hidden_reads = count_events(session=session, **matching, only_actions=CONTENT_READS) if hide_reads else 0
    query: dict[str, Any] = {key: value for key, value in filters.items() if value}
    if sealed == "yes":
        query["sealed"] = "yes"
    if reads:
        query["reads"] = reads
    if size != DEFAULT_PAGE:
        query["limit"] = size
    context = {
        "rows": rows,
        "filters": filters,
        "reads": reads,
        "reads_choices": READS_SHOWN,
        "hidden_reads": hidden_reads,
        "with_reads_url": "/ui/audit?" + urlencode({**query, "reads": "with"}),
        "actions": ACTIONS,
        "prefixes": PREFIXES,
        "sealed_only": sealed == "yes",
        "size": size,
        "sizes": PAGE_SIZES,
        "errors": errors,
        "paged": bool(cursor),
        "first_url": "/ui/audit" + (f"?{urlencode(query)}" if query else ""),
        "next_url": f"/ui/audit?{urlencode({**query, 'cursor': next_cursor})}" if next_cursor else None,
    }
    return page(request, "audit.html", context, status=422 if errors else 200)
