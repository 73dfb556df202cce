"""A replay of PagerDuty REST API v2 `GET /incidents` (since/until on `created_at`, classic
offset/limit/more/total paging) and `GET /incidents/{id}/notes`, in the documented response
shapes, serving one incident per vulnerability of ../shared/data/cisa_kev.

Each CVE becomes an incident of the vendor's service, created on `dateAdded` at a time of day
derived from the CVE id, urgent when ransomware use is known. Older ones are resolved on their
`dueDate`, with CISA's required action (and its notes) as the incident's notes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.replay.server import Reply, Request

API = "https://api.pagerduty.com"
WEB = "https://kev-response.pagerduty.com"
MAX_LIMIT = 100
MAX_RESULTS = 10_000
MAX_RANGE = timedelta(days=183)
RESOLVED_BEFORE = datetime(2025, 9, 1, tzinfo=UTC)
"""Incidents due before this are resolved (one in `RESOLVED_SHARE` of them, to keep notes requests few)."""
RESOLVED_SHARE = 3
_NOTES_PATH = re.compile(r"^/incidents/([A-Z0-9]+)/notes$")
RESPONDER = {"id": "PXPGF42", "type": "user_reference", "summary": "Vulnerability Response On-Call", "self": f"{API}/users/PXPGF42", "html_url": f"{WEB}/users/PXPGF42"}
TEAM = {"id": "PQ9K7I8", "type": "team_reference", "summary": "Vulnerability Response", "self": f"{API}/teams/PQ9K7I8", "html_url": f"{WEB}/teams/PQ9K7I8"}
POLICY = {
    "id": "PT20YPA",
    "type": "escalation_policy_reference",
    "summary": "KEV escalation",
    "self": f"{API}/escalation_policies/PT20YPA",
    "html_url": f"{WEB}/escalation_policies/PT20YPA",
}
P1 = {"id": "PSO75BM", "type": "priority", "summary": "P1", "name": "P1", "self": f"{API}/priorities/PSO75BM"}


def pd_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_pd_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("/".join(parts).encode()).digest()


def pd_id(*parts: str) -> str:
    """A PagerDuty-style id (P + 6 characters of [A-Z2-7]), stable for the same parts."""
    return "P" + base64.b32encode(_digest(*parts)).decode()[:6]


def _time_of_day(*parts: str) -> timedelta:
    return timedelta(seconds=int.from_bytes(_digest("time", *parts)[:4], "big") % 86_400)


def _error(status: int, message: str, code: int, errors: list[str] | None = None) -> Reply:
    body: dict[str, Any] = {"message": message, "code": code}
    if errors:
        body["errors"] = errors
    return Reply(status, json={"error": body})


@dataclass
class ReplayIncident:
    """An incident as served, its true creation time (what since/until filter on) and its notes."""

    created: datetime
    data: dict[str, Any]
    notes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.data["id"])


def _note(incident_id: str, content: str, at: datetime, number: int) -> dict[str, Any]:
    return {
        "id": pd_id("note", incident_id, str(number)),
        "user": RESPONDER,
        "channel": {"summary": "The PagerDuty website or APIs"},
        "content": content,
        "created_at": pd_time(at),
    }


def kev_incidents(catalog: Path, *, resolved_before: datetime = RESOLVED_BEFORE, resolved_share: int = RESOLVED_SHARE) -> list[ReplayIncident]:
    """One incident per vulnerability of the CISA KEV catalog, numbered in creation order."""
    vulnerabilities = json.loads(catalog.read_text(encoding="utf-8"))["vulnerabilities"]
    incidents: list[ReplayIncident] = []
    taken: set[str] = set()
    for vulnerability in vulnerabilities:
        cve: str = vulnerability["cveID"]
        incident_id = pd_id("incident", cve)
        while incident_id in taken:
            incident_id = pd_id("incident", incident_id)
        taken.add(incident_id)
        created = datetime.fromisoformat(vulnerability["dateAdded"]).replace(tzinfo=UTC) + _time_of_day(cve)
        due = datetime.fromisoformat(vulnerability["dueDate"]).replace(tzinfo=UTC) + _time_of_day("due", cve)
        vendor: str = vulnerability["vendorProject"]
        service_id = pd_id("service", vendor)
        known_ransomware = vulnerability.get("knownRansomwareCampaignUse") == "Known"
        resolved = due < resolved_before and _digest("resolved", cve)[0] % resolved_share == 0
        status = "resolved" if resolved else ("acknowledged" if _digest("ack", cve)[0] % 2 else "triggered")
        changed = max(due, created) if resolved else created + timedelta(minutes=5) if status == "acknowledged" else created
        data: dict[str, Any] = {
            "id": incident_id,
            "type": "incident",
            "summary": "",
            "self": f"{API}/incidents/{incident_id}",
            "html_url": f"{WEB}/incidents/{incident_id}",
            "incident_number": 0,
            "title": vulnerability["vulnerabilityName"],
            "description": vulnerability["shortDescription"],
            "created_at": pd_time(created),
            "updated_at": pd_time(changed),
            "status": status,
            "incident_key": cve,
            "service": {
                "id": service_id,
                "type": "service_reference",
                "summary": vendor,
                "self": f"{API}/services/{service_id}",
                "html_url": f"{WEB}/service-directory/{service_id}",
            },
            "assignments": [] if resolved else [{"at": pd_time(created), "assignee": RESPONDER}],
            "acknowledgements": [{"at": pd_time(changed), "acknowledger": RESPONDER}] if status == "acknowledged" else [],
            "last_status_change_at": pd_time(changed),
            "last_status_change_by": RESPONDER if status != "triggered" else {"id": service_id, "type": "service_reference", "summary": vendor},
            "escalation_policy": POLICY,
            "teams": [TEAM],
            "urgency": "high" if known_ransomware else "low",
            "priority": P1 if known_ransomware else None,
            "resolve_reason": None,
            "alert_counts": {"all": 1, "triggered": 0 if resolved else 1, "resolved": 1 if resolved else 0},
            "is_mergeable": True,
        }
        incident = ReplayIncident(created=created, data=data)
        if resolved:
            incident.notes.append(_note(incident_id, vulnerability["requiredAction"], changed, 1))
            if (vulnerability.get("notes") or "").strip():
                incident.notes.append(_note(incident_id, f"References: {vulnerability['notes'].strip()}", changed, 2))
        incidents.append(incident)
    incidents.sort(key=lambda incident: (incident.created, incident.id))
    for number, incident in enumerate(incidents, start=1):
        incident.data["incident_number"] = number
        incident.data["summary"] = f"[#{number}] {incident.data['title']}"
    return incidents


class PagerDutyReplay:
    """PagerDuty over `incidents`: a handler for `tests.replay.server.serve`.

    Tests may expire the token (`expire_token`, also mid-pull), accept a new one (`tokens`),
    resolve an incident later (`resolve`), or break one (`break_incident`: its `created_at` is
    served as text that is no date, while since/until still place it by its true time).
    """

    def __init__(self, incidents: list[ReplayIncident], *, token: str = "pd-api-key-valid", max_results: int = MAX_RESULTS) -> None:
        self.incidents = {incident.id: incident for incident in incidents}
        self.tokens = {token}
        self.max_results = max_results
        self.broken: set[str] = set()
        self.requests_seen = 0
        self._lock = threading.Lock()

    def ordered(self) -> list[ReplayIncident]:
        """Every incident in creation order, as `sort_by=created_at:asc` serves them."""
        return sorted(self.incidents.values(), key=lambda incident: (incident.created, incident.data["incident_number"]))

    def between(self, since: datetime, until: datetime) -> list[ReplayIncident]:
        return [incident for incident in self.ordered() if since <= incident.created < until]

    def expire_token(self) -> None:
        with self._lock:
            self.tokens.clear()

    def resolve(self, incident_id: str, note: str, *, at: datetime) -> None:
        with self._lock:
            incident = self.incidents[incident_id]
            incident.data.update(
                status="resolved",
                last_status_change_at=pd_time(at),
                updated_at=pd_time(at),
                last_status_change_by=RESPONDER,
                assignments=[],
                alert_counts={"all": 1, "triggered": 0, "resolved": 1},
            )
            incident.notes.append(_note(incident_id, note, at, len(incident.notes) + 1))

    def break_incident(self, incident_id: str) -> None:
        with self._lock:
            self.broken.add(incident_id)

    def _render(self, incident: ReplayIncident) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(json.dumps(incident.data))
        if incident.id in self.broken:
            data["created_at"] = "the day the lights went out"
        return data

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            self.requests_seen += 1
            if request.headers.get("authorization") not in {f"Token token={token}" for token in self.tokens}:
                return _error(401, "Unauthorized", 2006)
            if request.method != "GET":
                return _error(405, "Method Not Allowed", 2100)
            if request.path == "/incidents":
                return self._list(request)
            match = _NOTES_PATH.match(request.path)
            if match:
                incident = self.incidents.get(match.group(1))
                if incident is None:
                    return _error(404, "Not Found", 2100)
                return Reply(json={"notes": json.loads(json.dumps(incident.notes))})
            return _error(404, "Not Found", 2100)

    def _list(self, request: Request) -> Reply:
        try:
            offset = int(request.param("offset", "0") or 0)
            limit = int(request.param("limit", "25") or 25)
            since_text, until_text = request.param("since"), request.param("until")
            if since_text is None or until_text is None:
                raise ValueError("since and until are required by this replay")
            since, until = parse_pd_time(since_text), parse_pd_time(until_text)
        except ValueError as exc:
            return _error(400, "Invalid Input Provided", 2001, [str(exc)])
        problems = []
        if not 1 <= limit <= MAX_LIMIT:
            problems.append(f"Limit must be between 1 and {MAX_LIMIT}.")
        if offset < 0 or offset + limit > self.max_results:
            problems.append(f"Offset plus limit must not exceed {self.max_results}.")
        if until < since or until - since > MAX_RANGE:
            problems.append("The range between since and until must be positive and at most 6 months.")
        if request.param("time_zone", "UTC") != "UTC":
            problems.append("This replay serves UTC only.")
        sort_by = request.param("sort_by", "created_at:asc")
        if sort_by not in ("created_at", "created_at:asc", "created_at:desc"):
            problems.append(f"Unsupported sort_by {sort_by!r}.")
        if problems:
            return _error(400, "Invalid Input Provided", 2001, problems)
        statuses = set(request.query.get("statuses[]", []))
        services = set(request.query.get("service_ids[]", []))
        teams = set(request.query.get("team_ids[]", []))
        urgencies = set(request.query.get("urgencies[]", []))
        matching = [
            incident
            for incident in self.between(since, until)
            if (not statuses or incident.data["status"] in statuses)
            and (not services or incident.data["service"]["id"] in services)
            and (not teams or any(team["id"] in teams for team in incident.data["teams"]))
            and (not urgencies or incident.data["urgency"] in urgencies)
        ]
        if sort_by == "created_at:desc":
            matching.reverse()
        page = matching[offset : offset + limit]
        body = {
            "incidents": [self._render(incident) for incident in page],
            "limit": limit,
            "offset": offset,
            "more": offset + len(page) < len(matching),
            "total": len(matching) if request.param("total") == "true" else None,
        }
        return Reply(json=body)
