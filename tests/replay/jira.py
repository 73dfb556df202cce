"""A replay of Jira's REST search (v2 `startAt` paging and v3 `nextPageToken` paging) serving the
Hadoop bug reports of ../shared/data/gitbugs_hadoop in Jira's documented issue shape."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.replay.server import Reply, Request

JIRA_TIME = "%Y-%m-%dT%H:%M:%S.000+0000"
_UPDATED_CLAUSE = re.compile(r'updated >= "(\d{4}/\d{2}/\d{2} \d{2}:\d{2})"')
MAX_RESULTS = 100
_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
# Jira Cloud's answers (errorMessages) to a removed search endpoint (410) and an unbounded query (400).
REMOVED = (
    "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. "
    "A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046"
)
UNBOUNDED = "Unbounded JQL queries are not allowed here. Please add a search restriction to your query."


def jira_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime(JIRA_TIME)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def hadoop_issues(reports: Path) -> list[dict[str, Any]]:
    """One Jira issue per report: key HADOOP-<id>, created = the report's `created`, updated =
    its `resolved` (or `created`)."""
    issues = []
    for line in reports.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        created = _parse(report["created"])
        resolved = _parse(report["resolved"]) if report.get("resolved") else None
        versions = [{"name": name.strip()} for name in (report.get("affects_versions") or "").split(",") if name.strip()]
        issues.append(
            {
                "expand": "operations,versionedRepresentations,editmeta,changelog,renderedFields",
                "id": report["id"],
                "key": f"HADOOP-{report['id']}",
                "fields": {
                    "summary": report["title"],
                    "description": report.get("description") or None,
                    "created": jira_time(created),
                    "updated": jira_time(resolved or created),
                    "status": {"name": report.get("status") or "Open"},
                    "priority": {"name": report.get("priority") or "Major"},
                    "resolution": {"name": report["resolution"]} if report.get("resolution") else None,
                    "resolutiondate": jira_time(resolved) if resolved else None,
                    "labels": [],
                    "issuetype": {"name": "Bug"},
                    "versions": versions,
                    "components": [],
                },
            }
        )
    return issues


def adf(text: str) -> dict[str, Any]:
    """`text` as an Atlassian Document Format document, one paragraph per line."""
    return {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [{"type": "text", "text": line}]} for line in text.splitlines() if line]}


@dataclass
class JiraReplay:
    """Jira search over `issues`. Tests may change `issues` (edits), `token` and `expired`."""

    issues: list[dict[str, Any]]
    token: str = "jira-pat-valid"
    expired: bool = False
    # A Cloud site: the search endpoints Atlassian removed in 2025 answer 410 Gone.
    cloud: bool = False
    requests_seen: int = 0
    broken_keys: set[str] = field(default_factory=set)

    def edit(self, key: str, *, summary: str, updated: datetime) -> None:
        for issue in self.issues:
            if issue["key"] == key:
                issue["fields"] = {**issue["fields"], "summary": summary, "updated": jira_time(updated)}
                return
        raise KeyError(key)

    def _matching(self, jql: str) -> list[dict[str, Any]]:
        match = _UPDATED_CLAUSE.search(jql)
        selected = self.issues
        if match:
            since = datetime.strptime(match.group(1), "%Y/%m/%d %H:%M").replace(tzinfo=UTC)
            selected = [issue for issue in selected if datetime.strptime(issue["fields"]["updated"], JIRA_TIME).replace(tzinfo=UTC) >= since]
        return sorted(selected, key=lambda issue: (issue["fields"]["updated"], issue["key"]))

    def _render(self, issue: dict[str, Any], request: Request, api: str) -> dict[str, Any]:
        fields = dict(issue["fields"])
        if issue["key"] in self.broken_keys:
            fields["created"] = "not a date"
        if api == "v3" and isinstance(fields.get("description"), str):
            fields["description"] = adf(fields["description"])
        return {**issue, "self": f"http://{request.headers.get('host')}/rest/api/2/issue/{issue['id']}", "fields": fields}

    def __call__(self, request: Request) -> Reply:
        self.requests_seen += 1
        if self.expired or request.headers.get("authorization") != f"Bearer {self.token}":
            return Reply(401, json={"errorMessages": ["You are not authenticated. Authentication required to perform this operation."], "errors": {}})
        jql = request.param("jql", "") or ""
        if self.cloud and request.path in ("/rest/api/2/search", "/rest/api/3/search"):
            return Reply(410, json={"errorMessages": [REMOVED], "errors": {}})
        if request.path == "/rest/api/3/search/jql" and not _ORDER_BY.split(jql)[0].strip():
            # Cloud's enhanced search refuses a query without a restriction.
            return Reply(400, json={"errorMessages": [UNBOUNDED], "errors": {}})
        limit = min(int(request.param("maxResults", "50") or 50), MAX_RESULTS)
        matching = self._matching(jql)
        if request.path == "/rest/api/2/search":
            start = int(request.param("startAt", "0") or 0)
            page = matching[start : start + limit]
            body = {"expand": "schema,names", "startAt": start, "maxResults": limit, "total": len(matching), "issues": [self._render(i, request, "v2") for i in page]}
            return Reply(json=body)
        if request.path == "/rest/api/3/search/jql":
            token = request.param("nextPageToken")
            start = int(base64.urlsafe_b64decode(token.encode()).decode()) if token else 0
            page = matching[start : start + limit]
            is_last = start + limit >= len(matching)
            body = {"issues": [self._render(i, request, "v3") for i in page], "isLast": is_last}
            if not is_last:
                body["nextPageToken"] = base64.urlsafe_b64encode(str(start + limit).encode()).decode()
            return Reply(json=body)
        return Reply(404, json={"errorMessages": [f"no route {request.path}"]})
