"""A replay of ServiceNow's Table API, `GET /api/now/table/incident`, serving one incident per
vulnerability of ../shared/data/cisa_kev in the shapes ServiceNow answers (see
tests/replay/vendor/SOURCES.md): `sysparm_query` with `sys_updated_on>=` (a UTC literal), `^`
joined clauses and `ORDERBY`, `sysparm_limit` / `sysparm_offset` paging with `X-Total-Count` and
`Link` headers, `sysparm_display_value=all` (every field `{"display_value", "value"}`), journal
fields as one display string of every entry, newest first, and the `{"error": {...}, "status":
"failure"}` envelope. Like ServiceNow, a clause naming an unknown field is ignored.

Each CVE becomes an incident opened on `dateAdded` (at a time of day from its id), and, for the
older ones, resolved on `dueDate` with CISA's required action as its close notes and a work note.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.replay.server import Reply, Request

STORED = "%Y-%m-%d %H:%M:%S"
SHOWN = "%d/%m/%Y %H:%M:%S"  # the replay user's date format, in its time zone (Europe/Berlin, +1 h)
RESOLVED_BEFORE = datetime(2024, 6, 1, tzinfo=UTC)
_ORDER = re.compile(r"^ORDERBY(DESC)?([a-z_]+)$")
_CLAUSE = re.compile(r"^([a-z_][a-z0-9_.]*)(>=|<=|!=|>|<|=)(.*)$")
FIELDS = (
    "number", "sys_id", "short_description", "description", "opened_at", "sys_created_on", "sys_updated_on", "state",
    "priority", "urgency", "impact", "category", "subcategory", "close_code", "close_notes", "work_notes", "comments",
    "assignment_group", "cmdb_ci", "resolved_at", "closed_at", "active", "sys_mod_count",
)


def stored(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(STORED)


def _shown(moment: datetime) -> str:
    return (moment.astimezone(UTC) + timedelta(hours=1)).strftime(SHOWN)


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("|".join(parts).encode()).digest()


def error(status: int, message: str, detail: str | None) -> Reply:
    return Reply(status, json={"error": {"message": message, "detail": detail}, "status": "failure"})


@dataclass
class Incident:
    """One incident as stored: field values, and the display value of those that differ."""

    values: dict[str, str]
    shown: dict[str, str]
    broken: bool = False

    def render(self) -> dict[str, Any]:
        record = {name: {"display_value": self.shown.get(name, value), "value": value} for name, value in self.values.items()}
        if self.broken:
            record["opened_at"] = {"display_value": "someday", "value": "someday"}
        return record


def kev_incidents(catalog: Path, *, limit: int | None = None) -> list[Incident]:
    """One incident per KEV vulnerability (the first `limit` by date added), numbered in that order."""
    vulnerabilities = json.loads(catalog.read_text(encoding="utf-8"))["vulnerabilities"]
    vulnerabilities.sort(key=lambda item: (item["dateAdded"], item["cveID"]))
    incidents = []
    for number, vulnerability in enumerate(vulnerabilities[:limit], start=1):
        cve = vulnerability["cveID"]
        opened = datetime.fromisoformat(vulnerability["dateAdded"]).replace(tzinfo=UTC) + timedelta(seconds=int.from_bytes(_digest(cve)[:3], "big") % 86_400)
        due = datetime.fromisoformat(vulnerability["dueDate"]).replace(tzinfo=UTC) + timedelta(hours=9)
        resolved = due < RESOLVED_BEFORE and _digest("resolved", cve)[0] % 2 == 0
        updated = due if resolved else opened
        ransomware = vulnerability.get("knownRansomwareCampaignUse") == "Known"
        values = {
            "number": f"INC{number:07d}",
            "sys_id": hashlib.md5(cve.encode(), usedforsecurity=False).hexdigest(),
            "short_description": vulnerability["vulnerabilityName"],
            "description": vulnerability["shortDescription"],
            "opened_at": stored(opened),
            "sys_created_on": stored(opened),
            "sys_updated_on": stored(updated),
            "state": "6" if resolved else "2",
            "priority": "1" if ransomware else "3",
            "urgency": "1" if ransomware else "2",
            "impact": "2",
            "category": "security",
            "subcategory": "vulnerability",
            "close_code": "Solved (Permanently)" if resolved else "",
            "close_notes": vulnerability["requiredAction"] if resolved else "",
            "work_notes": "",
            "comments": "",
            "assignment_group": "a715cd759f2002002920bde8132e7018",
            "cmdb_ci": hashlib.md5(vulnerability["product"].encode(), usedforsecurity=False).hexdigest(),
            "resolved_at": stored(due) if resolved else "",
            "closed_at": "",
            "active": "false" if resolved else "true",
            "sys_mod_count": "4" if resolved else "1",
        }
        shown = {
            "opened_at": _shown(opened),
            "sys_created_on": _shown(opened),
            "sys_updated_on": _shown(updated),
            "state": "Resolved" if resolved else "In Progress",
            "priority": "1 - Critical" if ransomware else "3 - Moderate",
            "urgency": "1 - High" if ransomware else "2 - Medium",
            "impact": "2 - Medium",
            "category": "Security",
            "subcategory": "Vulnerability",
            "assignment_group": "Vulnerability Response",
            "cmdb_ci": f"{vulnerability['vendorProject']} {vulnerability['product']}",
            "resolved_at": _shown(due) if resolved else "",
        }
        if resolved:
            shown["work_notes"] = f"{_shown(due)} - Vulnerability Analyst (Work notes)\nPatched on every affected host; CISA due date {vulnerability['dueDate']} met.\n\n"
        incidents.append(Incident(values, shown))
    return incidents


class ServiceNowReplay:
    """The incident table: a handler for `tests.replay.server.serve`. Tests may edit an incident
    (`edit`), break one (`break_incident`: its `opened_at` is no date) or refuse the credentials
    (`tokens.clear()`)."""

    def __init__(self, incidents: list[Incident], *, token: str = "snow-oauth-valid", clock: datetime = datetime(2025, 9, 1, tzinfo=UTC)) -> None:
        self.incidents = {incident.values["sys_id"]: incident for incident in incidents}
        self.tokens = {token}
        self.users = {"goldenset.reader": "s3cret-Passw0rd"}
        self.clock = clock
        self._lock = threading.Lock()

    def edit(self, sys_id: str, *, short_description: str, at: datetime) -> None:
        """Change an incident's short description at `at` (its update time moves there)."""
        with self._lock:
            incident = self.incidents[sys_id]
            incident.values.update(short_description=short_description, sys_updated_on=stored(at), sys_mod_count=str(int(incident.values["sys_mod_count"]) + 1))
            incident.shown["sys_updated_on"] = _shown(at)

    def break_incident(self, sys_id: str) -> None:
        with self._lock:
            self.incidents[sys_id].broken = True

    def ordered(self) -> list[Incident]:
        return sorted(self.incidents.values(), key=lambda incident: (incident.values["sys_updated_on"], incident.values["sys_id"]))

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            accepted = {f"Bearer {token}" for token in self.tokens} | {f"Basic {base64.b64encode(f'{user}:{secret}'.encode()).decode()}" for user, secret in self.users.items()}
            if request.headers.get("authorization") not in accepted:
                return error(401, "User Not Authenticated", "Required to provide Auth information")
            if request.path != "/api/now/table/incident":
                table = request.path.rsplit("/", 1)[-1]
                return error(400, f"Invalid table {table}", None)
            try:
                limit = int(request.param("sysparm_limit", "10000") or 10000)
                offset = int(request.param("sysparm_offset", "0") or 0)
                if limit < 1 or offset < 0:
                    raise ValueError("negative or empty page")
            except ValueError:
                return error(400, "Invalid parameter", "sysparm_limit and sysparm_offset must be non-negative integers")
            selected = self._select(request.param("sysparm_query", "") or "")
            page = selected[offset : offset + limit]
            display = request.param("sysparm_display_value", "false")
            records = [self._shape(incident, display) for incident in page]
            return Reply(json={"result": records}, headers={"X-Total-Count": str(len(selected)), "Link": self._links(request, offset, limit, len(selected))})

    def _select(self, query: str) -> list[Incident]:
        clauses, order = [], []
        for clause in re.split(r"\^", query) if query else []:
            sorting = _ORDER.match(clause)
            if sorting:
                order.append((sorting.group(2), bool(sorting.group(1))))
                continue
            match = _CLAUSE.match(clause)
            if match and match.group(1).split(".")[0] in FIELDS:  # an unknown field: ignored, as ServiceNow does
                clauses.append((match.group(1), match.group(2), match.group(3)))
        selected = [incident for incident in self.incidents.values() if all(_holds(incident.values.get(name, ""), op, value) for name, op, value in clauses)]
        for name, descending in reversed(order or [("sys_id", False)]):
            selected.sort(key=lambda incident, name=name: incident.values.get(name, ""), reverse=descending)  # type: ignore[misc]
        return selected

    @staticmethod
    def _shape(incident: Incident, display: str | None) -> dict[str, Any]:
        rendered = incident.render()
        if display == "all":
            return rendered
        if display == "true":
            return {name: field["display_value"] for name, field in rendered.items()}
        return {name: field["value"] for name, field in rendered.items()}

    @staticmethod
    def _links(request: Request, offset: int, limit: int, total: int) -> str:
        host = request.headers.get("host", "127.0.0.1")
        params = {name: values[0] for name, values in request.query.items()}

        def url(at: int) -> str:
            return f"http://{host}{request.path}?{urlencode({**params, 'sysparm_offset': at, 'sysparm_limit': limit})}"

        last = max(0, (total - 1) // limit * limit)
        links = [f'<{url(0)}>;rel="first"']
        if offset + limit < total:
            links.append(f'<{url(offset + limit)}>;rel="next"')
        links.append(f'<{url(last)}>;rel="last"')
        return ",".join(links)


def _holds(stored_value: str, op: str, value: str) -> bool:
    if op == "=":
        return stored_value == value
    if op == "!=":
        return stored_value != value
    if op == ">=":
        return stored_value >= value
    if op == "<=":
        return stored_value <= value
    if op == ">":
        return stored_value > value
    return stored_value < value
