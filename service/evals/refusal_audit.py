"""Refusals that are audited although the refused attempt leaves nothing else behind.

A sealed read over budget, a sealed review window over budget, a sealed run or a probe the gate
refuses: each is refused inside the unit of work that would have taken it, and its audit event
must stay although that unit of work rolls back. The code that decides raises `AuditedRefusal`
(the event, and the refusal its caller answers); the caller runs the unit of work inside
`refusals_audited`, which, once the unit of work has rolled back and handed its connection back,
writes the event in a unit of work of its own and raises the refusal. No transaction ever commits
half of a refused attempt, and no two connections are held at once.

A caller that leaves out `refusals_audited` gets the `AuditedRefusal` itself, which no handler
answers: the refusal cannot go unaudited by mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from schemas.audit import AuditEvent
from service.core.db import write_transaction


class AuditedRefusal(Exception):
    """`refusal` (what the caller answers) with `event`, the audit event that records it."""

    def __init__(self, event: AuditEvent, refusal: Exception) -> None:
        super().__init__(str(refusal))
        self.event = event
        self.refusal = refusal


@contextmanager
def refusals_audited(engine: Engine) -> Iterator[None]:
    """Run the block (a unit of work on `engine`, entered inside this one); when it raises
    `AuditedRefusal`, write the refusal's audit event in a unit of work of its own and raise the
    refusal in its place."""
    try:
        yield
    except AuditedRefusal as audited:
        with write_transaction(engine) as session:
            session.add(audited.event)
        raise audited.refusal from audited
