"""Jira: issues updated since the cursor, through REST search with JQL.

`api: v2` pages `GET /rest/api/2/search` with `startAt`/`maxResults`: Jira Server and Data Center.
`api: v3` pages `GET /rest/api/3/search/jql` with `nextPageToken`: Jira Cloud, whose descriptions
are Atlassian Document Format, flattened to text here. Cloud removed `/rest/api/2/search` and
`/rest/api/3/search` in 2025 (they answer 410 Gone, Atlassian's CHANGE-2046), so `api` left unset
means v3 for a Cloud site (`*.atlassian.net`, `*.jira.com`) and v2 elsewhere, and v2 is refused for
a Cloud site. Cloud's search also refuses an unbounded query (400, "Unbounded JQL queries are not
allowed here"): every query carries a restriction, the cursor's `updated >=` clause or, on a first
pull, `updated >= "1970/01/01 00:00"`. Auth is basic with an email and API token, or a bearer
personal access token. JQL compares dates to the minute in the Jira user's time zone
(`timezone`), so the cursor is kept at that granularity (see `keyset`).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, MalformedPage, Page
from ingest.connectors.http import json_body, send
from ingest.connectors.keyset import KeysetCursor, SearchPage, walk
from ingest.dates import IncidentDateError, parse_incident_date
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

CLOUD_HOSTS = (".atlassian.net", ".jira.com")
# A restriction for a first pull without a filter: Cloud's search refuses a query with none.
EVERYTHING = '1970/01/01 00:00'
DEFAULT_FIELDS = ["summary", "description", "created", "updated", "status", "priority", "resolution", "resolutiondate", "labels", "issuetype", "versions", "components"]
JQL_MINUTE = "%Y/%m/%d %H:%M"


class JiraConfig(ConnectorConfig):
    base_url: BaseUrl = Field(description="Site root, e.g. https://issues.example.com or https://acme.atlassian.net")
    jql: str = Field(default="", description="Extra filter, e.g. 'project = OPS AND issuetype = Incident'.")
    email: str | None = None
    api_token: SecretStr | None = None
    personal_access_token: SecretStr | None = None
    api: Literal["v2", "v3"] | None = Field(default=None, description="v2 (Server, Data Center) or v3 (Cloud); unset: v3 for a Cloud site, v2 elsewhere.")
    page_size: int = Field(default=100, ge=1, le=1000)
    timezone: str = Field(default="UTC", description="The time zone of the Jira user the credentials belong to.")
    fields: list[str] = Field(default_factory=lambda: list(DEFAULT_FIELDS))

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}; use an IANA name such as Europe/Berlin") from exc
        return value

    @field_validator("jql")
    @classmethod
    def _no_order_by(cls, value: str) -> str:
        if "order by" in value.lower():
            raise ValueError("leave ORDER BY out: goldenset orders by updated time itself")
        return value

    @property
    def is_cloud(self) -> bool:
        """Whether `base_url` is a Jira Cloud site."""
        host = (urlsplit(self.base_url).hostname or "").lower()
        return host.endswith(CLOUD_HOSTS)

    @property
    def search_api(self) -> Literal["v2", "v3"]:
        """The search API pulls use: `api`, or when unset, v3 for a Cloud site and v2 elsewhere."""
        if self.api is not None:
            return self.api
        return "v3" if self.is_cloud else "v2"

    @model_validator(mode="after")
    def _cloud_has_no_v2_search(self) -> JiraConfig:
        if self.api == "v2" and self.is_cloud:
            raise ValueError(
                f"{self.base_url} is a Jira Cloud site, which no longer serves /rest/api/2/search (removed in 2025, answering 410 Gone): "
                "use api: v3, or leave api unset"
            )
        return self

    @model_validator(mode="after")
    def _one_auth(self) -> JiraConfig:
        basic = self.email is not None or self.api_token is not None
        if basic and (self.email is None or self.api_token is None):
            raise ValueError("basic auth needs both email and api_token")
        if basic == (self.personal_access_token is not None):
            raise ValueError("give either email + api_token, or personal_access_token")
        return self


def adf_to_text(node: Any) -> str:
    """Plain text of an Atlassian Document Format node (paragraphs and list items on new lines)."""
    if isinstance(node, str):
        return node
    if not isinstance(node, dict):
        return ""
    if node.get("type") == "text":
        return str(node.get("text", ""))
    if node.get("type") == "hardBreak":
        return "\n"
    text = "".join(adf_to_text(child) for child in node.get("content", []) or [])
    if node.get("type") in ("paragraph", "heading", "codeBlock", "listItem", "tableRow", "blockquote"):
        return text.rstrip("\n") + "\n"
    return text


class JiraConnector(Connector[JiraConfig]):
    kind: ClassVar[str] = "jira"
    config_model: ClassVar[type[ConnectorConfig]] = JiraConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "key",
        "occurred_at": "fields.created",
        "version": "fields.updated",
        "title": "fields.summary",
        "input": "{{ fields.summary }}\n\n{{ fields.description }}",
        "reference": (
            "{% if fields.resolution %}Resolution: {{ fields.resolution.name }}"
            "{% if fields.resolutiondate %} (resolved {{ fields.resolutiondate }}){% endif %}{% endif %}"
        ),
        "metadata": {
            "jira_id": "id",
            "status": "fields.status.name",
            "priority": "fields.priority.name",
            "issue_type": "fields.issuetype.name",
            "resolution": "fields.resolution.name",
            "resolved": "fields.resolutiondate",
        },
        "tags": "fields.labels",
        "required": ["fields.summary"],
    }

    def _headers(self) -> dict[str, str]:
        config = self.config
        if config.personal_access_token is not None:
            return {"Authorization": f"Bearer {config.personal_access_token.get_secret_value()}", "Accept": "application/json"}
        assert config.email is not None and config.api_token is not None
        raw = f"{config.email}:{config.api_token.get_secret_value()}".encode()
        return {"Authorization": f"Basic {base64.b64encode(raw).decode()}", "Accept": "application/json"}

    def _jql(self, since: str | None) -> str:
        clauses = [f"({self.config.jql})"] if self.config.jql.strip() else []
        clauses.append(f'updated >= "{since or EVERYTHING}"')
        return " AND ".join(clauses) + " ORDER BY updated ASC, key ASC"

    def _boundary(self, issue: object) -> str | None:
        fields = issue.get("fields") if isinstance(issue, dict) else None
        if not isinstance(fields, dict):
            return None
        try:
            updated = parse_incident_date(fields.get("updated"), now=self.context.clock())
        except IncidentDateError:
            return None
        return updated.astimezone(ZoneInfo(self.config.timezone)).strftime(JQL_MINUTE)

    def _search(self, since: str | None, start_at: int, token: str | None) -> SearchPage:
        """One search page of issues updated at or after `since` (JQL minutes)."""
        config = self.config
        params: dict[str, Any] = {"jql": self._jql(since), "maxResults": config.page_size, "fields": ",".join(config.fields)}
        api = config.search_api
        if api == "v2":
            params["startAt"] = start_at
            url = f"{config.base_url}/rest/api/2/search"
        else:
            if token:
                params["nextPageToken"] = token
            url = f"{config.base_url}/rest/api/3/search/jql"
        body = json_body(send(self.context, "GET", url, params=params, headers=self._headers(), vendor="Jira"), vendor="Jira")
        if not isinstance(body, dict) or not isinstance(body.get("issues"), list):
            raise MalformedPage(f"Jira search answer has no 'issues' array (keys: {sorted(body)[:10] if isinstance(body, dict) else type(body).__name__})")
        issues: list[Any] = body["issues"]
        if api == "v2":
            total = body.get("total")
            if not isinstance(total, int):
                raise MalformedPage("Jira search answer has no integer 'total'")
            return SearchPage(issues, total, start_at + len(issues) >= total or not issues)
        next_token = body.get("nextPageToken")
        is_last = bool(body.get("isLast", not next_token)) or not issues
        return SearchPage(issues, None, is_last, next_token if isinstance(next_token, str) else None)

    def _key(self, issue: object) -> str:
        return str(issue.get("key", issue.get("id"))) if isinstance(issue, dict) else repr(issue)[:64]

    def pages(self, cursor: str | None) -> Iterator[Page]:
        for batch in walk(KeysetCursor.loads(cursor), self._search, self._boundary, self._key):
            yield self._page(batch.records, batch.start, batch.cursor, batch.total)

    def _page(self, issues: list[Any], start_at: int, position: KeysetCursor, total: int | None) -> Page:
        return Page(records=[self._record(issue, start_at + index) for index, issue in enumerate(issues)], cursor=position.dumps(), total=total)

    def _record(self, issue: object, index: int) -> RawRecord:
        if not isinstance(issue, dict):
            return RawRecord(index, f"issue {index}", error=RecordRejected("wrong_type", f"expected an issue object, got {type(issue).__name__}"))
        fields = issue.get("fields")
        if isinstance(fields, dict) and isinstance(fields.get("description"), dict):
            issue = {**issue, "fields": {**fields, "description": adf_to_text(fields["description"]).strip()}}
        return RawRecord(index, f"issue {issue.get('key', index)}", value=issue)

