"""Data access for sources: lookup, creation with a webhook secret, and the mapping each one uses.

Nothing here commits: each change is written in the caller's unit of work (a route's
`WriteSessionDep`, a command's `write_transaction`), with its audit event."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from ingest.connectors.base import ConfigError, ConnectorConfig
from ingest.connectors.registry import connector_class
from ingest.mapping import NATIVE_MAPPING, Mapping, parse_mapping
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.item import Item
from schemas.source import Source, SourceCreate, SourceKind, SourceRead, SourceStatus, SourceUpdate, WebhookDelivery
from service.core.crypto import decrypt, encrypt, new_secret
from service.core.problems import ProblemError

WEBHOOK_SECRET_PREFIX = "whsec_"


def get_source(*, session: Session, name: str) -> Source | None:
    return session.exec(select(Source).where(Source.name == name)).first()


def require_source(*, session: Session, name: str) -> Source:
    """The source called `name`, or a 404 problem saying how to create it."""
    source = get_source(session=session, name=name)
    if source is None:
        raise ProblemError(404, "Not Found", f"source {name!r} does not exist; create it with POST /v1/sources (admin scope) or `goldenset source create {name}`")
    return source


PLAIN_KINDS = (SourceKind.FILE.value, SourceKind.PUSH.value, SourceKind.REFERENCE.value)


def _connector_fields(kind: str, document: dict[str, Any] | None, *, secret_key: str) -> tuple[dict[str, Any], str | None]:
    """Validate a connector configuration for `kind`: returns (masked config, encrypted secret config).

    Raises ConfigError (bad configuration) or UnknownConnector (bad kind)."""
    if kind in PLAIN_KINDS:
        if document:
            raise ConfigError(f"a {kind} source takes no connector configuration")
        return {}, None
    connector = connector_class(kind)
    if document is None:
        raise ConfigError(f"a {kind} source needs a `connector` configuration with: {', '.join(connector.config_model.model_fields)}")
    config = connector.parse_config(document)
    return config.masked(), encrypt(json.dumps(config.revealed()), secret_key=secret_key)


def create_source(*, session: Session, data: SourceCreate, secret_key: str, actor: str) -> tuple[Source, str]:
    """Create a source with a fresh webhook secret; returns it and the secret in plain text (shown once).

    The mapping and connector configuration are validated first; raises MappingError, ConfigError,
    UnknownConnector, or FileExistsError (name taken).
    """
    if data.mapping is not None:
        parse_mapping(data.mapping, origin=f"mapping of source {data.name!r}")
    masked, encrypted = _connector_fields(data.kind, data.connector, secret_key=secret_key)
    if get_source(session=session, name=data.name) is not None:
        raise FileExistsError(f"source {data.name!r} already exists")
    secret = new_secret(WEBHOOK_SECRET_PREFIX)
    source = Source(
        name=data.name,
        kind=data.kind,
        mapping=data.mapping,
        config=masked,
        connector_secret=encrypted,
        pull_interval_seconds=data.pull_interval_seconds,
        webhook_secret=encrypt(secret, secret_key=secret_key),
    )
    session.add(source)
    session.flush()
    session.add(AuditEvent(actor=actor, action=AuditAction.SOURCE_CREATE, object_type="source", object_id=data.name, details={"kind": data.kind}))
    return source, secret


def _stored_connector_document(source: Source, *, secret_key: str) -> dict[str, Any]:
    """The source's connector configuration as stored, credentials in plain text ({} when none)."""
    if not source.connector_secret:
        return {}
    try:
        document = json.loads(decrypt(source.connector_secret, secret_key=secret_key))
    except ValueError as exc:
        raise ConfigError(f"the stored connector configuration of source {source.name!r} cannot be read ({exc}); give the whole configuration instead") from exc
    return document if isinstance(document, dict) else {}


def _changed_connector(source: Source, data: SourceUpdate, *, secret_key: str) -> dict[str, Any] | None:
    """The connector configuration `data` asks for: `connector` whole, or the stored one, with
    `connector_settings` applied (a null value drops the key, so its default applies)."""
    present = data.model_fields_set
    document = data.connector if "connector" in present else _stored_connector_document(source, secret_key=secret_key)
    if data.connector_settings:
        merged = {**(document or {}), **data.connector_settings}
        document = {key: value for key, value in merged.items() if value is not None}
    return document


def update_source(*, session: Session, source: Source, data: SourceUpdate, secret_key: str, actor: str) -> Source:
    """Apply the fields present in `data`; raises MappingError or ConfigError before changing
    anything. The audit event names the fields changed and the connector keys set, never a value."""
    present = data.model_fields_set
    if "mapping" in present and data.mapping is not None:
        parse_mapping(data.mapping, origin=f"mapping of source {source.name!r}")
    if "connector" in present or data.connector_settings is not None:
        document = _changed_connector(source, data, secret_key=secret_key)
        source.config, source.connector_secret = _connector_fields(source.kind, document, secret_key=secret_key)
        if source.status == SourceStatus.AUTH_FAILED.value:
            source.status, source.last_error = SourceStatus.IDLE.value, None
    if "mapping" in present:
        source.mapping = data.mapping
    if "pull_interval_seconds" in present:
        source.pull_interval_seconds = data.pull_interval_seconds
    if "enabled" in present and data.enabled is not None:
        source.enabled = data.enabled
    if data.reset_cursor:
        source.cursor = None
    source.updated_at = utcnow()
    session.add(source)
    changed = sorted(present - {"connector", "connector_settings"}) + [field for field in ("connector", "connector_settings") if field in present]
    details: dict[str, Any] = {"fields": changed}
    if data.connector_settings:
        details["connector_keys"] = sorted(data.connector_settings)
    session.add(AuditEvent(actor=actor, action=AuditAction.SOURCE_UPDATE, object_type="source", object_id=source.name, details=details))
    return source


def delete_source(*, session: Session, source: Source, actor: str) -> None:
    """Delete a source that holds no items; raises FileExistsError (items exist) otherwise."""
    count = session.exec(select(func.count()).select_from(Item).where(Item.source_id == source.id)).one()
    if count:
        raise FileExistsError(
            f"source {source.name!r} holds {count} items, which stay in dedup history; disable it instead with "
            f"`goldenset source configure {source.name} --disable` (API: PATCH /v1/sources/{source.name} enabled=false)"
        )
    # Its recent webhook deliveries go with it: they only guard against replays to this source.
    session.exec(delete(WebhookDelivery).where(col(WebhookDelivery.source_id) == source.id))
    session.delete(source)
    session.add(AuditEvent(actor=actor, action=AuditAction.SOURCE_DELETE, object_type="source", object_id=source.name))


class SourceKindClash(ValueError):
    """A file names a source that exists as the other family (a reference corpus or an incident source)."""


def file_source(*, session: Session, name: str, kind: str, mapping: dict[str, Any] | None, secret_key: str, actor: str) -> tuple[Source, bool]:
    """The source a file is ingested into: the one called `name`, or a new one of `kind` (audited);
    `mapping`, when given, is stored on it (audited when it changes). Returns it and whether it was
    created. Raises SourceKindClash when a reference corpus and an incident source would share the
    name, MappingError for a bad mapping; the caller's unit of work commits."""
    stored = get_source(session=session, name=name)
    if stored is None:
        created, _ = create_source(session=session, data=SourceCreate(name=name, kind=kind, mapping=mapping), secret_key=secret_key, actor=actor)
        return created, True
    if (stored.kind == SourceKind.REFERENCE.value) != (kind == SourceKind.REFERENCE.value):
        raise SourceKindClash(f"source {name!r} is a {stored.kind} source; reference corpora and incident sources cannot share a name")
    if mapping is not None:
        set_source_mapping(session=session, source=stored, mapping=mapping, actor=actor)
    return stored, False


def connector_config(source: Source, *, secret_key: str) -> ConnectorConfig:
    """The decrypted, validated connector configuration of a pull source."""
    if not source.connector_secret:
        raise ConfigError(
            f"source {source.name!r} ({source.kind}) has no connector configuration; set one with "
            f"`goldenset source configure {source.name} --connector FILE` (API: PATCH /v1/sources/{source.name})"
        )
    return connector_class(source.kind).parse_config(json.loads(decrypt(source.connector_secret, secret_key=secret_key)))


def set_source_mapping(*, session: Session, source: Source, mapping: dict[str, Any], actor: str) -> None:
    """Replace the stored mapping of `source` (validated first), auditing the change."""
    parse_mapping(mapping, origin=f"mapping of source {source.name!r}")
    if source.mapping == mapping:
        return
    source.mapping = mapping
    source.updated_at = utcnow()
    session.add(source)
    session.add(AuditEvent(actor=actor, action=AuditAction.SOURCE_MAPPING, object_type="source", object_id=source.name))


def webhook_secret(source: Source, *, secret_key: str) -> str | None:
    """The source's webhook secret in plain text, or None when it has none."""
    return decrypt(source.webhook_secret, secret_key=secret_key) if source.webhook_secret else None


def source_mapping(source: Source) -> Mapping:
    """The mapping records of `source` go through: its stored one, else its connector's default,
    else the native item shape."""
    if source.mapping is not None:
        return parse_mapping(source.mapping, origin=f"mapping of source {source.name!r}")
    if source.kind not in PLAIN_KINDS:
        return parse_mapping(connector_class(source.kind).default_mapping, origin=f"default mapping of {source.kind} connectors")
    return NATIVE_MAPPING


def list_sources(*, session: Session) -> list[SourceRead]:
    counts: dict[int | None, int] = {source_id: count for source_id, count in session.exec(select(col(Item.source_id), func.count()).group_by(col(Item.source_id))).all()}
    return [
        SourceRead.model_validate(source, update={"item_count": counts.get(source.id, 0)})
        for source in session.exec(select(Source).order_by(Source.name))
    ]


def read_source(*, session: Session, source: Source) -> SourceRead:
    count = session.exec(select(func.count()).select_from(Item).where(Item.source_id == source.id)).one()
    return SourceRead.model_validate(source, update={"item_count": count})
