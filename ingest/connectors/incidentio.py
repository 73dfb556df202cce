"""incident.io: incidents updated since the mark, through the public API v2, `GET /v2/incidents`.

incident.io orders incidents by creation only (`sort_by=created_at_oldest_first`), pages them with
`after` (the last incident's id; the last page has no `pagination_meta.after`, or is empty) and
filters by update date (`updated_at[gte]=<date>`, whole days). A pull reads every page of the
incidents updated on or after the mark's day and moves the mark, with the last page only, to the
newest `updated_at` it saw, never past the pull's start less a margin for clock skew: a pull that
dies is read again from the old mark, and an incident edited while it ran is read again next time.
Test and tutorial incidents are left out unless `modes` asks for them, as incident.io does.

An incident is dated by its "Reported at" timestamp (else its creation). Its reference answer is
its postmortem, rendered as markdown (`GET /v1/postmortem_documents/{id}/content`), or else, for a
closed incident, the messages of its updates (`GET /v2/incident_updates?incident_id=`, oldest
first). Auth is a bearer API key with `incidents.view`. A 429's `Retry-After` is seconds or a date.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import Field, SecretStr

from ingest.connectors.base import BaseUrl, Connector, ConnectorConfig, MalformedPage, Page
from ingest.connectors.http import json_body, send
from ingest.connectors.mark import TimeMark
from ingest.mapping import RecordRejected
from ingest.readers import RawRecord

VENDOR = "incident.io"
SKEW = timedelta(minutes=5)
Mode = Literal["standard", "retrospective", "test", "tutorial"]
CLOSED = {"closed", "learning", "canceled", "declined", "merged"}


def _default_modes() -> list[Mode]:
    return ["standard", "retrospective"]


class IncidentIoConfig(ConnectorConfig):
    api_key: SecretStr = Field(description="An API key that can view incidents (incidents.view).")
    base_url: BaseUrl = Field(default="https://api.incident.io")
    modes: list[Mode] = Field(default_factory=_default_modes, min_length=1, description="Incident modes to pull; test and tutorial ones are left out by default.")
    status_categories: list[str] = Field(default_factory=list, description="Only these status categories (triage, live, learning, closed, ...); all when empty.")
    page_size: int = Field(default=100, ge=1, le=250)
    include_postmortems: bool = Field(default=True, description="Fetch each postmortem's content as the incident's reference answer.")
    include_updates: bool = Field(default=True, description="Without a postmortem, use a closed incident's updates as its reference answer.")


def timestamp_value(incident: dict[str, Any], name: str) -> str | None:
    """The value of one of an incident's named timestamps ("Reported at", "Resolved at"), if set."""
    for entry in incident.get("incident_timestamp_values") or []:
        if not isinstance(entry, dict):
            continue
        stamp, value = entry.get("incident_timestamp"), entry.get("value")
        if isinstance(stamp, dict) and str(stamp.get("name", "")).lower() == name.lower() and isinstance(value, dict) and isinstance(value.get("value"), str):
            return str(value["value"])
    return None


class IncidentIoConnector(Connector[IncidentIoConfig]):
    kind: ClassVar[str] = "incidentio"
    config_model: ClassVar[type[ConnectorConfig]] = IncidentIoConfig
    default_mapping: ClassVar[dict[str, Any]] = {
        "external_id": "reference",
        "occurred_at": "reported_at",
        "version": "updated_at",
        "title": "name",
        "input": (
            "{{ name }}"
            "{% if summary %}\n\n{{ summary }}{% endif %}"
            "{% if severity.name %}\n\nSeverity: {{ severity.name }}{% endif %}"
            "{% if incident_type.name %}\nType: {{ incident_type.name }}{% endif %}"
        ),
        "reference": "{{ postmortem }}{% if not postmortem %}{{ updates | join('\n\n') }}{% endif %}",
        "metadata": {
            "incident_id": "id",
            "status": "incident_status.name",
            "status_category": "incident_status.category",
            "severity": "severity.name",
            "mode": "mode",
            "permalink": "permalink",
            "resolved_at": "resolved_at",
            "postmortem_url": "postmortem_document_url",
        },
        "tags": "tags",
        "required": ["name"],
    }

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.api_key.get_secret_value()}", "Accept": "application/json"}

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        response = send(self.context, "GET", f"{self.config.base_url}{path}", params=params, headers=self._headers(), vendor=VENDOR)
        return json_body(response, vendor=VENDOR)

    def pages(self, cursor: str | None) -> Iterator[Page]:
        config = self.config
        mark = TimeMark.loads(cursor)
        started = self.context.clock().astimezone(UTC)
        params: dict[str, Any] = {"page_size": config.page_size, "sort_by": "created_at_oldest_first", "mode[one_of]": list(config.modes)}
        if mark.since is not None:
            params["updated_at[gte]"] = mark.since.date().isoformat()  # whole days: the day of the mark is read again
        if config.status_categories:
            params["status_category[one_of]"] = list(config.status_categories)
        read, after = 0, None
        while True:
            body = self._get("/v2/incidents", {**params, **({"after": after} if after else {})})
            if not isinstance(body, dict) or not isinstance(body.get("incidents"), list):
                keys = sorted(body)[:10] if isinstance(body, dict) else type(body).__name__
                raise MalformedPage(f"{VENDOR} incidents answer after {after or 'the start'} has no 'incidents' array (keys: {keys})")
            incidents: list[Any] = body["incidents"]
            mark.see(incident.get("updated_at") for incident in incidents if isinstance(incident, dict))
            records = [self._record(incident, read + index) for index, incident in enumerate(incidents)]
            read += len(incidents)
            meta = body.get("pagination_meta")
            following = meta.get("after") if isinstance(meta, dict) else None
            last = not incidents or not isinstance(following, str) or not following
            moved = mark.moved(ceiling=started - SKEW) if last else None
            yield Page(records=records, cursor=moved.isoformat() if moved else (cursor or ""))
            if last:
                return
            after = following

    def _record(self, incident: object, position: int) -> RawRecord:
        if not isinstance(incident, dict):
            return RawRecord(position, f"incident {position}", error=RecordRejected("wrong_type", f"expected an incident object, got {type(incident).__name__}"))
        locator = f"incident {incident.get('reference') or incident.get('id')}"
        value: dict[str, object] = dict(incident)
        value["reported_at"] = timestamp_value(incident, "Reported at") or incident.get("created_at")
        value["resolved_at"] = timestamp_value(incident, "Resolved at")
        status = incident.get("incident_status")
        category = status.get("category") if isinstance(status, dict) else None
        value["postmortem"] = self._postmortem(incident)
        value["updates"] = self._updates(str(incident["id"])) if not value["postmortem"] and category in CLOSED and self.config.include_updates and incident.get("id") else []
        severity = incident.get("severity")
        value["tags"] = [f"severity:{severity['name']}"] if isinstance(severity, dict) and isinstance(severity.get("name"), str) else []
        return RawRecord(position, locator, value=value)

    def _postmortem(self, incident: dict[str, Any]) -> str:
        """The incident's postmortems, rendered as markdown, one after another (empty when none)."""
        if not self.config.include_postmortems:
            return ""
        documents = [document for document in incident.get("postmortem_document_ids") or [] if isinstance(document, str) and document]
        texts = []
        for document in documents:
            body = self._get(f"/v1/postmortem_documents/{quote(document, safe='')}/content", {})
            if not isinstance(body, dict) or not isinstance(body.get("markdown"), str):
                raise MalformedPage(f"{VENDOR} postmortem content of {document} has no 'markdown' text")
            texts.append(body["markdown"].strip())
        return "\n\n".join(text for text in texts if text)

    def _updates(self, incident_id: str) -> list[str]:
        """The messages of an incident's updates, oldest first, across their pages."""
        messages: list[tuple[str, str]] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"incident_id": incident_id, "page_size": 250, **({"after": after} if after else {})}
            body = self._get("/v2/incident_updates", params)
            if not isinstance(body, dict) or not isinstance(body.get("incident_updates"), list):
                raise MalformedPage(f"{VENDOR} updates answer of incident {incident_id} has no 'incident_updates' array")
            updates = [update for update in body["incident_updates"] if isinstance(update, dict)]
            written = [update for update in updates if isinstance(update.get("message"), str) and update["message"].strip()]
            messages.extend((str(update.get("created_at") or ""), update["message"].strip()) for update in written)
            meta = body.get("pagination_meta")
            after = meta.get("after") if isinstance(meta, dict) and updates else None
            if not isinstance(after, str) or not after:
                return [message for _, message in sorted(messages)]
