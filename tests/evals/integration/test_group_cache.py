"""The per-process copy of the near groups (`curation.releases.group_cache`) answers as following
links would: on random link sets, as links are added between lookups, when another process adds
links, when a link was recorded long before it committed, and for a session whose own links are
not committed yet."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from datetime import timedelta

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.releases.group_cache import cache_for, cached_groups
from curation.releases.groups import near_groups, traced_groups
from schemas.common import utcnow
from schemas.dedup import NearLink
from schemas.item import Item
from schemas.source import Source
from service.core.db import write_session
from tests.conftest import REPO_ROOT

ITEMS = 240


def _items(engine: Engine, count: int = ITEMS) -> list[int]:
    with write_session(engine) as session:
        source = Source(name="tickets", kind="file", mapping={})
        session.add(source)
        session.flush()
        assert source.id is not None
        at = utcnow()
        items = [
            Item(source_id=source.id, external_id=f"T-{n}", occurred_at=at, title=f"ticket {n}", input=f"ticket {n} broke", content_hash=f"{n:064x}", record_digest=f"{n:064x}")
            for n in range(count)
        ]
        session.add_all(items)
        session.commit()
        return sorted(item.id for item in items if item.id is not None)


def _link(engine: Engine, pairs: list[tuple[int, int]], *, ago: timedelta = timedelta(0)) -> None:
    rows = [{"item_id": max(pair), "other_id": min(pair), "stage": "minhash", "score": 0.9, "recorded_at": utcnow() - ago} for pair in pairs]
    if rows:
        with write_session(engine) as session:
            session.execute(insert(NearLink), rows)
            session.commit()


def _random_links(rng: random.Random, ids: list[int], stored: set[frozenset[int]], count: int) -> list[tuple[int, int]]:
    """`count` new links: most inside a few clusters of ids (groups grow and merge), some anywhere."""
    pairs: list[tuple[int, int]] = []
    while len(pairs) < count:
        if rng.random() < 0.7:
            start = rng.randrange(0, len(ids) - 12, 12)
            first, second = rng.sample(ids[start : start + 12], 2)
        else:
            first, second = rng.sample(ids, 2)
        if frozenset((first, second)) not in stored:
            stored.add(frozenset((first, second)))
            pairs.append((first, second))
    return pairs


def _same_answers(engine: Engine, rng: random.Random, ids: list[int]) -> None:
    with Session(engine) as session:
        for size in (1, 5, 50, ITEMS):
            asked = rng.sample(ids, size)
            cached = cached_groups(session, asked)
            assert cached is not None, "the copy answers for a session that sees every committed link"
            assert cached == traced_groups(session, asked)
            assert near_groups(session, asked) == cached


def test_the_copy_answers_as_following_links_on_random_links_added_between_lookups(engine: Engine) -> None:
    ids = _items(engine)
    rng = random.Random(20240611)
    stored: set[frozenset[int]] = set()
    _same_answers(engine, rng, ids)  # no link yet: every item alone
    for batch in (40, 1, 25, 3, 60, 2, 90):
        _link(engine, _random_links(rng, ids, stored, batch))
        _same_answers(engine, rng, ids)
    with Session(engine) as session:
        cache = cache_for(session)
    assert cache is not None and cache.groups is not None
    assert cache.groups.count == len(stored)
    assert cache.rebuilds == 1, "links added later extend the copy"
    assert cache.catch_ups == 7
    largest = max(len(group) for group in {**cache.groups.base, **cache.groups.overlay}.values())
    assert largest > 12, "clusters were joined into larger groups"


def test_a_link_recorded_long_before_it_commits_is_seen(engine: Engine) -> None:
    ids = _items(engine, 20)
    _link(engine, [(ids[0], ids[1]), (ids[2], ids[3])])
    with Session(engine) as session:
        assert near_groups(session, [ids[0]])[ids[0]] == {ids[0], ids[1]}
    # Recorded two days ago (a long curation batch), committed only now: before the window a
    # catch-up reads, so the copy is rebuilt when the count does not add up.
    _link(engine, [(ids[1], ids[2])], ago=timedelta(days=2))
    with Session(engine) as session:
        assert near_groups(session, [ids[0]])[ids[0]] == {ids[0], ids[1], ids[2], ids[3]}
        assert near_groups(session, ids) == traced_groups(session, ids)
        cache = cache_for(session)
    assert cache is not None and cache.rebuilds == 2


def test_links_a_session_has_not_committed_are_followed_and_never_copied(engine: Engine) -> None:
    ids = _items(engine, 20)
    _link(engine, [(ids[0], ids[1])])
    with Session(engine) as session:
        assert near_groups(session, [ids[0]])[ids[0]] == {ids[0], ids[1]}
    with write_session(engine) as writer:
        writer.execute(insert(NearLink), [{"item_id": ids[5], "other_id": ids[1], "stage": "override", "score": None, "recorded_at": utcnow()}])
        assert near_groups(writer, [ids[0]])[ids[0]] == {ids[0], ids[1], ids[5]}, "the session's own link counts"
        assert cached_groups(writer, [ids[0]]) is None
        cache = cache_for(writer)
        assert cache is not None and cache.groups is not None and cache.groups.count == 1
        writer.rollback()
    # Another link, so the table holds as many rows as the rolled-back session saw.
    _link(engine, [(ids[7], ids[8])])
    with Session(engine) as session:
        assert near_groups(session, [ids[0], ids[7]]) == {ids[0]: {ids[0], ids[1]}, ids[1]: {ids[0], ids[1]}, ids[7]: {ids[7], ids[8]}, ids[8]: {ids[7], ids[8]}}
        assert near_groups(session, ids) == traced_groups(session, ids)


ADD_LINK = """
import sys
from sqlalchemy import insert
from schemas.common import utcnow
from schemas.dedup import NearLink
from service.core.db import make_engine, write_session
engine = make_engine(sys.argv[1])
with write_session(engine) as session:
    session.execute(insert(NearLink), [{"item_id": int(sys.argv[2]), "other_id": int(sys.argv[3]), "stage": "embedding", "score": 0.88, "recorded_at": utcnow()}])
    session.commit()
engine.dispose()
"""


def test_links_another_process_adds_are_seen(engine: Engine, database_url: str) -> None:
    ids = _items(engine, 20)
    _link(engine, [(ids[0], ids[1])])
    with Session(engine) as session:
        assert near_groups(session, [ids[3]]) == {ids[3]: {ids[3]}}
        before = cache_for(session)
    assert before is not None and before.groups is not None and before.groups.count == 1
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", ADD_LINK, database_url, str(ids[3]), str(ids[1])], check=True, env=environment, timeout=120)
    with Session(engine) as session:
        assert near_groups(session, [ids[3]])[ids[3]] == {ids[0], ids[1], ids[3]}
        cache = cache_for(session)
    assert cache is before and cache.groups is not None and cache.groups.count == 2
