"""Sentry: an organization's issues, dated by when each was first seen, through
`GET /api/0/organizations/{organization}/issues/`.

Sentry lists issues newest first only, pages them with opaque cursors in the `Link` header (the
last page's `rel="next"` says `results="false"`; a short page is not the end, Sentry drops some
rows after paging), and has no "changed since" filter: an issue's `lastSeen` moves with new
events, never with a status change or a comment. So a pull asks for every issue first seen at or
after the mark less `lookback_days` (`query=<filter> firstSeen:>=<time>`, `sort=new`, and a
`start`/`end` window, since Sentry returns only issues seen within one, 90 days when none is
given), reads every page, and moves the mark to the newest `firstSeen` only with the last page:
a pull that dies is read again from the old mark, and issues first seen within the lookback are
read again every pull, so their resolution and comments catch up.

Each issue is handed on with `resolution`, what its `statusDetails` say (resolved in a release,
in a commit, in the next release), and, for a resolved issue, its comments
(`GET .../issues/{id}/comments/`, oldest first), the reference answer. Auth is a bearer token
(`event:read`). A 429 names no `Retry-After`: the wait is `X-Sentry-Rate-Limit-Reset` (epoch seconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import quote

import httpx
from pydantic import Field, SecretStr, field_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, MalformedPage, Page
from ingest.connectors.http import json_body, send
from ingest.connectors.mark import TimeMark
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "Sentry"
_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="(\w+)"\s*;\s*results="(true|false)"\s*;\s*cursor="([^"]*)"')
_SLUG = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$")
RESET_MARGIN_SECONDS = 1.0


class SentryConfig(ConnectorConfig):
    auth_token: SecretStr = Field(description="An auth token with event:read (an organization or user token).")
    organization: str = Field(description="The organization's slug.")
    base_url: BaseUrl = Field(default="https://sentry.io", description="https://de.sentry.io for the EU region, or a self-hosted Sentry's root.")
    projects: list[str] = Field(default_factory=list, description="Project ids or slugs (all the token can read when empty).")
    environments: list[str] = Field(default_factory=list)
    query: str = Field(default="", description="A Sentry search that filters issues, e.g. 'level:error' (every status when empty).")
    start: datetime = Field(default=datetime(2015, 1, 1, tzinfo=UTC), description="Issues first seen from this time on.")
    lookback_days: int = Field(default=14, ge=0, le=90, description="Days before the mark read again by every pull, for resolutions and comments.")
    include_comments: bool = Field(default=True, description="Fetch the comments of resolved issues as their reference answer.")
    page_size: int = Field(default=100, ge=1, le=100, description="Issues per page (Sentry answers at most 100).")

    @field_validator("organization")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _SLUG.match(value):
            raise ValueError(f"{value!r} is not an organization slug")
        return value

    @field_validator("query")
    @classmethod
    def _no_first_seen(cls, value: str) -> str:
        if "firstseen" in value.lower():
            raise ValueError("leave firstSeen out of query: goldenset filters on it itself")
        return value.strip()

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sentry_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def next_cursor(link: str) -> str | None:
    """The `rel="next"` cursor of a Sentry `Link` header when it has results, else None."""
    for _, rel, results, cursor in _LINK.findall(link):
        if rel == "next":
            return cursor if results == "true" else None
    return None


def rate_limit_delay(response: httpx.Response, now: float) -> float | None:
    """Sentry's 429 carries no Retry-After: the window resets at `X-Sentry-Rate-Limit-Reset`."""
    if response.status_code != 429:
        return None
    reset = response.headers.get("x-sentry-rate-limit-reset", "").strip()
    return max(0.0, float(reset) - now) + RESET_MARGIN_SECONDS if reset.isdigit() else None


def resolution(status_details: object) -> str:
    """What an issue's `statusDetails` say of how it was resolved, as a sentence (empty when nothing)."""
    if not isinstance(status_details, dict):
        return ""
    if status_details.get("inRelease"):
        return f"Resolved in release {status_details['inRelease']}."
    commit = status_details.get("inCommit")
    if commit:
        if isinstance(commit, dict):
            commit = commit.get("id") or commit.get("key") or json.dumps(commit, sort_keys=True)
        return f"Resolved in commit {commit}."
    if status_details.get("inNextRelease"):
        return "Resolved in the next release."
    return ""


class SentryConnector(Connector[SentryConfig]):
    kind: ClassVar[str] = "sentry"
    config_model: ClassVar[type[ConnectorConfig]] = SentryConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "id",
        "occurred_at": "firstSeen",
        "title": "title",
        "input": (
            "{{ title }}"
            "{% if culprit %}\n\nIn: {{ culprit }}{% endif %}"
            "{% if metadata.value and metadata.value not in title %}\n{{ metadata.type }}: {{ metadata.value }}{% endif %}"
            "{% if metadata.filename %}\nFile: {{ metadata.filename }}{% if metadata.function %}, in {{ metadata.function }}{% endif %}{% endif %}"
            "\nLevel: {{ level }}; {{ count }} events, {{ userCount }} users"
        ),
        "reference": "{% if resolution %}{{ resolution }}{% endif %}{% if comments %}\n\n{{ comments | join('\n\n') }}{% endif %}",
        "metadata": {
            "short_id": "shortId",
            "status": "status",
            "substatus": "substatus",
            "level": "level",
            "project": "project.slug",
            "permalink": "permalink",
            "last_seen": "lastSeen",
            "events": "count",
        },
        "tags": "tags",
        "required": ["title"],
    }

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.auth_token.get_secret_value()}", "Accept": "application/json"}

    def _get(self, url: str, params: dict[str, Any]) -> httpx.Response:
        now = self.context.clock().timestamp()
        return send(self.context, "GET", url, params=params, headers=self._headers(), rate_limit_delay=lambda response: rate_limit_delay(response, now), vendor=VENDOR)

    def pages(self, cursor: str | None) -> Iterator[Page]:
        config = self.config
        mark = TimeMark.loads(cursor)
        since = max(config.start, mark.since - timedelta(days=config.lookback_days)) if mark.since else config.start
        end = self.context.clock().astimezone(UTC) + timedelta(minutes=1)
        query = " ".join(part for part in (config.query, f"firstSeen:>={sentry_time(since)}") if part)
        params: dict[str, Any] = {"query": query, "sort": "new", "start": sentry_time(since), "end": sentry_time(end), "limit": config.page_size}
        if config.projects:
            params["project"] = list(config.projects)
        if config.environments:
            params["environment"] = list(config.environments)
        url = f"{config.base_url}/api/0/organizations/{quote(config.organization)}/issues/"
        read, page_cursor = 0, None
        while True:
            response = self._get(url, {**params, **({"cursor": page_cursor} if page_cursor else {})})
            issues = json_body(response, vendor=VENDOR)
            if not isinstance(issues, list):
                raise MalformedPage(f"{VENDOR} issues answer is not a list of issues (got {type(issues).__name__})")
            mark.see(issue.get("firstSeen") for issue in issues if isinstance(issue, dict))
            records = [self._record(issue, read + index) for index, issue in enumerate(issues)]
            read += len(issues)
            page_cursor = next_cursor(response.headers.get("link", ""))
            last = page_cursor is None
            # Sentry lists newest first: the mark moves only once every page was read.
            moved = mark.moved() if last else None
            yield Page(records=records, cursor=moved.isoformat() if moved else (cursor or ""))
            if last:
                return

    def _record(self, issue: object, position: int) -> RawRecord:
        if not isinstance(issue, dict):
            return RawRecord(position, f"issue {position}", error=RecordRejected("wrong_type", f"expected an issue object, got {type(issue).__name__}"))
        identifier = issue.get("id")
        locator = f"issue {issue.get('shortId') or identifier}"
        value: dict[str, object] = dict(issue)
        value["resolution"] = resolution(issue.get("statusDetails"))
        resolved = issue.get("status") == "resolved"
        value["comments"] = self._comments(str(identifier)) if resolved and self.config.include_comments and identifier else []
        level, project = issue.get("level"), issue.get("project")
        tags = [f"level:{level}"] if isinstance(level, str) and level else []
        if isinstance(project, dict) and project.get("slug"):
            tags.append(f"project:{project['slug']}")
        value["tags"] = tags
        return RawRecord(position, locator, value=value)

    def _comments(self, issue_id: str) -> list[str]:
        """The texts of an issue's comments, oldest first, across their pages."""
        url = f"{self.config.base_url}/api/0/organizations/{quote(self.config.organization)}/issues/{quote(issue_id, safe='')}/comments/"
        texts: list[tuple[str, str]] = []
        page_cursor: str | None = None
        while True:
            response = self._get(url, {"cursor": page_cursor} if page_cursor else {})
            body = json_body(response, vendor=VENDOR)
            if not isinstance(body, list):
                raise MalformedPage(f"{VENDOR} comments answer of issue {issue_id} is not a list")
            for comment in body:
                data = comment.get("data") if isinstance(comment, dict) else None
                text = data.get("text") if isinstance(data, dict) else None
                if isinstance(text, str) and text.strip():
                    texts.append((str(comment.get("dateCreated") or ""), text.strip()))
            page_cursor = next_cursor(response.headers.get("link", ""))
            if page_cursor is None:
                return [text for _, text in sorted(texts)]
