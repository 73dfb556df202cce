"""Connectors by kind: the built-in ones and any installed package that declares one under the
`goldenset.connectors` entry-point group (`kind = "package.module:ConnectorClass"`)."""

from __future__ import annotations

from functools import cache
from importlib import import_module
from importlib.metadata import entry_points

from ingest.connectors.base import Connector

ENTRY_POINT_GROUP = "goldenset.connectors"
BUILTIN = {
    "jira": "ingest.connectors.jira:JiraConnector",
    "github": "ingest.connectors.github:GitHubConnector",
    "incidentio": "ingest.connectors.incidentio:IncidentIoConnector",
    "opsgenie": "ingest.connectors.opsgenie:OpsgenieConnector",
    "pagerduty": "ingest.connectors.pagerduty:PagerDutyConnector",
    "sentry": "ingest.connectors.sentry:SentryConnector",
    "servicenow": "ingest.connectors.servicenow:ServiceNowConnector",
}


class UnknownConnector(LookupError):
    """No connector is registered for a kind; the message lists the kinds that are."""


def _load(target: str) -> type[Connector]:  # type: ignore[type-arg]
    module_name, _, attribute = target.partition(":")
    connector = getattr(import_module(module_name), attribute)
    if not (isinstance(connector, type) and issubclass(connector, Connector)):
        raise TypeError(f"{target} is not a goldenset Connector subclass")
    return connector


@cache
def connector_targets() -> dict[str, str]:
    """Every registered kind and where its class lives; installed plugins may add kinds, not replace built-ins."""
    targets = dict(BUILTIN)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(entry.name, entry.value)
    return targets


def connector_kinds() -> list[str]:
    return sorted(connector_targets())


def connector_class(kind: str) -> type[Connector]:  # type: ignore[type-arg]
    """The connector class for `kind`; raises `UnknownConnector` naming the registered kinds."""
    target = connector_targets().get(kind)
    if target is None:
        raise UnknownConnector(f"no connector for kind {kind!r}; registered: {', '.join(connector_kinds())}")
    return _load(target)
