"""PagerDuty: incidents by creation time, through REST API v2 `GET /incidents`.

PagerDuty filters incidents by `created_at` only (`since`/`until`, at most six months apart) and
pages them with `offset`/`limit` (at most 100 a page, and `offset + limit` at most 10,000). So a
pull walks `[since, until)` windows of `window_days` on `created_at`, oldest first, each paged by
offset in `created_at` order, and stops at the clock. A window holding more than 10,000 incidents
is halved until it fits.

The cursor says which window and offset to resume from (see `WindowCursor`). An incident's
creation time never changes but its status does, so every pull first re-reads the `lookback_days`
before the cursor: incidents resolved since we first read them get their resolution (the store's
upsert finds the others unchanged). Resolved incidents carry their notes (`resolution_notes`),
which the default mapping uses as the reference answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import Field, SecretStr, field_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, ConnectorError, MalformedPage, Page, unreadable_cursor
from ingest.connectors.http import json_body, send
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "PagerDuty"
ACCEPT = "application/vnd.pagerduty+json;version=2"
MAX_RESULTS = 10_000
"""Classic pagination reaches no further: `offset + limit` may not exceed this."""
MAX_WINDOW_DAYS = 180
"""`since` and `until` may be at most six months apart."""
_SECOND = timedelta(seconds=1)

Status = Literal["triggered", "acknowledged", "resolved"]


def _all_statuses() -> list[Status]:
    return ["acknowledged", "resolved", "triggered"]


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def pd_time(value: datetime) -> str:
    """A time as PagerDuty writes it: ISO 8601 in UTC, to the second."""
    return _utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: object) -> datetime:
    if not isinstance(text, str):
        raise TypeError(f"expected a time string, got {type(text).__name__}")
    return _utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


class PagerDutyConfig(ConnectorConfig):
    api_key: SecretStr = Field(description="A REST API key (account or user token); read-only is enough.")
    base_url: BaseUrl = Field(default="https://api.pagerduty.com", description="https://api.eu.pagerduty.com for EU accounts.")
    service_ids: list[str] = Field(default_factory=list, description="Only incidents of these services (all when empty).")
    team_ids: list[str] = Field(default_factory=list, description="Only incidents of these teams (all when empty).")
    statuses: list[Status] = Field(default_factory=_all_statuses, min_length=1)
    start: datetime = Field(default=datetime(2015, 1, 1, tzinfo=UTC), description="Incidents created from this time on (UTC when no zone is given).")
    window_days: int = Field(default=30, ge=1, le=MAX_WINDOW_DAYS, description="Width of each since/until window.")
    limit: int = Field(default=100, ge=1, le=100, description="Incidents per page.")
    lookback_days: int = Field(default=7, ge=0, le=365, description="Days before the cursor re-read by every pull, for status changes.")
    include_notes: bool = Field(default=True, description="Fetch the notes of resolved incidents as their reference answer.")

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _utc(value).replace(microsecond=0)

    @field_validator("statuses", "service_ids", "team_ids")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return sorted(set(value))


@dataclass(frozen=True)
class WindowCursor:
    """Where a pull resumes: every incident created before `since` is stored, and so are the first
    `offset` incidents (in `created_at` order) of the window `[since, until)`. `until` is None when
    no window has been started at `since` yet (then `offset` is 0). `filters` fingerprints the
    status, service and team filters the offset was counted under: a different filter restarts
    the window at offset 0 (repeating, never skipping).
    """

    since: datetime
    until: datetime | None = None
    offset: int = 0
    filters: str = ""

    @classmethod
    def loads(cls, text: str | None) -> WindowCursor | None:
        """Parse a stored cursor (None or empty: none)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            until = data.get("until")
            offset = int(data.get("offset", 0))
            if offset < 0:
                raise ValueError("negative offset")
            return cls(since=_parse_time(data["since"]), until=_parse_time(until) if until else None, offset=offset, filters=str(data.get("filters", "")))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise unreadable_cursor(text) from exc

    def dumps(self) -> str:
        data = {"since": pd_time(self.since), "until": pd_time(self.until) if self.until else None, "offset": self.offset, "filters": self.filters}
        return json.dumps(data, separators=(",", ":"))


@dataclass(frozen=True)
class _Batch:
    """One page read from PagerDuty, and the position after it."""

    records: list[RawRecord]
    after: WindowCursor


class PagerDutyConnector(Connector[PagerDutyConfig]):
    kind: ClassVar[str] = "pagerduty"
    config_model: ClassVar[type[ConnectorConfig]] = PagerDutyConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "id",
        "occurred_at": "created_at",
        "version": "updated_at",
        "title": "title",
        "input": (
            "{{ title }}\n\n"
            "Service: {{ service.summary }}\n"
            "Urgency: {{ urgency }}"
            "{% if priority and priority.summary %}\nPriority: {{ priority.summary }}{% endif %}"
            "{% if description and description != title %}\n\n{{ description }}{% endif %}"
            "{% if body and body.details %}\n\n{{ body.details }}{% endif %}"
        ),
        "reference": (
            "{% if resolution_notes %}{{ resolution_notes | join('\n\n') }}"
            "{% elif status == 'resolved' %}Resolved at {{ resolved_at }}.{% endif %}"
        ),
        "metadata": {
            "incident_number": "incident_number",
            "status": "status",
            "urgency": "urgency",
            "service": "service.summary",
            "priority": "priority.summary",
            "html_url": "html_url",
            "resolved_at": "resolved_at",
            "last_status_change_at": "last_status_change_at",
        },
        "tags": "tags",
        "required": ["title"],
    }

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Token token={self.config.api_key.get_secret_value()}", "Accept": ACCEPT}

    def _filters(self) -> str:
        config = self.config
        key = json.dumps([config.statuses, config.service_ids, config.team_ids], separators=(",", ":"))
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    def pages(self, cursor: str | None) -> Iterator[Page]:
        now = _utc(self.context.clock()).replace(microsecond=0)
        filters = self._filters()
        stored = WindowCursor.loads(cursor)
        if stored is None:
            position = WindowCursor(since=self.config.start, filters=filters)
        else:
            position = stored if stored.filters == filters else replace(stored, offset=0, filters=filters)
            lookback = max(self.config.start, position.since - timedelta(days=self.config.lookback_days))
            # Re-read the days before the cursor; the cursor stays where it was meanwhile.
            for batch in self._walk(WindowCursor(since=lookback, filters=filters), end=position.since):
                if batch.records:
                    yield Page(records=batch.records, cursor=position.dumps())
        for batch in self._walk(position, end=now):
            yield Page(records=batch.records, cursor=batch.after.dumps())

    def _walk(self, position: WindowCursor, *, end: datetime) -> Iterator[_Batch]:
        """Pages from `position` through windows up to `end`, each with the position after it."""
        window = timedelta(days=self.config.window_days)
        # A window started earlier (its `until` in the cursor) is finished whatever `end` is.
        while position.until is not None or position.since < end:
            since, offset = position.since, position.offset
            until = position.until or min(since + window, end)
            while True:
                body = self._list(since, until, offset)
                incidents, more, total = self._page_fields(body, offset)
                if offset == 0 and total is not None and total > MAX_RESULTS:
                    # Too many for offset paging: halve the window (to the second) and ask again.
                    half = timedelta(seconds=int((until - since).total_seconds()) // 2)
                    if half < _SECOND:
                        raise ConnectorError(
                            f"{VENDOR} has {total} incidents created at {pd_time(since)}, more than offset paging reaches ({MAX_RESULTS}); "
                            "narrow statuses, service_ids or team_ids"
                        )
                    until = since + half
                    continue
                records = self._records(incidents, offset)
                offset += len(incidents)
                if not more:
                    position = WindowCursor(since=until, filters=position.filters)
                    yield _Batch(records, position)
                    break
                if not incidents:
                    raise MalformedPage(f"{VENDOR} answered more=true with no incidents at offset {offset} of {pd_time(since)}..{pd_time(until)}")
                position = WindowCursor(since=since, until=until, offset=offset, filters=position.filters)
                yield _Batch(records, position)
                if offset >= MAX_RESULTS:
                    raise ConnectorError(f"{VENDOR} has more than {MAX_RESULTS} incidents in {pd_time(since)}..{pd_time(until)}; lower window_days or narrow the filters")

    def _list(self, since: datetime, until: datetime, offset: int) -> Any:
        config = self.config
        params: dict[str, Any] = {
            "since": pd_time(since),
            "until": pd_time(until),
            "offset": offset,
            "limit": min(config.limit, MAX_RESULTS - offset),
            "sort_by": "created_at:asc",
            "time_zone": "UTC",
            "total": "true",
            "statuses[]": list(config.statuses),
        }
        if config.service_ids:
            params["service_ids[]"] = list(config.service_ids)
        if config.team_ids:
            params["team_ids[]"] = list(config.team_ids)
        response = send(self.context, "GET", f"{config.base_url}/incidents", params=params, headers=self._headers(), vendor=VENDOR)
        return json_body(response, vendor=VENDOR)

    @staticmethod
    def _page_fields(body: Any, offset: int) -> tuple[list[Any], bool, int | None]:
        """(incidents, more, total) of a list answer, or `MalformedPage`."""
        if not isinstance(body, dict) or not isinstance(body.get("incidents"), list):
            keys = sorted(body)[:10] if isinstance(body, dict) else type(body).__name__
            raise MalformedPage(f"{VENDOR} incidents answer at offset {offset} has no 'incidents' array (keys: {keys})")
        more = body.get("more")
        if not isinstance(more, bool):
            raise MalformedPage(f"{VENDOR} incidents answer at offset {offset} has no boolean 'more'")
        total = body.get("total")
        return body["incidents"], more, total if isinstance(total, int) and not isinstance(total, bool) else None

    def _records(self, incidents: list[Any], offset: int) -> list[RawRecord]:
        return [self._record(incident, offset + index) for index, incident in enumerate(incidents)]

    def _record(self, incident: object, position: int) -> RawRecord:
        if not isinstance(incident, dict):
            return RawRecord(position, f"incident at offset {position}", error=RecordRejected("wrong_type", f"expected an incident object, got {type(incident).__name__}"))
        incident_id = incident.get("id")
        locator = f"incident {incident_id}" if incident_id else f"incident at offset {position}"
        value: dict[str, object] = dict(incident)
        urgency, priority = incident.get("urgency"), incident.get("priority")
        tags = [f"urgency:{urgency}"] if isinstance(urgency, str) and urgency else []
        if isinstance(priority, dict) and isinstance(priority.get("summary"), str) and priority["summary"]:
            tags.append(f"priority:{priority['summary']}")
        value["tags"] = tags
        if incident.get("status") == "resolved":
            value["resolved_at"] = incident.get("resolved_at") or incident.get("last_status_change_at")
            if self.config.include_notes and isinstance(incident_id, str) and incident_id:
                value["resolution_notes"] = self._notes(incident_id)
        return RawRecord(position, locator, value=value)

    def _notes(self, incident_id: str) -> list[str]:
        """The contents of an incident's notes, oldest first."""
        url = f"{self.config.base_url}/incidents/{quote(incident_id, safe='')}/notes"
        body = json_body(send(self.context, "GET", url, headers=self._headers(), vendor=VENDOR), vendor=VENDOR)
        if not isinstance(body, dict) or not isinstance(body.get("notes"), list):
            raise MalformedPage(f"{VENDOR} notes answer of incident {incident_id} has no 'notes' array")
        notes = [note for note in body["notes"] if isinstance(note, dict) and isinstance(note.get("content"), str) and note["content"].strip()]
        notes.sort(key=lambda note: str(note.get("created_at") or ""))
        return [note["content"].strip() for note in notes]
