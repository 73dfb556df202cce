"""A replay of Opsgenie's alert and incident APIs in their documented shapes (see
tests/replay/vendor/SOURCES.md): `GET /v2/alerts` (`query` with `updatedAt>=<epoch ms>`, `sort`,
`order`, `offset`/`limit`, `paging.next` while more follow, the 20,000 cap), `GET /v1/incidents`
(a required `query`, sorted by creation only), the notes of each (`offset` tokens, `direction`,
`order`), `GenieKey` auth and the `{"message", "took", "requestId"}` error body.

Alerts are the WARNING lines and every tenth INFO line of Loghub's OpenStack sample
(../shared/data/loghub_2k), raised at the line's time; one in three is closed, with a note naming
the line's template. Incidents are the Hadoop reports of priority Blocker (../shared/data/gitbugs_hadoop),
opened when reported, resolved ones with their resolution as a note.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.replay.server import Reply, Request

MAX_RESULTS = 20_000
_SINCE = re.compile(r"updatedAt>=(\d+)")
_NOTES = re.compile(r"^/(v2/alerts|v1/incidents)/([^/]+)/notes$")


def og_time(moment: datetime) -> str:
    """Opsgenie's spelling: UTC, milliseconds with trailing zeros dropped, `Z`."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3].rstrip("0").rstrip(".")
    return f"{text}Z"


def parse_og_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def error(status: int, message: str, code: int | None = None) -> Reply:
    body: dict[str, Any] = {"message": message, "took": 0.002, "requestId": str(uuid.uuid5(uuid.NAMESPACE_URL, message))}
    if code is not None:
        body["code"] = code
    return Reply(status, json=body)


@dataclass
class Entity:
    """An alert or incident as served, and its notes (oldest first)."""

    data: dict[str, Any]
    notes: list[dict[str, Any]] = field(default_factory=list)
    broken: bool = False

    @property
    def updated(self) -> datetime:
        return parse_og_time(self.data["updatedAt"])

    @property
    def created(self) -> datetime:
        return parse_og_time(self.data["createdAt"])


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("|".join(parts).encode()).digest()


def _note(text: str, at: datetime, owner: str) -> dict[str, Any]:
    millis = int(at.timestamp() * 1000)
    return {"note": text, "owner": owner, "createdAt": og_time(at), "offset": f"{millis}_{int.from_bytes(_digest(text)[:6], 'big')}"}


def openstack_alerts(structured: Path) -> list[Entity]:
    alerts = []
    with structured.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Level"] != "WARNING" and int(row["LineId"]) % 10:
                continue
            created = datetime.fromisoformat(f"{row['Date']}T{row['Time']}").replace(tzinfo=UTC)
            closed = int(row["LineId"]) % 3 == 0
            updated = created + timedelta(minutes=20) if closed else created
            millis = int(created.timestamp() * 1000)
            alert_id = f"{uuid.uuid5(uuid.NAMESPACE_URL, 'openstack-' + row['LineId'])}-{millis}"
            alert = Entity(
                {
                    "seen": closed,
                    "id": alert_id,
                    "tinyId": row["LineId"],
                    "alias": f"openstack-{row['EventId']}-{row['LineId']}",
                    "message": row["Content"][:130],
                    "status": "closed" if closed else "open",
                    "acknowledged": closed,
                    "isSeen": closed,
                    "tags": [row["Component"].split(".")[0], row["Level"].lower()],
                    "snoozed": False,
                    "count": 1 + int(row["LineId"]) % 4,
                    "lastOccurredAt": og_time(created),
                    "createdAt": og_time(created),
                    "updatedAt": og_time(updated),
                    "source": row["Logrecord"].split(".log")[0],
                    "owner": "ops@example.com" if closed else "",
                    "priority": "P2" if row["Level"] == "WARNING" else "P4",
                    "teams": [{"id": "6e7e2a3c-2a34-4a2b-9e4f-1a2b3c4d5e6f"}],
                    "responders": [{"type": "team", "id": "6e7e2a3c-2a34-4a2b-9e4f-1a2b3c4d5e6f"}],
                    "integration": {"id": "4513b7ea-3b91-438f-b7e4-e3e54af9147c", "name": "OpenStack logs", "type": "API"},
                    "report": {"ackTime": 60_000, "closeTime": 1_200_000, "acknowledgedBy": "ops@example.com", "closedBy": "ops@example.com"} if closed else {},
                    "ownerTeamId": "",
                }
            )
            if closed:
                alert.notes.append(_note(f"Closed: the known pattern {row['EventTemplate']} ({row['EventId']}).", updated, "ops@example.com"))
            alerts.append(alert)
    return alerts


def blocker_incidents(reports: Path) -> list[Entity]:
    incidents = []
    for line in reports.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        if report.get("priority") != "Blocker":
            continue
        created = datetime.fromisoformat(report["created"]).replace(tzinfo=UTC)
        resolved = datetime.fromisoformat(report["resolved"]).replace(tzinfo=UTC) if report.get("resolved") else None
        incident_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"hadoop-{report['id']}"))
        incident = Entity(
            {
                "id": incident_id,
                "serviceId": "9d5c0a8e-0d3f-4a43-9c1e-7c5f6a2f0b11",
                "tinyId": str(report["id"])[-4:],
                "message": report["title"][:130],
                "description": (report.get("description") or "")[:2000],
                "status": "resolved" if resolved else "open",
                "tags": ["hadoop", "blocker"],
                "createdAt": og_time(created),
                "updatedAt": og_time(resolved or created),
                "priority": "P1",
                "ownerTeam": "a3f1f2b4-6b4e-4c3d-8e2a-5f6a7b8c9d0e",
                "responders": [{"type": "team", "id": "a3f1f2b4-6b4e-4c3d-8e2a-5f6a7b8c9d0e"}],
                "extraProperties": {"jira": f"HADOOP-{report['id']}"},
                "impactedServices": ["9d5c0a8e-0d3f-4a43-9c1e-7c5f6a2f0b11"],
                "links": {"web": f"https://example.app.opsgenie.com/incident/detail/{incident_id}", "api": f"https://api.opsgenie.com/v1/incidents/{incident_id}"},
                "impactStartDate": og_time(created),
                **({"impactEndDate": og_time(resolved)} if resolved else {}),
                "actions": [],
            }
        )
        if resolved:
            incident.notes.append(_note(f"Resolved: {report.get('resolution') or 'Fixed'}.", resolved, "hadoop-oncall@example.com"))
        incidents.append(incident)
    return incidents


class OpsgenieReplay:
    """Alerts and incidents: a handler for `tests.replay.server.serve`. Tests may edit one
    (`edit`), break one (`broken`: its `createdAt` is no date) or refuse the key (`keys.clear()`)."""

    def __init__(self, alerts: list[Entity], incidents: list[Entity], *, key: str = "og-api-key-valid") -> None:
        self.alerts = {alert.data["id"]: alert for alert in alerts}
        self.incidents = {incident.data["id"]: incident for incident in incidents}
        self.keys = {key}
        self._lock = threading.Lock()

    def entity(self, identifier: str) -> Entity:
        return self.alerts.get(identifier) or self.incidents[identifier]

    def edit(self, identifier: str, *, message: str, at: datetime) -> None:
        with self._lock:
            self.entity(identifier).data.update(message=message, updatedAt=og_time(at))

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            if request.headers.get("authorization") not in {f"GenieKey {key}" for key in self.keys}:
                return error(401, "Could not authenticate")
            notes = _NOTES.match(request.path)
            if notes:
                return self._notes(notes.group(1), notes.group(2), request)
            if request.path == "/v2/alerts":
                return self._list(request, self.alerts, ("createdAt", "updatedAt"), required_query=False)
            if request.path == "/v1/incidents":
                return self._list(request, self.incidents, ("createdAt",), required_query=True)
            return error(404, "Not Found")

    def _list(self, request: Request, entities: dict[str, Entity], sorts: tuple[str, ...], *, required_query: bool) -> Reply:
        query = request.param("query", "") or ""
        if required_query and not query.strip():
            return error(422, "Query field cannot be empty.")
        try:
            offset, limit = int(request.param("offset", "0") or 0), int(request.param("limit", "20") or 20)
        except ValueError:
            return error(422, "offset and limit must be integers")
        if not 1 <= limit <= 100:
            return error(422, "Limit should be between 1 and 100")
        if offset + limit >= MAX_RESULTS:
            return error(422, f"Sum of offset and limit should be lower than {MAX_RESULTS}")
        sort = request.param("sort", "createdAt") or "createdAt"
        if sort not in sorts:
            return error(422, f"Sort field {sort!r} is not supported")
        since = _SINCE.search(query)
        selected = [entity for entity in entities.values() if not since or entity.updated >= datetime.fromtimestamp(int(since.group(1)) / 1000, tz=UTC)]
        selected.sort(key=lambda entity: (entity.updated if sort == "updatedAt" else entity.created, entity.data["id"]), reverse=request.param("order", "desc") == "desc")
        page = selected[offset : offset + limit]
        data = [self._render(entity) for entity in page]
        paging: dict[str, str] = {"first": f"{request.path}?offset=0&limit={limit}"}
        if offset + limit < len(selected):
            paging["next"] = f"https://api.opsgenie.com{request.path}?offset={offset + limit}&limit={limit}&sort={sort}&order={request.param('order', 'desc')}"
        return Reply(json={"data": data, "paging": paging, "took": 0.011, "requestId": str(uuid.uuid4())})

    @staticmethod
    def _render(entity: Entity) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(json.dumps(entity.data))
        if entity.broken:
            data["createdAt"] = "the day the pager broke"
        return data

    def _notes(self, kind: str, identifier: str, request: Request) -> Reply:
        entity = (self.alerts if kind == "v2/alerts" else self.incidents).get(identifier)
        if entity is None:
            return error(404, "Alert does not exist" if kind == "v2/alerts" else "Incident does not exist")
        limit = int(request.param("limit", "20") or 20)
        notes = sorted(entity.notes, key=lambda note: note["offset"], reverse=request.param("order", "desc") == "desc")
        after = request.param("offset")
        if after:
            notes = [note for note in notes if note["offset"] > after]
        page = notes[:limit]
        paging = {"first": f"/{kind}/{identifier}/notes"}
        if len(notes) > limit:
            paging["next"] = f"/{kind}/{identifier}/notes?offset={page[-1]['offset']}&direction=next"
        return Reply(json={"data": page, "paging": paging, "took": 0.004, "requestId": str(uuid.uuid4())})
