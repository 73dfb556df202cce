"""A refused attempt leaves its audit event and nothing else (`service.evals.refusal_audit`)."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.audit import AuditEvent
from service.core.db import write_transaction
from service.evals.refusal_audit import AuditedRefusal, refusals_audited


def _event(action: str) -> AuditEvent:
    return AuditEvent(actor="test", action=action, object_type="eval", object_id="ops", count=0)


def _attempt(engine: Engine, failure: Exception | None) -> None:
    """A unit of work that writes an event and then, unless `failure` is None, raises it."""
    with refusals_audited(engine), write_transaction(engine) as session:
        session.add(_event("attempt.written"))
        session.flush()
        if failure is not None:
            raise failure


def _actions(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return list(session.exec(select(AuditEvent.action).order_by(col(AuditEvent.id))).all())


def test_a_refusal_keeps_its_audit_event_and_drops_what_the_attempt_wrote(engine: Engine) -> None:
    with pytest.raises(PermissionError, match="over budget") as raised:
        _attempt(engine, AuditedRefusal(_event("attempt.refused"), PermissionError("over budget")))
    assert isinstance(raised.value.__cause__, AuditedRefusal)
    assert _actions(engine) == ["attempt.refused"]


def test_other_errors_pass_through_and_write_nothing_and_success_commits(engine: Engine) -> None:
    with pytest.raises(ValueError, match="broken"):
        _attempt(engine, ValueError("broken"))
    assert _actions(engine) == []
    _attempt(engine, None)
    assert _actions(engine) == ["attempt.written"]
