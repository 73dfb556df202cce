"""Decisions taken one by one, each in a unit of work of its own, where a refused one is a result.

A command that decides many things in turn (undo these items, the decisions of an interactive
review pass) reports each refused one and carries on with the next. For it a refusal
(`curation.refusals.Refused`) is an outcome like any other, so `attempt` returns it instead of
raising it: the command prints it beside the others and decides its exit status from them, and
never catches a refusal itself. A command that takes one decision lets its refusal rise to the
command group instead (`service.cli`, `service.core.terminal.refusal_exit`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.refusals import Refused
from service.core.db import write_transaction

T = TypeVar("T")


def attempt(engine: Engine, decision: Callable[[Session], T]) -> T | Refused:
    """Run `decision(session)` in a unit of work of its own (`write_transaction`: committed when
    it returns) and return what it returns; when the domain refuses it, return the refusal, with
    nothing it wrote kept."""
    try:
        with write_transaction(engine) as session:
            return decision(session)
    except Refused as refusal:
        return refusal
