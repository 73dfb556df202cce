"""A replay of Sentry's organization issues API in its published shapes (see
tests/replay/vendor/SOURCES.md): `GET /api/0/organizations/{org}/issues/` with `query`
(`firstSeen:>=<time>`), `sort=new` (newest first: Sentry has no ascending order), `start`/`end`
(both or neither; only issues seen in the window), `limit` clamped to 100, cursors in `Link`
headers whose last `rel="next"` says `results="false"`, the comments of an issue, bearer tokens,
`{"detail": ...}` errors and the `X-Sentry-Rate-Limit-*` headers.

Issues are the Hadoop reports whose description holds an exception (../shared/data/gitbugs_hadoop):
first seen when reported, last seen when resolved (or a day later); resolved ones in the release
they affect, with a comment naming their resolution.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.replay.server import Reply, Request

ORG = "hadoop-ops"
_FIRST_SEEN = re.compile(r"firstSeen:>=(\S+)")
_COMMENTS = re.compile(rf"^/api/0/organizations/{ORG}/issues/(\d+)/comments/$")
_EXCEPTION = re.compile(r"([\w.$]+(?:Exception|Error))(?::\s*([^\n]{0,200}))?")


def sentry_iso(moment: datetime) -> str:
    """Sentry's REST spelling: milliseconds and `Z`, no fraction when they are zero."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    milliseconds = moment.microsecond // 1000
    return f"{text}.{milliseconds:03d}Z" if milliseconds else f"{text}Z"


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def detail(status: int, text: str) -> Reply:
    return Reply(status, json={"detail": text})


@dataclass
class Issue:
    data: dict[str, Any]
    comments: list[dict[str, Any]] = field(default_factory=list)
    broken: bool = False

    @property
    def first_seen(self) -> datetime:
        return _parse(self.data["firstSeen"])

    @property
    def last_seen(self) -> datetime:
        return _parse(self.data["lastSeen"])


def hadoop_issues(reports: Path) -> list[Issue]:
    issues: list[Issue] = []
    for line in reports.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        found = _EXCEPTION.search(report.get("description") or "")
        if found is None:
            continue
        number = len(issues) + 1
        first = datetime.fromisoformat(report["created"]).replace(tzinfo=UTC) + timedelta(milliseconds=int(report["id"]) % 1000)
        resolved = datetime.fromisoformat(report["resolved"]).replace(tzinfo=UTC) if report.get("resolved") and report.get("resolution") == "Fixed" else None
        release = (report.get("affects_versions") or "").split(",")[0].strip()
        exception_type = found.group(1).rsplit(".", 1)[-1]
        issue = Issue(
            {
                "id": str(4_000_000 + number),
                "shareId": None,
                "shortId": f"HADOOP-{number:X}",
                "title": f"{exception_type}: {(found.group(2) or report['title']).strip()[:120]}",
                "culprit": report["title"][:120],
                "permalink": f"https://{ORG}.sentry.io/issues/{4_000_000 + number}/",
                "logger": None,
                "level": "fatal" if report.get("priority") in ("Blocker", "Critical") else "error",
                "status": "resolved" if resolved else "unresolved",
                "statusDetails": {"inRelease": release} if resolved and release else ({"inNextRelease": True} if resolved else {}),
                "substatus": None if resolved else "ongoing",
                "isPublic": False,
                "platform": "java",
                "priority": "high",
                "project": {"id": "2", "name": "Hadoop", "slug": "hadoop", "platform": "java"},
                "type": "error",
                "issueType": "error",
                "issueCategory": "error",
                "metadata": {"type": exception_type, "value": (found.group(2) or "").strip()[:200], "filename": "", "function": ""},
                "numComments": 1 if resolved else 0,
                "assignedTo": None,
                "isBookmarked": False,
                "isSubscribed": False,
                "hasSeen": bool(resolved),
                "annotations": [],
                "isUnhandled": True,
                "count": str(1 + int(report["id"]) % 97),
                "userCount": int(report["id"]) % 13,
                "firstSeen": sentry_iso(first),
                "lastSeen": sentry_iso(resolved or first + timedelta(days=1)),
                "stats": {"24h": []},
            }
        )
        if resolved:
            note = {"text": f"Fixed upstream in HADOOP-{report['id']}."}
            issue.comments.append({"id": str(90_000 + number), "type": "note", "data": note, "dateCreated": sentry_iso(resolved), "user": None})
        issues.append(issue)
    return issues


class SentryReplay:
    """An organization's issues: a handler for `tests.replay.server.serve`. Tests may edit an
    issue (`edit`), break one (`broken`: its `firstSeen` is no time) or refuse the token (`tokens.clear()`)."""

    def __init__(self, issues: list[Issue], *, token: str = "sntryu_replay0123456789abcdef", clock: datetime) -> None:
        self.issues = {issue.data["id"]: issue for issue in issues}
        self.tokens = {token}
        self.clock = clock
        self._lock = threading.Lock()

    def edit(self, issue_id: str, *, title: str) -> None:
        with self._lock:
            self.issues[issue_id].data["title"] = title

    def __call__(self, request: Request) -> Reply:
        with self._lock:
            if request.headers.get("authorization") not in {f"Bearer {token}" for token in self.tokens}:
                return detail(401, "Invalid token")
            comments = _COMMENTS.match(request.path)
            if comments:
                issue = self.issues.get(comments.group(1))
                if issue is None:
                    return detail(404, "The requested resource does not exist")
                return self._page(request, list(reversed(issue.comments)), lambda comment: 0)
            if request.path != f"/api/0/organizations/{ORG}/issues/":
                return detail(404, "The requested resource does not exist")
            return self._issues(request)

    def _issues(self, request: Request) -> Reply:
        start, end = request.param("start"), request.param("end")
        if (start is None) != (end is None):
            return detail(400, "start and end are both required")
        window_start = _parse(start) if start else self.clock - timedelta(days=90)
        window_end = _parse(end) if end else self.clock
        if window_start >= window_end:
            return detail(400, "start must be before end")
        if request.param("sort", "date") != "new":
            return detail(400, "this replay serves sort=new only")
        first_seen = _FIRST_SEEN.search(request.param("query", "is:unresolved") or "")
        since = _parse(first_seen.group(1)) if first_seen else None
        selected = [
            issue
            for issue in self.issues.values()
            if (since is None or issue.first_seen >= since) and window_start <= issue.last_seen <= window_end + timedelta(days=3650) and issue.first_seen <= window_end
        ]
        selected.sort(key=lambda issue: (issue.first_seen, issue.data["id"]), reverse=True)
        return self._page(request, selected, lambda issue: int(issue.first_seen.timestamp() * 1000))

    def _page(self, request: Request, items: list[Any], score: Any) -> Reply:
        limit = min(100, int(request.param("limit", "100") or 100))
        cursor = request.param("cursor") or "0:0:0"
        try:
            offset = int(cursor.split(":")[1])
        except (IndexError, ValueError):
            return detail(400, "Invalid cursor parameter.")
        page = items[offset : offset + limit]
        rendered = [self._render(item) for item in page]
        base = f"http://{request.headers.get('host')}{request.path}?&"
        following = f"{score(items[offset + limit]) if offset + limit < len(items) else 0}:{offset + limit}:0"
        previous = f"0:{max(0, offset - limit)}:1"
        link = (
            f'<{base}cursor={previous}>; rel="previous"; results="{"true" if offset else "false"}"; cursor="{previous}", '
            f'<{base}cursor={following}>; rel="next"; results="{"true" if offset + limit < len(items) else "false"}"; cursor="{following}"'
        )
        reset = int(self.clock.timestamp()) + 1
        headers = {"Link": link, "X-Hits": str(len(items)), "X-Sentry-Rate-Limit-Limit": "40", "X-Sentry-Rate-Limit-Remaining": "39", "X-Sentry-Rate-Limit-Reset": str(reset)}
        return Reply(json=rendered, headers=headers)

    @staticmethod
    def _render(item: Any) -> Any:
        if isinstance(item, Issue):
            data = json.loads(json.dumps(item.data))
            if item.broken:
                data["firstSeen"] = "before the logs began"
            return data
        return item
