"""GitHub: issues updated since the cursor, through the REST issues list of one repository.

Pages `GET /repos/{owner}/{repo}/issues?state=all&sort=updated&direction=asc&since=...` and follows
the `Link: rel="next"` header; github.com and GitHub Enterprise Server (`base_url` ending in
`/api/v3`) alike. Auth is a bearer token (fine-grained or classic personal access token, or a
GitHub App installation token) with read access to issues. The list also returns pull requests
(objects whose `pull_request` object links the pull request; older answers carry the key on plain
issues too, with every link null): they are skipped unless `include_pull_requests` is set, and
the cursor moves past them either way, so turning that option on later needs `reset_cursor`.

`since` is inclusive and compared to the second, so the cursor is `updated_at` to the second plus
the issue numbers seen at that second (see `keyset`), and every page that moves the cursor starts a
fresh `since` query. `next` links are only followed while more issues share one second than fit on
a page; as an edit meanwhile slides issues under the page offset, such a second is read again
(until a reading finds nothing new) before the cursor moves past it.

Rate limits are honoured: a 403 or 429 with `X-RateLimit-Remaining: 0` waits until
`X-RateLimit-Reset`, one with `Retry-After` waits that long, a secondary rate limit without either
waits a minute, and a successful answer that spent the window waits for its reset before the next
request. A 401 is an expired or wrong token (`AuthError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx
from pydantic import Field, SecretStr, field_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, ConnectorContext, MalformedPage, Page
from ingest.connectors.http import json_body, send
from ingest.connectors.keyset import KeysetCursor, SearchPage, walk
from ingest.http import retry_after_seconds
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "GitHub"
API_VERSION = "2022-11-28"
SINCE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# Seconds added to a rate-limit reset: the reset is a whole epoch second and clocks drift.
RESET_MARGIN_SECONDS = 1.0
# GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
SECONDARY_LIMIT_WAIT_SECONDS = 60.0
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def is_pull_request(issue: object) -> bool:
    """Whether an issues-list entry is a pull request: its `pull_request` object links one. Older
    answers carry `"pull_request": {"html_url": null, "diff_url": null, "patch_url": null}` on plain
    issues, so the key alone does not tell."""
    if not isinstance(issue, dict):
        return False
    links = issue.get("pull_request")
    return isinstance(links, dict) and any(links.get(name) for name in ("url", "html_url", "diff_url", "patch_url"))


class GitHubConfig(ConnectorConfig):
    owner: str = Field(description="Owner of the repository (user or organisation), e.g. apache.")
    repo: str = Field(description="Repository name, e.g. hadoop.")
    token: SecretStr = Field(description="Token with read access to the repository's issues; sent as a bearer token.")
    base_url: BaseUrl = Field(default="https://api.github.com", description="API root; for GitHub Enterprise Server https://HOST/api/v3.")
    labels: list[str] = Field(default_factory=list, description="Only issues carrying every one of these labels.")
    per_page: int = Field(default=100, ge=1, le=100)
    include_pull_requests: bool = Field(default=False, description="Also store pull requests (GitHub lists them with the issues).")

    @field_validator("owner", "repo")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not _NAME.fullmatch(value) or value in (".", ".."):
            raise ValueError("use the name as in the repository URL: letters, digits, '-', '_' or '.'")
        return value

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: list[str]) -> list[str]:
        names = [name.strip() for name in value]
        if any(not name for name in names):
            raise ValueError("label names must not be empty")
        if any("," in name for name in names):
            raise ValueError("GitHub's label filter is comma-separated: a label name with a comma cannot be filtered on")
        return names


class GitHubConnector(Connector[GitHubConfig]):
    kind: ClassVar[str] = "github"
    config_model: ClassVar[type[ConnectorConfig]] = GitHubConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "number",
        "occurred_at": "created_at",
        "version": "updated_at",
        "title": "title",
        "input": "{{ title }}{% if body %}\n\n{{ body }}{% endif %}",
        "reference": (
            "{% if state == 'closed' %}Closed{% if state_reason %} as {{ state_reason | replace('_', ' ') }}{% endif %}{% if closed_at %} ({{ closed_at }}){% endif %}{% endif %}"
        ),
        "metadata": {
            "html_url": "html_url",
            "state": "state",
            "state_reason": "state_reason",
            "author": "user.login",
            "comments": "comments",
            "closed_at": "closed_at",
            "milestone": "milestone.title",
        },
        "tags": "label_names",
        "required": ["title"],
    }

    def __init__(self, config: GitHubConfig, context: ConnectorContext) -> None:
        super().__init__(config, context)
        # Epoch second before which no request may be sent (a window whose last request was used).
        self._not_before: float | None = None
        self._read = 0

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.config.token.get_secret_value()}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
        }

    def _rate_limit_delay(self, response: httpx.Response) -> float | None:
        """Seconds until a refused request may be retried, or None when it was not a rate limit."""
        if response.status_code not in (403, 429):
            return None
        asked = retry_after_seconds(response, self.context.clock().timestamp())
        if asked is not None:
            # A Retry-After is a delay as given; a reset is a whole epoch second and clocks drift.
            return asked if "retry-after" in response.headers else asked + RESET_MARGIN_SECONDS
        # A spent window that names no reset, or a secondary limit said only in the body.
        if response.headers.get("x-ratelimit-remaining") == "0" or "rate limit" in response.text.lower():
            return SECONDARY_LIMIT_WAIT_SECONDS
        return None

    def _wait_for_window(self) -> None:
        if self._not_before is None:
            return
        wait = self._not_before - self.context.clock().timestamp()
        self._not_before = None
        if wait > 0:
            self.context.sleep(min(wait, self.context.retry.max_wait_seconds))

    def _get(self, url: str, params: dict[str, Any] | None) -> tuple[list[Any], str | None]:
        """One page of the issue list: (its entries, the URL of the next page if any)."""
        self._wait_for_window()
        response = send(self.context, "GET", url, params=params, headers=self._headers(), rate_limit_delay=self._rate_limit_delay, vendor=VENDOR)
        # A successful answer that spent the window: wait for its reset before the next request.
        now = self.context.clock().timestamp()
        until_reset = retry_after_seconds(response, now) if response.headers.get("x-ratelimit-remaining") == "0" else None
        if until_reset is not None:
            self._not_before = now + until_reset + RESET_MARGIN_SECONDS
        body = json_body(response, vendor=VENDOR)
        if not isinstance(body, list):
            shape = f"an object with keys {sorted(body)[:10]}" if isinstance(body, dict) else type(body).__name__
            raise MalformedPage(f"GitHub issue list answer is not a JSON array (got {shape})")
        next_url = response.links.get("next", {}).get("url")
        if next_url is not None:
            self._check_same_origin(next_url)
        return body, next_url

    def _check_same_origin(self, url: str) -> None:
        """A `next` link elsewhere than the API root would receive the token: refuse it."""
        expected, actual = urlsplit(self.config.base_url), urlsplit(url)
        if (actual.scheme, actual.netloc) != (expected.scheme, expected.netloc):
            raise MalformedPage(f"GitHub's next-page link points to {actual.scheme}://{actual.netloc}, not to {self.config.base_url}; not following it")

    def _first_query(self, since: str | None) -> tuple[str, dict[str, Any]]:
        config = self.config
        params: dict[str, Any] = {"state": "all", "sort": "updated", "direction": "asc", "per_page": config.per_page}
        if config.labels:
            params["labels"] = ",".join(config.labels)
        if since is not None:
            params["since"] = since
        return f"{config.base_url}/repos/{config.owner}/{config.repo}/issues", params

    @staticmethod
    def _boundary(issue: object) -> str | None:
        """`updated_at` to the second in UTC, as `since` takes it; None when it cannot be read."""
        value = issue.get("updated_at") if isinstance(issue, dict) else None
        if not isinstance(value, str):
            return None
        try:
            updated = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        updated = updated.replace(tzinfo=UTC) if updated.tzinfo is None else updated.astimezone(UTC)
        return updated.strftime(SINCE_FORMAT)

    @staticmethod
    def _key(issue: object) -> str:
        if isinstance(issue, dict):
            return str(issue.get("number", issue.get("id")))
        return repr(issue)[:64]

    def _wanted(self, issue: object) -> bool:
        return self.config.include_pull_requests or not is_pull_request(issue)

    def pages(self, cursor: str | None) -> Iterator[Page]:
        """Issues updated since `cursor`, by the keyset walk (`ingest.connectors.keyset.walk`): a
        fresh `since` query whenever the cursor moves, `next` links followed only while more
        issues share the cursor's second than fit on a page."""
        self._read = 0
        for batch in walk(KeysetCursor.loads(cursor), self._search, self._boundary, self._key):
            yield self._page(batch.records, batch.cursor)

    def _search(self, since: str | None, offset: int, token: str | None) -> SearchPage:
        """One page: the first of a `since` query, or the one the previous page's `next` link
        (`token`) names. GitHub reports no total; a page that moved past any issue counts as followed."""
        url, params = (token, None) if token is not None else self._first_query(since)
        issues, next_url = self._get(url, params)
        return SearchPage(records=issues, total=None, is_last=next_url is None, token=next_url, advanced=max(len(issues), 1))

    def _page(self, fresh: list[Any], position: KeysetCursor) -> Page:
        records = []
        for issue in fresh:
            if self._wanted(issue):
                records.append(self._record(issue, self._read))
                self._read += 1
        return Page(records=records, cursor=position.dumps())

    def _record(self, issue: object, index: int) -> RawRecord:
        if not isinstance(issue, dict):
            return RawRecord(index, f"entry {index}", error=RecordRejected("wrong_type", f"expected an issue object, got {type(issue).__name__}"))
        labels = issue.get("labels")
        names: list[str] = []
        if isinstance(labels, list):
            for label in labels:
                name = label.get("name") if isinstance(label, dict) else label
                if isinstance(name, str) and name.strip():
                    names.append(name)
        what = "pull request" if is_pull_request(issue) else "issue"
        return RawRecord(index, f"{what} #{issue.get('number', '?')}", value={**issue, "label_names": names})
