"""Opsgenie: alerts and incidents, with the notes of closed ones, through REST API v2 and v1.

Alerts (`GET /v2/alerts`) can be sorted by `updatedAt`: they are read with
`query=(<filter>) AND updatedAt>=<cursor, epoch ms>&sort=updatedAt&order=asc` and `offset`/`limit`
paging, the cursor being that time to the millisecond plus the alert ids read at it (`keyset`).
Incidents (`GET /v1/incidents`) can only be sorted by creation time, so a pull reads every incident
updated at or after the incidents' mark, in creation order, and moves the mark only when it read
them all: to the newest update it saw, but never past the pull's start less a margin for clock
skew, so an incident edited while the pull ran is read again next time. Opsgenie pages no further
than an offset plus limit of 20,000.

Each record carries `kind` (`alert` or `incident`). A closed alert's and a resolved or closed
incident's notes (`GET /v2/alerts/{id}/notes`, `GET /v1/incidents/{id}/notes`, oldest first) are
its reference answer. Auth is an API key (`Authorization: GenieKey <key>`) of an API integration;
`region` picks the US or EU host. A 429 names its wait in `X-RateLimit-Period-In-Sec`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import httpx
from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, ConnectorError, MalformedPage, Page, unreadable_cursor
from ingest.connectors.http import json_body, send
from ingest.connectors.keyset import KeysetCursor, SearchPage, walk
from ingest.connectors.mark import TimeMark
from ingest.dates import read_time
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "Opsgenie"
HOSTS = {"us": "https://api.opsgenie.com", "eu": "https://api.eu.opsgenie.com"}
MAX_RESULTS = 20_000
"""Opsgenie refuses an offset plus limit from this on (422)."""
SKEW = timedelta(minutes=5)
_MS = timedelta(milliseconds=1)

Kind = Literal["alerts", "incidents"]


def _both() -> list[Kind]:
    return ["alerts", "incidents"]


class OpsgenieConfig(ConnectorConfig):
    api_key: SecretStr = Field(description="An API key of an API integration with read access.")
    region: Literal["us", "eu"] = Field(default="us", description="us: api.opsgenie.com; eu: api.eu.opsgenie.com.")
    base_url: BaseUrl | None = Field(default=None, description="Another API root; overrides region.")
    kinds: list[Kind] = Field(default_factory=_both, min_length=1, description="What to pull.")
    query: str = Field(default="", description="An Opsgenie search query that filters both, e.g. 'priority: P1 OR priority: P2'.")
    limit: int = Field(default=100, ge=1, le=100, description="Records per page.")
    include_notes: bool = Field(default=True, description="Fetch the notes of closed alerts and resolved incidents as their reference answer.")

    @field_validator("kinds")
    @classmethod
    def _distinct(cls, value: list[Kind]) -> list[Kind]:
        return sorted(set(value))

    @model_validator(mode="after")
    def _no_sorting(self) -> OpsgenieConfig:
        if "updatedat" in self.query.replace(" ", "").lower():
            raise ValueError("leave updatedAt out of query: goldenset filters on it itself")
        return self

    @property
    def api(self) -> str:
        return self.base_url or HOSTS[self.region]


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _boundary(text: object) -> str | None:
    """A time as the alerts cursor keeps it: to the millisecond, fixed width, ordered as text."""
    moment = read_time(text)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z" if moment else None


@dataclass(frozen=True)
class Cursor:
    """Where a pull resumes: the alerts' keyset cursor and the incidents' mark (every incident
    updated before it is stored)."""

    alerts: KeysetCursor = field(default_factory=KeysetCursor)
    incidents_since: str | None = None

    @classmethod
    def loads(cls, text: str | None) -> Cursor:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(alerts=KeysetCursor.loads(json.dumps(data["alerts"])) if data.get("alerts") else KeysetCursor(), incidents_since=data.get("incidents_since"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise unreadable_cursor(text) from exc

    def dumps(self) -> str:
        return json.dumps({"alerts": json.loads(self.alerts.dumps()), "incidents_since": self.incidents_since}, separators=(",", ":"))


def rate_limit_delay(response: httpx.Response) -> float | None:
    """Opsgenie's throttling answer names its window in `X-RateLimit-Period-In-Sec`, not `Retry-After`."""
    if response.status_code != 429:
        return None
    period = response.headers.get("x-ratelimit-period-in-sec", "").strip()
    return float(period) if period.isdigit() else None


class OpsgenieConnector(Connector[OpsgenieConfig]):
    kind: ClassVar[str] = "opsgenie"
    config_model: ClassVar[type[ConnectorConfig]] = OpsgenieConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "id",
        "occurred_at": "createdAt",
        "version": "updatedAt",
        "title": "message",
        "input": (
            "{{ message }}"
            "{% if description and description != message %}\n\n{{ description }}{% endif %}"
            "{% if source %}\n\nSource: {{ source }}{% endif %}"
            "{% if priority %}\nPriority: {{ priority }}{% endif %}"
            "{% if count and count > 1 %}\nOccurrences: {{ count }}{% endif %}"
        ),
        "reference": "{{ notes | join('\n\n') }}",
        "metadata": {
            "kind": "kind",
            "tiny_id": "tinyId",
            "status": "status",
            "priority": "priority",
            "source": "source",
            "owner": "owner",
            "count": "count",
            "updated_at": "updatedAt",
        },
        "tags": "tags",
        "required": ["message"],
    }

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"GenieKey {self.config.api_key.get_secret_value()}", "Accept": "application/json"}

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        response = send(self.context, "GET", f"{self.config.api}{path}", params=params, headers=self._headers(), rate_limit_delay=rate_limit_delay, vendor=VENDOR)
        return json_body(response, vendor=VENDOR)

    def _query(self, since_ms: int | None) -> str:
        clauses = [f"({self.config.query})"] if self.config.query.strip() else []
        if since_ms is not None:
            clauses.append(f"updatedAt>={since_ms}")
        return " AND ".join(clauses)

    def _list(self, path: str, query: str, offset: int, sort: str) -> tuple[list[Any], bool]:
        """(records, whether more follow) of one list page."""
        limit = self.config.limit
        if offset + limit >= MAX_RESULTS:
            raise ConnectorError(f"{VENDOR} pages no further than {MAX_RESULTS} {path.rsplit('/', 1)[-1]} from one query; narrow `query`")
        body = self._get(path, {"query": query, "offset": offset, "limit": limit, "sort": sort, "order": "asc"})
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            keys = sorted(body)[:10] if isinstance(body, dict) else type(body).__name__
            raise MalformedPage(f"{VENDOR} {path} answer at offset {offset} has no 'data' array (keys: {keys})")
        paging = body.get("paging")
        more = isinstance(paging, dict) and bool(paging.get("next")) and bool(body["data"])
        return body["data"], more

    def pages(self, cursor: str | None) -> Iterator[Page]:
        position = Cursor.loads(cursor)
        if "alerts" in self.config.kinds:
            for batch in walk(position.alerts, self._alerts, lambda alert: _boundary(alert.get("updatedAt")) if isinstance(alert, dict) else None, _key):
                position = replace(position, alerts=batch.cursor)
                yield Page(records=[self._record(alert, "alert", batch.start + index) for index, alert in enumerate(batch.records)], cursor=position.dumps())
        if "incidents" in self.config.kinds:
            yield from self._incidents(position)

    def _alerts(self, since: str | None, offset: int, token: str | None) -> SearchPage:
        moment = read_time(since)
        records, more = self._list("/v2/alerts", self._query(_millis(moment) if moment else None), offset, "updatedAt")
        return SearchPage(records, None, not more)

    def _incidents(self, position: Cursor) -> Iterator[Page]:
        started = self.context.clock()
        mark = TimeMark(read_time(position.incidents_since))
        query = self._query(_millis(mark.since) if mark.since else 0)  # Opsgenie requires a query for incidents
        offset, more = 0, True
        while more:
            incidents, more = self._list("/v1/incidents", query, offset, "createdAt")
            mark.see(incident.get("updatedAt") for incident in incidents if isinstance(incident, dict))
            records = [self._record(incident, "incident", offset + index) for index, incident in enumerate(incidents)]
            offset += len(incidents)
            # Never past the pull's start (less a margin for skew): an incident edited meanwhile is read again.
            moved = mark.moved(ceiling=started.astimezone(UTC) - SKEW) if not more else None
            after = replace(position, incidents_since=_boundary(moved.isoformat())) if moved else position
            yield Page(records=records, cursor=after.dumps())

    def _record(self, record: object, kind: str, position: int) -> RawRecord:
        if not isinstance(record, dict):
            return RawRecord(position, f"{kind} at offset {position}", error=RecordRejected("wrong_type", f"expected an {kind} object, got {type(record).__name__}"))
        identifier = record.get("id")
        locator = f"{kind} {record.get('tinyId') or identifier}" if identifier else f"{kind} at offset {position}"
        value: dict[str, object] = {**record, "kind": kind}
        closed = record.get("status") in ("closed", "resolved")
        value["notes"] = self._notes(kind, str(identifier)) if closed and self.config.include_notes and isinstance(identifier, str) and identifier else []
        return RawRecord(position, locator, value=value)

    def _notes(self, kind: str, identifier: str) -> list[str]:
        """The notes of an alert or incident, oldest first, across their pages."""
        path = f"/v2/alerts/{quote(identifier, safe='')}/notes" if kind == "alert" else f"/v1/incidents/{quote(identifier, safe='')}/notes"
        params: dict[str, Any] = {"identifierType": "id", "order": "asc", "direction": "next", "limit": 100}
        notes: list[str] = []
        while True:
            body = self._get(path, params)
            if not isinstance(body, dict) or not isinstance(body.get("data"), list):
                raise MalformedPage(f"{VENDOR} notes answer of {kind} {identifier} has no 'data' array")
            entries = [entry for entry in body["data"] if isinstance(entry, dict)]
            notes.extend(str(entry["note"]).strip() for entry in entries if isinstance(entry.get("note"), str) and entry["note"].strip())
            paging = body.get("paging")
            following = entries[-1].get("offset") if entries else None
            if not (isinstance(paging, dict) and paging.get("next")) or not following:
                return notes
            params = {**params, "offset": following}


def _key(record: object) -> str:
    return str(record.get("id")) if isinstance(record, dict) else repr(record)[:64]
