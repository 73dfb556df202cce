"""ServiceNow: records of a table (incidents by default) updated since the cursor, through the
Table API, `GET /api/now/table/{table}`.

Each request asks `sysparm_query=<filter>^sys_updated_on>=<cursor>^ORDERBYsys_updated_on^ORDERBYsys_id`
with `sysparm_limit`/`sysparm_offset` paging and `sysparm_display_value=all`, so every field comes
as `{"display_value", "value"}`: a record is handed on as its display values (labels, names,
journal text), with the stored values beside them under `values` (dates there are UTC,
`YYYY-MM-DD HH:MM:SS`, which is what the mapping dates incidents by). A plain date literal in a
query is read in UTC. `sys_updated_on` is kept to the second, so the cursor is that second plus the
`sys_id`s read at it (`keyset`); offsets are followed only while more records share one second than
fit on a page. ServiceNow applies `sysparm_limit` before leaving out records the caller may not
read, so a short page is not the end: the end is `X-Total-Count`, else an empty page.

Auth is basic (a user and password) or an OAuth bearer token. A journal field (`work_notes`,
`comments`) is text only as a display value: every entry, newest first, which the default mapping
keeps beside the close notes as the reference answer. ServiceNow ignores a clause of `query` that
names a field the table does not have (and answers every record), so the fields `query` names
are checked against the first answer's, and a pull stops naming the unknown ones.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import Field, SecretStr, field_validator, model_validator

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, ConnectorError, MalformedPage, Page
from ingest.connectors.http import json_body, send
from ingest.connectors.keyset import KeysetCursor, SearchPage, walk
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "ServiceNow"
MAX_PAGE = 10_000
_TABLE = re.compile(r"^[a-z][a-z0-9_]{0,79}$")
_STORED_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_CLAUSES = re.compile(r"\^(?:OR|NQ)?")
_FIELD = re.compile(r"^([a-z_][a-z0-9_]*)")
_KEYWORDS = {"EQ", "ORDERBY", "ORDERBYDESC", "GROUPBY", "RLQUERY", "ENDRLQUERY", "SUBQUERY", "ENDSUBQUERY"}


def query_fields(query: str) -> set[str]:
    """The fields an encoded query filters on (the first name of a dot-walked one)."""
    fields = set()
    for clause in _CLAUSES.split(query):
        match = _FIELD.match(clause.strip())
        if match and clause.strip().upper() not in _KEYWORDS:
            fields.add(match.group(1))
    return fields


class ServiceNowConfig(ConnectorConfig):
    instance_url: BaseUrl = Field(description="The instance root, e.g. https://acme.service-now.com")
    username: str | None = Field(default=None, description="Basic auth: a user with read access to the table.")
    password: SecretStr | None = None
    oauth_token: SecretStr | None = Field(default=None, description="Or an OAuth access token (Bearer).")
    table: str = Field(default="incident", description="The table to pull, e.g. incident, sn_si_incident.")
    query: str = Field(default="", description="An encoded query that filters the records, e.g. 'active=false^priority<=2'.")
    page_size: int = Field(default=100, ge=1, le=MAX_PAGE)

    @field_validator("table")
    @classmethod
    def _table_name(cls, value: str) -> str:
        if not _TABLE.match(value):
            raise ValueError(f"{value!r} is not a table name (lowercase letters, digits and underscores)")
        return value

    @field_validator("query")
    @classmethod
    def _no_order(cls, value: str) -> str:
        if "ORDERBY" in value.upper():
            raise ValueError("leave ORDERBY out: goldenset orders by sys_updated_on itself")
        return value.strip().strip("^")

    @model_validator(mode="after")
    def _one_auth(self) -> ServiceNowConfig:
        basic = self.username is not None or self.password is not None
        if basic and (self.username is None or self.password is None):
            raise ValueError("basic auth needs both username and password")
        if basic == (self.oauth_token is not None):
            raise ValueError("give either username + password, or oauth_token")
        return self


def _display(field: object) -> object:
    """A field of a `sysparm_display_value=all` answer as its display value."""
    return field.get("display_value") if isinstance(field, dict) and "display_value" in field else field


def _value(field: object) -> object:
    """A field of a `sysparm_display_value=all` answer as its stored value."""
    return field.get("value") if isinstance(field, dict) and "value" in field else field


class ServiceNowConnector(Connector[ServiceNowConfig]):
    kind: ClassVar[str] = "servicenow"
    config_model: ClassVar[type[ConnectorConfig]] = ServiceNowConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "number",
        "occurred_at": "values.opened_at",
        "version": "values.sys_updated_on",
        "title": "short_description",
        "input": (
            "{{ short_description }}"
            "{% if description and description != short_description %}\n\n{{ description }}{% endif %}"
            "{% if cmdb_ci %}\n\nConfiguration item: {{ cmdb_ci }}{% endif %}"
            "{% if category %}\nCategory: {{ category }}{% if subcategory %} / {{ subcategory }}{% endif %}{% endif %}"
            "{% if impact %}\nImpact: {{ impact }}{% endif %}"
        ),
        "reference": (
            "{% if close_notes %}{{ close_notes }}{% endif %}"
            "{% if close_code %}\n\nClose code: {{ close_code }}{% endif %}"
            "{% if work_notes %}\n\nWork notes:\n{{ work_notes }}{% endif %}"
        ),
        "metadata": {
            "sys_id": "values.sys_id",
            "state": "state",
            "priority": "priority",
            "urgency": "urgency",
            "impact": "impact",
            "category": "category",
            "assignment_group": "assignment_group",
            "configuration_item": "cmdb_ci",
            "resolved_at": "values.resolved_at",
            "closed_at": "values.closed_at",
        },
        "tags": "tags",
        "required": ["short_description"],
    }

    def _headers(self) -> dict[str, str]:
        config = self.config
        if config.oauth_token is not None:
            return {"Authorization": f"Bearer {config.oauth_token.get_secret_value()}", "Accept": "application/json"}
        assert config.username is not None and config.password is not None
        raw = f"{config.username}:{config.password.get_secret_value()}".encode()
        return {"Authorization": f"Basic {base64.b64encode(raw).decode()}", "Accept": "application/json"}

    def _query(self, since: str | None) -> str:
        clauses = [self.config.query] if self.config.query else []
        if since is not None:
            clauses.append(f"sys_updated_on>={since}")
        return "^".join([*clauses, "ORDERBYsys_updated_on", "ORDERBYsys_id"])

    def _search(self, since: str | None, offset: int, token: str | None) -> SearchPage:
        config = self.config
        params = {
            "sysparm_query": self._query(since),
            "sysparm_limit": config.page_size,
            "sysparm_offset": offset,
            "sysparm_display_value": "all",
            "sysparm_exclude_reference_link": "true",
        }
        url = f"{config.instance_url}/api/now/table/{quote(config.table)}"
        response = send(self.context, "GET", url, params=params, headers=self._headers(), vendor=VENDOR)
        body = json_body(response, vendor=VENDOR)
        if not isinstance(body, dict) or not isinstance(body.get("result"), list):
            keys = sorted(body)[:10] if isinstance(body, dict) else type(body).__name__
            raise MalformedPage(f"{VENDOR} table answer at offset {offset} has no 'result' array (keys: {keys})")
        records: list[Any] = body["result"]
        if offset == 0 and records and isinstance(records[0], dict):
            unknown = sorted(query_fields(config.query) - set(records[0]))
            if unknown:
                # ServiceNow ignores a clause naming a field the table does not have, and answers every record.
                raise ConnectorError(f"the query names {', '.join(unknown)}, which the {config.table} table does not have; ServiceNow would ignore it: correct `query`")
        counted = response.headers.get("x-total-count", "")
        total = int(counted) if counted.isdigit() else None
        is_last = not records or (total is not None and offset + config.page_size >= total)
        return SearchPage(records, total, is_last, advanced=config.page_size)

    @staticmethod
    def _boundary(record: object) -> str | None:
        updated = _value(record.get("sys_updated_on")) if isinstance(record, dict) else None
        return updated if isinstance(updated, str) and _STORED_TIME.match(updated) else None

    @staticmethod
    def _key(record: object) -> str:
        if isinstance(record, dict):
            return str(_value(record.get("sys_id")) or _value(record.get("number")))
        return repr(record)[:64]

    def pages(self, cursor: str | None) -> Iterator[Page]:
        for batch in walk(KeysetCursor.loads(cursor), self._search, self._boundary, self._key):
            records = [self._record(record, batch.start + index) for index, record in enumerate(batch.records)]
            yield Page(records=records, cursor=batch.cursor.dumps(), total=batch.total)

    def _record(self, record: object, position: int) -> RawRecord:
        if not isinstance(record, dict):
            return RawRecord(position, f"record at offset {position}", error=RecordRejected("wrong_type", f"expected a record object, got {type(record).__name__}"))
        number = _display(record.get("number"))
        locator = f"{self.config.table} {number}" if number else f"{self.config.table} record at offset {position}"
        value: dict[str, object] = {name: _display(field) for name, field in record.items()}
        value["values"] = {name: _value(field) for name, field in record.items()}
        tags = [f"{name}:{text}" for name in ("priority", "category") if isinstance(text := value.get(name), str) and text]
        value["tags"] = tags
        return RawRecord(position, locator, value=value)
