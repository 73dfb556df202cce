"""A third-party connector as a plugin package would ship it, for the registry test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ingest.connectors.base import Connector, ConnectorConfig, Page
from ingest.readers import RawRecord


class StatuspageConfig(ConnectorConfig):
    incidents: list[dict[str, Any]]


class StatuspageConnector(Connector[StatuspageConfig]):
    """Yields its configured incidents in one page (no network)."""

    kind: ClassVar[str] = "statuspage"
    config_model: ClassVar[type[ConnectorConfig]] = StatuspageConfig
    default_mapping: ClassVar[dict[str, Any]] = {"external_id": "id", "occurred_at": "created_at", "input": "{{ name }}"}

    def pages(self, cursor: str | None) -> Iterator[Page]:
        if cursor == "done":
            return
        yield Page(records=[RawRecord(index, f"incident {index}", value=incident) for index, incident in enumerate(self.config.incidents)], cursor="done")
