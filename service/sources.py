"""Data access for sources: lookup, creation with a webhook secret, and the mapping each one uses."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from ingest.mapping import NATIVE_MAPPING, Mapping, parse_mapping
from schemas.audit import AuditEvent
from schemas.common import utcnow
from schemas.item import Item
from schemas.source import Source, SourceCreate, SourceRead
from service.crypto import decrypt, encrypt, new_secret
from service.problems import ProblemError

WEBHOOK_SECRET_PREFIX = "whsec_"


def get_source(*, session: Session, name: str) -> Source | None:
    return session.exec(select(Source).where(Source.name == name)).first()


def require_source(*, session: Session, name: str) -> Source:
    """The source called `name`, or a 404 problem saying how to create it."""
    source = get_source(session=session, name=name)
    if source is None:
        raise ProblemError(404, "Not Found", f"source {name!r} does not exist; create it with POST /v1/sources (admin scope) or `goldenset source create {name}`")
    return source


def create_source(*, session: Session, data: SourceCreate, secret_key: str, actor: str) -> tuple[Source, str]:
    """Create a source with a fresh webhook secret; returns it and the secret in plain text (shown once).

    The mapping is validated first; raises ValueError (bad mapping) or FileExistsError (name taken).
    """
    if data.mapping is not None:
        parse_mapping(data.mapping, origin=f"mapping of source {data.name!r}")
    if get_source(session=session, name=data.name) is not None:
        raise FileExistsError(f"source {data.name!r} already exists")
    secret = new_secret(WEBHOOK_SECRET_PREFIX)
    source = Source(name=data.name, kind=data.kind, mapping=data.mapping, config=data.config, webhook_secret=encrypt(secret, secret_key=secret_key))
    session.add(source)
    session.flush()
    session.add(AuditEvent(actor=actor, action="source.create", object_type="source", object_id=data.name, details={"kind": data.kind}))
    session.commit()
    return source, secret


def set_source_mapping(*, session: Session, source: Source, mapping: dict[str, Any], actor: str) -> None:
    """Replace the stored mapping of `source` (validated first), auditing the change."""
    parse_mapping(mapping, origin=f"mapping of source {source.name!r}")
    if source.mapping == mapping:
        return
    source.mapping = mapping
    source.updated_at = utcnow()
    session.add(source)
    session.add(AuditEvent(actor=actor, action="source.mapping", object_type="source", object_id=source.name))
    session.commit()


def webhook_secret(source: Source, *, secret_key: str) -> str | None:
    """The source's webhook secret in plain text, or None when it has none."""
    return decrypt(source.webhook_secret, secret_key=secret_key) if source.webhook_secret else None


def source_mapping(source: Source) -> Mapping:
    """The mapping records of `source` go through: its stored one, else the native item shape."""
    if source.mapping is None:
        return NATIVE_MAPPING
    return parse_mapping(source.mapping, origin=f"mapping of source {source.name!r}")


def list_sources(*, session: Session) -> list[SourceRead]:
    counts: dict[int | None, int] = {source_id: count for source_id, count in session.exec(select(col(Item.source_id), func.count()).group_by(col(Item.source_id))).all()}
    return [
        SourceRead.model_validate(source, update={"item_count": counts.get(source.id, 0)})
        for source in session.exec(select(Source).order_by(Source.name))
    ]


def read_source(*, session: Session, source: Source) -> SourceRead:
    count = session.exec(select(func.count()).select_from(Item).where(Item.source_id == source.id)).one()
    return SourceRead.model_validate(source, update={"item_count": count})
