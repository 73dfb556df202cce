"""A replay of incident.io's public API in its published shapes (see tests/replay/vendor/SOURCES.md):
`GET /v2/incidents` (`page_size` up to 250, `after` cursors, `sort_by`, `updated_at[gte]` by date,
`mode[one_of]` leaving test and tutorial incidents out by default, `pagination_meta` without `after`
on the last page), `GET /v2/incident_updates`, `GET /v1/postmortem_documents/{id}/content`, bearer
keys, the `{"type", "status", "request_id", "errors"}` error body, and the 429 of a spent rate
limit, whose only wait is the moment in its body's `rate_limit.retry_after` (no Retry-After header).

Incidents are the Hadoop reports of priority Critical and Blocker (../shared/data/gitbugs_hadoop),
reported when filed; resolved ones are closed with an update naming their resolution, and one in
four of those has a postmortem built from the report.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.replay.server import Reply, Request

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(seed: str, moment: datetime) -> str:
    """A deterministic ULID-shaped id: 10 characters of time, 16 of a digest of `seed`."""
    millis = int(moment.timestamp() * 1000)
    digits = []
    for _ in range(10):
        digits.append(_ALPHABET[millis % 32])
        millis //= 32
    digest = int.from_bytes(uuid.uuid5(uuid.NAMESPACE_URL, seed).bytes, "big")
    for _ in range(16):
        digits.insert(10, _ALPHABET[digest % 32])
        digest //= 32
    return "".join(reversed(digits[:10])) + "".join(digits[10:])


def io_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def problem(status: int, kind: str, code: str, message: str) -> Reply:
    return Reply(status, json={"type": kind, "status": status, "request_id": str(uuid.uuid5(uuid.NAMESPACE_URL, code)), "errors": [{"code": code, "message": message}]})


def rate_limited(until: datetime, *, limit: int = 1200) -> Reply:
    """incident.io's answer while an API key's limit is spent: a 429 naming the moment it may try
    again in the body only, as an RFC 3339 timestamp to the second."""
    return Reply(
        429,
        json={
            "type": "too_many_requests",
            "status": 429,
            "request_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"rate-limited-{until.isoformat()}")),
            "rate_limit": {"name": "api_key_name", "limit": limit, "remaining": 0, "retry_after": until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "errors": [{"code": "too_many_requests", "message": "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests."}],
        },
    )


@dataclass
class Incident:
    data: dict[str, Any]
    updates: list[dict[str, Any]] = field(default_factory=list)
    postmortem: str = ""
    broken: bool = False

    @property
    def created(self) -> datetime:
        return datetime.fromisoformat(self.data["created_at"].replace("Z", "+00:00"))

    @property
    def updated(self) -> datetime:
        return datetime.fromisoformat(self.data["updated_at"].replace("Z", "+00:00"))


def _timestamp(name: str, rank: int, value: datetime | None) -> dict[str, Any]:
    return {"incident_timestamp": {"id": ulid(name, datetime(2021, 1, 1, tzinfo=UTC)), "name": name, "rank": rank}, "value": {"value": io_time(value)} if value else None}


def hadoop_incidents(reports: Path) -> list[Incident]:
    incidents: list[Incident] = []
    for line in reports.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        if report.get("priority") not in ("Critical", "Blocker"):
            continue
        reported = datetime.fromisoformat(report["created"]).replace(tzinfo=UTC)
        created = reported + timedelta(minutes=3)  # declared a few minutes after it was reported
        resolved = datetime.fromisoformat(report["resolved"]).replace(tzinfo=UTC) if report.get("resolved") else None
        number = len(incidents) + 1
        incident_id = ulid(f"hadoop-{report['id']}", created)
        origin = datetime(2021, 1, 1, tzinfo=UTC)
        severity = {"id": ulid(report["priority"], origin), "name": report["priority"], "rank": 2 if report["priority"] == "Blocker" else 1, "description": ""}
        category = "closed" if resolved else "live"
        status = {"id": ulid(category, origin), "name": "Closed" if resolved else "Investigating", "category": category, "rank": 4 if resolved else 1}
        postmortem_id = ulid(f"postmortem-{report['id']}", resolved) if resolved and number % 4 == 0 else None
        incident = Incident(
            {
                "id": incident_id,
                "reference": f"INC-{number}",
                "name": report["title"],
                "summary": (report.get("description") or "").strip()[:1500] or None,
                "permalink": f"https://app.incident.io/hadoop/incidents/{number}",
                "created_at": io_time(created),
                "updated_at": io_time(resolved or created),
                "last_activity_at": io_time(resolved or created),
                "mode": "standard",
                "visibility": "public",
                "incident_status": status,
                "severity": severity,
                "incident_type": {"id": ulid("default-type", origin), "name": "Default", "is_default": True},
                "creator": {"api_key": {"id": ulid("jira-sync", origin), "name": "Jira sync"}},
                "custom_field_entries": [],
                "incident_role_assignments": [],
                "incident_timestamp_values": [_timestamp("Reported at", 1, reported), _timestamp("Resolved at", 6, resolved), _timestamp("Closed at", 12, resolved)],
                "postmortem_document_url": f"https://app.incident.io/hadoop/incidents/{number}/postmortem" if postmortem_id else None,
                "postmortem_document_ids": [postmortem_id] if postmortem_id else [],
                "slack_channel_id": f"C0{number:08d}",
                "slack_channel_name": f"inc-{number}-hadoop",
                "slack_team_id": "T02A1FSLE8J",
                "team_ids": [],
            }
        )
        if resolved:
            message = f"Resolved as {report.get('resolution') or 'Fixed'}."
            update: dict[str, Any] = {"id": ulid(f"update-{report['id']}", resolved), "incident_id": incident_id, "created_at": io_time(resolved), "message": message}
            update["new_incident_status"] = status
            incident.updates.append(update)
        if postmortem_id:
            happened = (report.get("description") or "").strip()[:800]
            incident.postmortem = f"# {report['title']}\n\n## What happened\n\n{happened}\n\n## Resolution\n\n{report.get('resolution') or 'Fixed'}."
        incidents.append(incident)
    return incidents


class IncidentIoReplay:
    """The organisation's incidents: a handler for `tests.replay.server.serve`. Tests may edit one
    (`edit`), break one (`broken`: its reported time is no time), refuse the key (`keys.clear()`)
    or spend its rate limit for a while (`spend_rate_limit`)."""

    def __init__(self, incidents: list[Incident], *, key: str = "inc-io-api-key-valid") -> None:
        self.incidents = {incident.data["id"]: incident for incident in incidents}
        self.keys = {key}
        self._lock = threading.Lock()
        self._spend_after: int | None = None
        self._spent_for = 0.0
        self._clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._spent_until: datetime | None = None

    def spend_rate_limit(self, *, after_pages: int, seconds: float, clock: Callable[[], datetime]) -> None:
        """Once `after_pages` more pages of incidents were served, the key's limit is spent for
        `seconds` of `clock`: until then every request gets `rate_limited` (no header names the wait)."""
        with self._lock:
            self._spend_after, self._spent_for, self._clock = after_pages, seconds, clock

    def by_reference(self, reference: str) -> Incident:
        return next(incident for incident in self.incidents.values() if incident.data["reference"] == reference)

    def edit(self, reference: str, *, name: str, at: datetime) -> None:
        with self._lock:
            self.by_reference(reference).data.update(name=name, updated_at=io_time(at))

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            authorization = request.headers.get("authorization")
            if authorization is None:
                return problem(401, "authentication_error", "missing_authorization_material", "No authorization material provided in request")
            if authorization not in {f"Bearer {key}" for key in self.keys}:
                return problem(401, "authentication_error", "authentication_failed", "Authentication failed.")
            limited = self._rate_limited(request)
            if limited is not None:
                return limited
            if request.path == "/v2/incidents":
                return self._incidents(request)
            if request.path == "/v2/incident_updates":
                incident = self.incidents.get(request.param("incident_id") or "")
                updates = incident.updates if incident else []
                return Reply(json={"incident_updates": updates, "pagination_meta": {"page_size": 25}})
            if request.path.startswith("/v1/postmortem_documents/") and request.path.endswith("/content"):
                document = request.path.split("/")[3]
                found = next((incident for incident in self.incidents.values() if document in incident.data["postmortem_document_ids"]), None)
                if found is None:
                    return problem(404, "not_found", "not_found", "Not found.")
                return Reply(json={"markdown": found.postmortem})
            return problem(404, "not_found", "not_found", "Not found.")

    def _rate_limited(self, request: Request) -> Reply | None:
        if self._spent_until is not None and self._clock() < self._spent_until:
            return rate_limited(self._spent_until)
        if self._spend_after is not None and request.path == "/v2/incidents":
            if self._spend_after == 0:
                self._spend_after, self._spent_until = None, self._clock() + timedelta(seconds=self._spent_for)
                return rate_limited(self._spent_until)
            self._spend_after -= 1
        return None

    def _incidents(self, request: Request) -> Reply:
        size = int(request.param("page_size", "25") or 25)
        if not 1 <= size <= 250:
            return problem(422, "validation_error", "invalid_value", "The maximum page size that can be requested is 250")
        modes = set(request.query.get("mode[one_of]", ["standard", "retrospective"]))
        since_text = request.param("updated_at[gte]")
        since = datetime.combine(date.fromisoformat(since_text), datetime.min.time(), tzinfo=UTC) if since_text else None
        selected = [incident for incident in self.incidents.values() if incident.data["mode"] in modes and (since is None or incident.updated >= since)]
        newest_first = request.param("sort_by", "created_at_newest_first") != "created_at_oldest_first"
        selected.sort(key=lambda incident: (incident.created, incident.data["id"]), reverse=newest_first)
        after = request.param("after")
        if after:
            position = next((index for index, incident in enumerate(selected) if incident.data["id"] == after), None)
            if position is None:
                return problem(422, "validation_error", "invalid_cursor", "The after cursor does not match an incident of this list")
            selected = selected[position + 1 :]
        page = selected[:size]
        meta: dict[str, Any] = {"page_size": size, "total_record_count": len(selected)}
        if len(selected) > size:
            meta["after"] = page[-1].data["id"]
        return Reply(json={"incidents": [self._render(incident) for incident in page], "pagination_meta": meta})

    @staticmethod
    def _render(incident: Incident) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(json.dumps(incident.data))
        if incident.broken:
            data["incident_timestamp_values"][0]["value"] = {"value": "when the pager first rang"}
        return data
