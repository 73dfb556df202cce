"""Audit events of content reads: a large read names a stored set of item ids once (not a copy of
the ids per event), the audit listing gives the ids back either way, and concurrent reads share a
transaction while each still waits for its own event to be committed."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from sqlalchemy import event, func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlmodel import Session, select

from schemas.audit import AuditEvent, AuditItemSet
from service.core.audit import INLINE_IDS, ContentRead, list_events, record_read
from service.evals.read_audit import GroupCommit
from tests.conftest import TEST_SECRET_KEY

T = TypeVar("T")
MANY = list(range(5000, 5000 + INLINE_IDS + 50))


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on an event loop of its own thread (a browser test may leave this thread's
    loop running)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _read(actor: str, ids: list[int]) -> ContentRead:
    return ContentRead(actor=actor, action="release.items_read", endpoint="GET /v1/evals/ops/releases/1/items", object_type="release", object_id="ops/1", item_ids=ids)


def test_a_large_read_names_one_stored_set_and_the_listing_gives_the_ids_back(engine: Engine) -> None:
    for actor in ("token:a", "token:b"):
        record_read(engine, actor=actor, action="release.items_read", endpoint="GET /x", object_type="release", object_id="ops/1", item_ids=list(reversed(MANY)))
    record_read(engine, actor="token:c", action="item.read", endpoint="GET /v1/items/7", object_type="item", object_id=None, item_ids=[7, 3, 7])
    with Session(engine) as session:
        sets = session.exec(select(AuditItemSet)).all()
        assert [(row.count, row.item_ids) for row in sets] == [(len(MANY), MANY)]
        stored = {event.actor: event for event in session.exec(select(AuditEvent))}
        for actor in ("token:a", "token:b"):
            assert stored[actor].details["item_set"] == sets[0].digest and "item_ids" not in stored[actor].details
            assert stored[actor].count == len(MANY)
        assert stored["token:c"].details["item_ids"] == [3, 7] and stored["token:c"].count == 2
        listed = {event.actor: event for event in list_events(session=session, secret_key=TEST_SECRET_KEY).events}
    assert listed["token:a"].details["item_ids"] == listed["token:b"].details["item_ids"] == MANY
    assert listed["token:c"].details["item_ids"] == [3, 7]


def test_a_set_whose_write_was_rolled_back_is_stored_by_the_next_read(engine: Engine) -> None:
    """The process remembers a set as stored only once its transaction committed."""
    with pytest.raises((TypeError, StatementError)):  # a detail JSON cannot hold
        record_read(engine, actor="token:a", action="release.items_read", endpoint="GET /x", object_type="release", object_id="ops/1", item_ids=MANY, details={"bad": {1, 2}})
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(AuditItemSet)).one() == 0
    record_read(engine, actor="token:a", action="release.items_read", endpoint="GET /x", object_type="release", object_id="ops/1", item_ids=MANY)
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(AuditItemSet)).one() == 1
        (event,) = list_events(session=session, secret_key=TEST_SECRET_KEY).events
    assert event.details["item_ids"] == MANY


def test_concurrent_reads_share_transactions_and_each_waits_for_its_event(engine: Engine) -> None:
    commits = 0

    def count_commit(_connection: object) -> None:
        nonlocal commits
        commits += 1

    event.listen(engine, "commit", count_commit)
    group = GroupCommit(engine)

    async def main() -> None:
        await asyncio.gather(*(group.record(_read(f"token:{number}", [number, number + 1])) for number in range(24)))

    _run(main())
    event.remove(engine, "commit", count_commit)
    with Session(engine) as session:
        assert sorted(event.actor for event in session.exec(select(AuditEvent))) == sorted(f"token:{number}" for number in range(24))
    assert 1 <= commits < 24  # the first read's transaction runs alone; the rest wait together


def test_a_failed_batch_fails_every_read_in_it_and_the_next_one_commits(engine: Engine) -> None:
    group = GroupCommit(engine)
    broken = ContentRead(actor="token:x", action="release.items_read", endpoint="GET /x", object_type="release", object_id="ops/1", item_ids=[1], details={"bad": {1}})

    async def main() -> list[BaseException | None]:
        outcomes = await asyncio.gather(group.record(broken), return_exceptions=True)
        await group.record(_read("token:after", [4]))
        return list(outcomes)

    outcomes = _run(main())
    assert isinstance(outcomes[0], TypeError | StatementError)
    with Session(engine) as session:
        assert [event.actor for event in session.exec(select(AuditEvent))] == ["token:after"]
