"""A replay of GitHub's REST issue list (`GET /repos/{owner}/{repo}/issues`) in its documented shape.

Issues are built from the real Apache Hadoop reports in `gitbugs_hadoop/reports.jsonl` (title,
description, dates, status, priority, resolution, affected version), numbered in `created` order
with pull requests interleaved as GitHub lists them. The replay honours `state`, `labels`, `sort`,
`direction`, `since` (updated_at >= since), `per_page` and `page`, answers `Link` headers with
absolute `next`/`last`/`first`/`prev` URLs, checks the bearer token (401 "Bad credentials"), and
keeps a real rate-limit window (`X-RateLimit-*` headers, 403 "API rate limit exceeded" while it is
spent) on a clock the test controls. Tests edit issues mid-pull, break one, revoke the token or
spend the window through `before` hooks run by request number (the numbering of `serve` faults).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.replay.server import Fault, ReplayServer, Reply, Request, serve

TOKEN = "ghp_replayToken0123456789abcdefABCDEF0123"
DOCS_ISSUES = "https://docs.github.com/rest/issues/issues#list-repository-issues"
DOCS_RATE_LIMIT = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
ISO = "%Y-%m-%dT%H:%M:%SZ"
NULL_LINKS_EVERY = 9
def links_a_pull_request(issue: dict[str, Any]) -> bool:
    """Whether an issues-list entry is a pull request: its `pull_request` object holds a link."""
    links = issue.get("pull_request")
    return isinstance(links, dict) and any(value for name, value in links.items() if name.endswith("url"))


_STATE_REASON = {
    "Fixed": "completed",
    "Done": "completed",
    "Implemented": "completed",
    "Resolved": "completed",
    "Workaround": "completed",
    "Information Provided": "completed",
    "Duplicate": "duplicate",
}


def iso(moment: datetime | float) -> str:
    """GitHub's timestamp spelling: UTC to the second with a `Z`."""
    value = datetime.fromtimestamp(moment, tz=UTC) if isinstance(moment, float | int) else moment.astimezone(UTC)
    return value.strftime(ISO)


def _jira_time(text: str, *, shift_seconds: int = 0) -> str:
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return iso(moment.timestamp() + shift_seconds)


def _parse(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _color(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:6]


def _label(name: str) -> dict[str, Any]:
    label_id = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    return {"id": label_id, "node_id": f"LA_kwDO{label_id:010d}", "name": name, "color": _color(name), "default": name == "bug", "description": None}


def _user(seed: str) -> dict[str, Any]:
    number = int(hashlib.sha256(seed.encode()).hexdigest()[:6], 16) % 97
    return {"login": f"hadoop-contributor-{number}", "id": 5_000_000 + number, "node_id": f"U_kgDO{number:08d}", "type": "User", "site_admin": False}


class GitHubReplay:
    """The issues of one repository, served as GitHub's REST API serves them.

    `clock` gives epoch seconds (the rate-limit window and the time of edits); pass the test's
    virtual clock so waiting for a reset advances it without sleeping.
    """

    def __init__(
        self,
        issues: list[dict[str, Any]],
        *,
        owner: str = "apache",
        repo: str = "hadoop",
        token: str = TOKEN,
        clock: Callable[[], float] = time.time,
        rate_limit: int = 5000,
        rate_window_seconds: int = 3600,
    ) -> None:
        self.issues: dict[int, dict[str, Any]] = {issue["number"]: issue for issue in issues}
        self.owner, self.repo = owner, repo
        self.tokens: set[str] = {token}
        self.clock = clock
        self.rate_limit = rate_limit
        self.rate_window_seconds = rate_window_seconds
        self.remaining = rate_limit
        self.reset_at = int(clock()) + rate_window_seconds
        self.before: dict[int, Callable[[], None]] = {}
        """Hooks run before answering the n-th request (1-based over all requests, like faults)."""
        self.served: dict[int, list[int]] = {}
        """Request number -> the issue numbers its answer listed."""
        self.refused: list[tuple[float, int]] = []
        """(time, reset) of each request refused for the rate limit."""
        self.unauthorised = 0
        self.report_numbers: dict[str, int] = {}
        """Jira report id -> issue number, for replays built from the Hadoop reports."""
        self.server: ReplayServer | None = None
        self._lock = threading.RLock()

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def from_hadoop(cls, reports_path: Path, *, limit: int | None = None, pull_request_every: int = 10, **options: Any) -> GitHubReplay:
        """Issues from the Hadoop reports (oldest `limit` by `created`), numbered in creation order,
        with a pull request in every `pull_request_every`-th number (0: none)."""
        reports = [json.loads(line) for line in reports_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        reports.sort(key=lambda report: (report["created"], report["id"]))
        if limit is not None:
            reports = reports[:limit]
        issues: list[dict[str, Any]] = []
        numbers: dict[str, int] = {}
        milestones: dict[str, int] = {}
        number = 0
        for index, report in enumerate(reports):
            if pull_request_every and index % pull_request_every == pull_request_every - 1:
                number += 1
                issues.append(cls._pull_request(number, report, fixes=number + 1))
            number += 1
            numbers[str(report["id"])] = number
            issues.append(cls._issue(number, report, milestones))
        replay = cls(issues, **options)
        replay.report_numbers = numbers
        return replay

    @staticmethod
    def _issue(number: int, report: dict[str, Any], milestones: dict[str, int]) -> dict[str, Any]:
        resolution = report.get("resolution")
        closed = report.get("status") == "Resolved"
        labels = ["bug", f"priority: {report['priority']}"] + ([f"resolution: {resolution}"] if resolution else [])
        version = (report.get("affects_versions") or "").strip()
        milestone = None
        if version:
            milestone_number = milestones.setdefault(version, len(milestones) + 1)
            milestone = {
                "id": 9_000_000 + milestone_number,
                "node_id": f"MI_kwDO{milestone_number:08d}",
                "number": milestone_number,
                "title": version,
                "description": f"Affects Hadoop {version}",
                "state": "open",
                "open_issues": 0,
                "closed_issues": 0,
                "due_on": None,
            }
        created = _jira_time(report["created"])
        description = (report.get("description") or "").strip()
        return {
            "id": 2_000_000_000 + number,
            "node_id": f"I_kwDOAB{number:08d}",
            "number": number,
            "title": report["title"],
            "body": description or None,
            "user": _user(str(report["id"])),
            "labels": [_label(name) for name in labels],
            "state": "closed" if closed else "open",
            "state_reason": (_STATE_REASON.get(resolution or "", "not_planned") if closed else ("reopened" if report.get("status") == "Reopened" else None)),
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": milestone,
            "comments": len(description) % 7,
            "created_at": created,
            "updated_at": _jira_time(report["resolved"]) if report.get("resolved") else created,
            "closed_at": _jira_time(report["resolved"]) if closed and report.get("resolved") else None,
            "author_association": "CONTRIBUTOR",
            "active_lock_reason": None,
            # Older answers (v3 before 2014) carried the key on plain issues too, every link null.
            **({"pull_request": {"html_url": None, "diff_url": None, "patch_url": None}} if number % NULL_LINKS_EVERY == 0 else {}),
        }

    @staticmethod
    def _pull_request(number: int, report: dict[str, Any], *, fixes: int) -> dict[str, Any]:
        created = _jira_time(report["created"], shift_seconds=3600)
        merged = _jira_time(report["resolved"], shift_seconds=-600) if report.get("resolved") else None
        return {
            "id": 2_000_000_000 + number,
            "node_id": f"PR_kwDOAB{number:08d}",
            "number": number,
            "title": f"Fix: {report['title']}",
            "body": f"Fixes #{fixes}.",
            "user": _user(f"pr-{report['id']}"),
            "labels": [_label("pull request")],
            "state": "closed" if merged else "open",
            "state_reason": None,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": 1,
            "created_at": created,
            "updated_at": merged or created,
            "closed_at": merged,
            "author_association": "CONTRIBUTOR",
            "active_lock_reason": None,
            "draft": False,
            "pull_request": {
                "url": f"https://api.github.com/repos/apache/hadoop/pulls/{number}",
                "html_url": f"https://github.com/apache/hadoop/pull/{number}",
                "diff_url": f"https://github.com/apache/hadoop/pull/{number}.diff",
                "patch_url": f"https://github.com/apache/hadoop/pull/{number}.patch",
                "merged_at": merged,
            },
        }

    # -- what tests look at and change -----------------------------------------------------------

    @property
    def pull_request_numbers(self) -> set[int]:
        return {number for number, issue in self.issues.items() if links_a_pull_request(issue)}

    @property
    def issue_numbers(self) -> set[int]:
        """Plain issues, those whose `pull_request` key has only null links among them."""
        return {number for number, issue in self.issues.items() if not links_a_pull_request(issue)}

    def ordered(self) -> list[dict[str, Any]]:
        """Every issue and pull request as `sort=updated&direction=asc` lists them."""
        with self._lock:
            return sorted(self.issues.values(), key=lambda issue: (_parse(issue["updated_at"]), issue["number"]))

    def edit(self, number: int, **changes: Any) -> dict[str, Any]:
        """Change an issue now: its fields, and `updated_at` to the clock's second."""
        with self._lock:
            issue = self.issues[number]
            issue.update(changes)
            issue["updated_at"] = iso(float(self.clock()))
            return issue

    def break_record(self, number: int, field: str = "created_at", value: Any = "not a date") -> None:
        """Corrupt one field of one issue (its `updated_at` stays readable)."""
        with self._lock:
            self.issues[number][field] = value

    def expire_token(self) -> None:
        """Every token issued so far stops working (answers 401)."""
        with self._lock:
            self.tokens.clear()

    def grant(self, token: str) -> None:
        with self._lock:
            self.tokens.add(token)

    def exhaust(self, reset_in: int) -> int:
        """Spend the rate-limit window now; it resets `reset_in` seconds from now. Returns the reset."""
        with self._lock:
            self.remaining = 0
            self.reset_at = int(self.clock()) + reset_in
            return self.reset_at

    def rate_limit_headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_at),
            "X-RateLimit-Used": str(self.rate_limit - self.remaining),
            "X-RateLimit-Resource": "core",
        }

    @contextmanager
    def serve(self, faults: dict[int, Fault] | None = None) -> Iterator[ReplayServer]:
        with serve(self.handle, faults) as server:
            self.server = server
            try:
                yield server
            finally:
                self.server = None

    # -- answering ---------------------------------------------------------------------------------

    def _request_number(self, request: Request) -> int:
        if self.server is None:
            return 0
        return next((index for index, seen in enumerate(list(self.server.requests), start=1) if seen is request), 0)

    def handle(self, request: Request) -> Reply:
        number = self._request_number(request)
        with self._lock:
            hook = self.before.pop(number, None)
        if hook is not None:
            hook()
        with self._lock:
            return self._answer(request, number)

    def _answer(self, request: Request, number: int) -> Reply:
        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() not in ("bearer", "token") or token not in self.tokens:
            self.unauthorised += 1
            return Reply(401, json={"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})
        now = self.clock()
        if now >= self.reset_at:
            self.remaining, self.reset_at = self.rate_limit, int(now) + self.rate_window_seconds
        if self.remaining <= 0:
            self.refused.append((now, self.reset_at))
            message = "API rate limit exceeded for user ID 5000001. If you reach out to GitHub Support for help, please include the request ID 0000:1111:2222:3333:4444."
            return Reply(403, json={"message": message, "documentation_url": DOCS_RATE_LIMIT, "status": "403"}, headers=self.rate_limit_headers())
        self.remaining -= 1
        headers = self.rate_limit_headers()
        if request.path != f"/repos/{self.owner}/{self.repo}/issues":
            return Reply(404, json={"message": "Not Found", "documentation_url": DOCS_ISSUES, "status": "404"}, headers=headers)
        try:
            listed, page, last_page, per_page = self._list(request)
        except ValueError as exc:
            return Reply(422, json={"message": "Validation Failed", "errors": [{"message": str(exc)}], "documentation_url": DOCS_ISSUES, "status": "422"}, headers=headers)
        self.served[number] = [issue["number"] for issue in listed]
        host = request.headers.get("host", "127.0.0.1")
        links = self._links(request, host, page, last_page, per_page)
        if links:
            headers["Link"] = links
        return Reply(200, json=[self.render(issue, host) for issue in listed], headers=headers)

    def _list(self, request: Request) -> tuple[list[dict[str, Any]], int, int, int]:
        state = request.param("state", "open")
        if state not in ("open", "closed", "all"):
            raise ValueError(f"state {state!r} is not one of open, closed, all")
        sort = request.param("sort", "created")
        if sort not in ("created", "updated", "comments"):
            raise ValueError(f"sort {sort!r} is not one of created, updated, comments")
        direction = request.param("direction", "desc")
        if direction not in ("asc", "desc"):
            raise ValueError(f"direction {direction!r} is not one of asc, desc")
        since_text = request.param("since")
        since = _parse(since_text.replace("Z", "+00:00")) if since_text else None
        per_page = max(1, min(100, int(request.param("per_page", "30") or "30")))
        page = max(1, int(request.param("page", "1") or "1"))
        wanted_labels = {name.strip() for name in (request.param("labels") or "").split(",") if name.strip()}
        selected = []
        for issue in self.issues.values():
            if state != "all" and issue["state"] != state:
                continue
            if since is not None and _parse(issue["updated_at"]) < since:
                continue
            if wanted_labels and not wanted_labels <= {label["name"] for label in issue["labels"]}:
                continue
            selected.append(issue)

        def key(issue: dict[str, Any]) -> tuple[Any, int]:
            if sort == "comments":
                return issue["comments"], issue["number"]
            return _parse(issue[f"{sort}_at"]), issue["number"]

        selected.sort(key=key, reverse=direction == "desc")
        last_page = max(1, -(-len(selected) // per_page))
        return selected[(page - 1) * per_page : page * per_page], page, last_page, per_page

    @staticmethod
    def _links(request: Request, host: str, page: int, last_page: int, per_page: int) -> str:
        query = {name: values[0] for name, values in request.query.items() if values}
        query["per_page"] = str(per_page)

        def url(target: int) -> str:
            return f"http://{host}{request.path}?{urlencode({**query, 'page': str(target)})}"

        links = []
        if page < last_page:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last_page)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return ", ".join(links)

    def render(self, issue: dict[str, Any], host: str) -> dict[str, Any]:
        api = f"http://{host}/repos/{self.owner}/{self.repo}"
        number = issue["number"]
        kind = "pull" if links_a_pull_request(issue) else "issues"
        rendered = {
            "url": f"{api}/issues/{number}",
            "repository_url": api,
            "labels_url": f"{api}/issues/{number}/labels{{/name}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "events_url": f"{api}/issues/{number}/events",
            "html_url": f"https://github.com/{self.owner}/{self.repo}/{kind}/{number}",
            **json.loads(json.dumps(issue)),
        }
        rendered["labels"] = [{**label, "url": f"{api}/labels/{label['name'].replace(' ', '%20')}"} for label in issue["labels"]]
        if links_a_pull_request(issue):
            rendered["pull_request"] = {
                **issue["pull_request"],
                "url": f"{api}/pulls/{number}",
                "html_url": f"https://github.com/{self.owner}/{self.repo}/pull/{number}",
                "diff_url": f"https://github.com/{self.owner}/{self.repo}/pull/{number}.diff",
                "patch_url": f"https://github.com/{self.owner}/{self.repo}/pull/{number}.patch",
            }
        return rendered
