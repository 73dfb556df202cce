"""`file_source`: the source a file goes into, found or made (audited), its mapping stored when
given; a reference corpus and an incident source never share a name."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from schemas.audit import AuditAction, AuditEvent
from service.core.db import write_transaction
from service.sources.definitions import SourceKindClash, file_source
from tests.conftest import TEST_SECRET_KEY

MAPPING = {"external_id": "id", "occurred_at": "created", "title": "title", "input": "description"}


def test_found_or_made_with_its_mapping_and_never_across_families(engine: Engine) -> None:
    with write_transaction(engine) as session:
        made, created = file_source(session=session, name="hadoop", kind="file", mapping=None, secret_key=TEST_SECRET_KEY, actor="token:lead")
        assert created and made.kind == "file" and made.mapping is None
    with write_transaction(engine) as session:
        found, created = file_source(session=session, name="hadoop", kind="file", mapping=MAPPING, secret_key=TEST_SECRET_KEY, actor="token:lead")
        assert not created and found.mapping == MAPPING
    with Session(engine) as session:
        actions = sorted(event.action for event in session.exec(select(AuditEvent).where(AuditEvent.object_id == "hadoop")).all())
    assert actions == sorted(["source.create", AuditAction.SOURCE_MAPPING.value])
    with write_transaction(engine) as session, pytest.raises(SourceKindClash, match="cannot share a name"):
        file_source(session=session, name="hadoop", kind="reference", mapping=None, secret_key=TEST_SECRET_KEY, actor="token:lead")
