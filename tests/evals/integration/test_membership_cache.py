"""The per-process copy of eval memberships and item sources (`curation.releases.membership_cache`)
answers as the table does: as memberships are added between look-ups, when a membership with a
smaller id commits after one with a larger, for a session whose own memberships are not committed
yet, and after a source is renamed; and the sealed check gives the same answer with and without it."""

from __future__ import annotations

import random

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from curation.releases import membership_cache
from curation.releases.membership_cache import MembershipCache, cache_for
from curation.releases.visibility import _held, sealing_evals
from schemas.common import utcnow
from schemas.dedup import NearLink
from schemas.evals import Eval, EvalItem
from schemas.item import Item
from schemas.source import Source
from service.core.db import write_session

ITEMS = 120


def _pool(engine: Engine) -> tuple[list[int], list[int]]:
    """ITEMS items in two sources, and two evals (over one source each)."""
    with write_session(engine) as session:
        sources = [Source(name=name, kind="file", mapping={}) for name in ("alpha", "beta")]
        session.add_all(sources)
        session.flush()
        at = utcnow()
        items = [
            Item(source_id=sources[n % 2].id or 0, external_id=f"T-{n}", occurred_at=at, title=f"ticket {n}", input="broke", content_hash=f"{n:064x}", record_digest=f"{n:064x}")
            for n in range(ITEMS)
        ]
        session.add_all(items)
        evals = [Eval(name=f"eval-{name}", sources=[name], canary=f"canary-{name}", seal_key="", sealed_fraction=0.2) for name in ("alpha", "beta")]
        session.add_all(evals)
        session.commit()
        return sorted(item.id or 0 for item in items), sorted(evaluation.id or 0 for evaluation in evals)


def _members(engine: Engine, rows: list[tuple[int, int, str]]) -> None:
    if rows:
        with write_session(engine) as session:
            session.execute(insert(EvalItem), [{"eval_id": eval_id, "item_id": item_id, "split": split, "first_release": 1} for item_id, eval_id, split in rows])
            session.commit()


def _same_answers(cache: MembershipCache, engine: Engine, ids: list[int]) -> None:
    with Session(engine) as session:
        copied = cache.held(session, ids)
        assert copied is not None, "the copy answers for a session that sees every committed membership"
        assert copied == _held(session, ids)


def test_the_copy_answers_as_the_table_as_memberships_are_added(engine: Engine) -> None:
    ids, evals = _pool(engine)
    with Session(engine) as session:
        cache = cache_for(session)
    assert cache is not None
    rng = random.Random(7)
    unheld = [(item_id, eval_id) for item_id in ids for eval_id in evals]
    rng.shuffle(unheld)
    _same_answers(cache, engine, ids)
    for step in range(6):
        batch, unheld = unheld[: 5 + step * 7], unheld[5 + step * 7 :]
        _members(engine, [(item_id, eval_id, rng.choice(["dev", "sealed"])) for item_id, eval_id in batch])
        _same_answers(cache, engine, ids)
    assert cache.rebuilds == 1 and cache.catch_ups >= 5, "later memberships are read as a catch-up, not a rebuild"


def test_a_smaller_id_committed_late_makes_the_copy_rebuild(engine: Engine) -> None:
    ids, evals = _pool(engine)

    def member(row_id: int, item_id: int, split: str) -> None:
        with write_session(engine) as session:
            session.execute(insert(EvalItem), [{"id": row_id, "eval_id": evals[0], "item_id": item_id, "split": split, "first_release": 1}])
            session.commit()

    member(1000, ids[0], "dev")
    member(1002, ids[1], "sealed")
    with Session(engine) as session:
        cache = cache_for(session)
    assert cache is not None
    _same_answers(cache, engine, ids)
    # The id a transaction took first, committed after one that took a larger id.
    member(1001, ids[2], "sealed")
    _same_answers(cache, engine, ids)
    assert cache.rebuilds == 2 and cache.catch_ups == 0
    member(1003, ids[3], "dev")
    _same_answers(cache, engine, ids)
    assert cache.catch_ups == 1


def test_a_session_with_memberships_of_its_own_reads_the_table(engine: Engine) -> None:
    ids, evals = _pool(engine)
    with Session(engine) as session:
        cache = cache_for(session)
    assert cache is not None
    with write_session(engine) as session:
        session.add(EvalItem(eval_id=evals[0], item_id=ids[5], split="sealed", first_release=1))
        session.flush()
        assert cache.held(session, ids) is None, "the copy cannot see a membership not committed yet"
        assert ids[5] in sealing_evals(session=session, item_ids=[ids[5]], seal_key_of=_seal_key_of), "the session's own sealed membership counts"


def test_source_names_follow_a_rename(engine: Engine) -> None:
    ids, _ = _pool(engine)
    with Session(engine) as session:
        cache = cache_for(session)
        assert cache is not None
        assert set(cache.source_names(session, ids).values()) == {"alpha", "beta"}
    with write_session(engine) as session:
        source = session.exec(select(Source).where(Source.name == "alpha")).one()
        source.name = "gamma"
        session.add(source)
        session.commit()
    with Session(engine) as session:
        names = cache.source_names(session, [*ids, 10**9])
    assert set(names.values()) == {"gamma", "beta"}
    assert 10**9 not in names


def _seal_key_of(evaluation: Eval) -> bytes:
    return f"key-{evaluation.id}".encode().ljust(32, b"0")


def test_the_sealed_check_answers_alike_with_and_without_the_copy(engine: Engine) -> None:
    ids, evals = _pool(engine)
    rng = random.Random(11)
    pairs = {(max(a, b), min(a, b)) for a, b in (rng.sample(ids, 2) for _ in range(80))}
    with write_session(engine) as session:
        session.execute(insert(NearLink), [{"item_id": a, "other_id": b, "stage": "minhash", "score": 0.9, "recorded_at": utcnow()} for a, b in pairs])
        session.commit()
    _members(engine, [(item_id, rng.choice(evals), rng.choice(["dev", "dev", "dev", "sealed"])) for item_id in rng.sample(ids, 40)])
    with Session(engine) as session:
        with_copy = sealing_evals(session=session, item_ids=ids, seal_key_of=_seal_key_of)
        membership_cache.clear()
        original = membership_cache.cache_for
        membership_cache.cache_for = lambda session: None
        try:
            without = sealing_evals(session=session, item_ids=ids, seal_key_of=_seal_key_of)
        finally:
            membership_cache.cache_for = original
    assert with_copy == without
    assert with_copy, "some items are sealed"
