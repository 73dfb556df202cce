"""The approximate dedup index over a real database, forced on with a low threshold: the same
nearest answers and the same curation decisions as exact search on Hadoop reports, its file saved
once and opened afterwards, completed with items decided after it was saved, and never opened for
another database or model."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.ann_graph import GraphFile
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.fingerprints import MinHashRecipe, from_bytes
from curation.dedup.index import SimilarityIndex
from curation.dedup.rules import DedupConfig
from curation.dedup.sketch_table import SketchTable
from embedding.index_files import IndexFolder
from schemas.common import utcnow
from schemas.dedup import DedupDecision, Embedding, ItemFingerprint
from schemas.item import Item
from service.core.db import make_engine, migrate, write_session
from tests.dedup.unit.test_ann_index import GRAPH
from tests.dedup_support import hadoop_reports, ingest, planted
from tests.eval_support import HashingEncoder

POOL = 1000
LATER = 300


class OtherHashingEncoder(HashingEncoder):
    """The same vectors under another model id."""

    model_id = "test-hashing-256-other"


@dataclasses.dataclass(frozen=True)
class _Setup:
    """A dedup configuration and the files its index keeps (None: built in memory)."""

    config: DedupConfig
    files: IndexFolder | None = None


EXACT = _Setup(DedupConfig())


def _config(folder: Path, **ann: Any) -> _Setup:
    """The approximate index forced on, kept in `folder`, with the denser graph that hashed word counts need (tests/dedup/unit/test_ann_index.py)."""
    return _Setup(DedupConfig(ann=dataclasses.replace(GRAPH, **ann)), IndexFolder(folder))


def _curate(engine: Engine, records: list[dict[str, Any]], config: DedupConfig | None = None) -> None:
    ingest(engine, "hadoop", records)
    with write_session(engine) as session:
        Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=config or DedupConfig()).curate(session)
        session.commit()


def _load(engine: Engine, setup: _Setup, encoder: HashingEncoder | None = None) -> SimilarityIndex:
    with Session(engine) as session:
        return Deduplicator(clock=utcnow, encoder=encoder or HashingEncoder(), config=setup.config, files=setup.files).load(session)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the graphs built from now on."""
    built: list[int] = []
    original = GraphFile.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[GraphFile], /, rows: Any, count: int, **kwargs: Any) -> GraphFile:
        built.append(count)
        result: GraphFile = original(cls, rows, count, **kwargs)
        return result

    monkeypatch.setattr(GraphFile, "build", classmethod(counting))
    return built


def test_nearest_answers_equal_exact_search(engine: Engine, tmp_path: Path) -> None:
    _curate(engine, hadoop_reports(POOL + LATER))
    exact = _load(engine, EXACT)
    approximate = _load(engine, _config(tmp_path))
    assert exact.ann is None and approximate.ann is not None and len(approximate.ann) == len(exact)
    same = same_before = 0
    for item in exact.entries():
        body, title = exact.vectors(item.item_id)
        expected = {n.item_id for n in exact.nearest(body, title, 10, exclude=[item.item_id])}
        found = approximate.nearest(body, title, 10, exclude=[item.item_id])
        assert item.item_id not in {n.item_id for n in found}
        same += {n.item_id for n in found} == expected
        earlier = approximate.nearest(body, title, 10, exclude=[item.item_id], before=item.occurred_at)
        assert all(approximate.get(n.item_id).occurred_at < item.occurred_at for n in earlier)
        same_before += {n.item_id for n in earlier} == {n.item_id for n in exact.nearest(body, title, 10, exclude=[item.item_id], before=item.occurred_at)}
    assert same >= 0.99 * len(exact) and same_before >= 0.99 * len(exact)


def _decisions(session: Session, item_ids: set[int]) -> dict[int, tuple[Any, ...]]:
    rows = session.exec(select(DedupDecision).where(col(DedupDecision.item_id).in_(item_ids))).all()
    return {row.item_id: (row.status, row.stage, row.details.get("rule"), row.matched_item_id, row.score) for row in rows}


def test_curation_decides_as_with_exact_search(engine: Engine, tmp_path: Path) -> None:
    reports = hadoop_reports(POOL + LATER)
    _curate(engine, reports[:POOL])
    ingest(engine, "hadoop", [*reports[POOL:], *planted(reports).values()])
    with Session(engine) as session:
        pending = {item.id for item in session.exec(select(Item).where(Item.status == "candidate")) if item.id is not None}
    decided = {}
    for name, setup in (("exact", EXACT), ("approximate", _config(tmp_path))):
        with write_session(engine) as session:
            deduplicator = Deduplicator(clock=utcnow, encoder=HashingEncoder(), config=setup.config, files=setup.files)
            deduplicator.curate(session)
            assert (deduplicator.index is not None and deduplicator.index.ann is not None) == (name == "approximate")
            decided[name] = _decisions(session, pending)
            session.rollback()
    exact, approximate = decided["exact"], decided["approximate"]
    assert len(exact) == len(pending) >= LATER
    assert sum(status != "unique" for status, *_ in exact.values()) >= 4
    for item_id, (status, stage, rule, matched, score) in exact.items():
        assert approximate[item_id][:4] == (status, stage, rule, matched), item_id
        assert (approximate[item_id][4] is None) == (score is None)
        if score is not None:
            assert approximate[item_id][4] == pytest.approx(score, abs=5e-3)


def test_the_file_is_saved_once_and_completed_with_later_items(engine: Engine, tmp_path: Path, builds: list[int]) -> None:
    reports = hadoop_reports(POOL + 40)
    _curate(engine, reports[:POOL])
    config = _config(tmp_path / "ann")
    first = _load(engine, config)
    assert first.ann is not None and first.ann.origin == "built" and builds == [len(first)]
    assert len(list((tmp_path / "ann").glob("*.faiss"))) == 1 and len(list((tmp_path / "ann").glob("*.npz"))) == 1
    second = _load(engine, config)
    assert second.ann is not None and second.ann.origin == "opened" and second.ann.beside == 0 and builds == [len(first)]

    _curate(engine, reports[POOL:])
    third = _load(engine, config)
    assert third.ann is not None and third.ann.origin == "opened" and builds == [len(first)]
    added = [item for item in third.entries() if item.item_id not in first]
    assert added and third.ann.beside == len(added)
    for item in added:
        body, title = third.vectors(item.item_id)
        assert item.item_id in {n.item_id for n in third.nearest(body, title, 10)}

    # Too many items missing from the file: rebuilt and saved again.
    _curate(engine, hadoop_reports(POOL + 200)[POOL + 40 :])
    fourth = _load(engine, _config(tmp_path / "ann", rebuild_share=0.05))
    assert fourth.ann is not None and fourth.ann.origin == "built" and fourth.ann.beside == 0 and builds[-1] == len(fourth)
    assert len(list((tmp_path / "ann").glob("*.faiss"))) == 1


def _origin(index: SimilarityIndex) -> str:
    assert index.ann is not None
    return index.ann.origin


def test_a_file_of_another_database_or_model_is_never_used(engine: Engine, tmp_path: Path, builds: list[int]) -> None:
    reports = hadoop_reports(200)
    folder = tmp_path / "ann"
    _curate(engine, reports)
    assert _origin(_load(engine, _config(folder))) == "built"
    (first_stem,) = (path.stem for path in folder.glob("*.npz"))

    other = make_engine(f"sqlite:///{tmp_path / 'other.db'}")
    migrate(other)
    _curate(other, reports)
    assert _origin(_load(other, _config(folder))) == "built"
    (second_stem,) = (path.stem for path in folder.glob("*.npz") if path.stem != first_stem)
    # The first database's file under the second one's name is refused: it records which database it holds.
    shutil.copyfile(folder / f"{first_stem}.npz", folder / f"{second_stem}.npz")
    builds.clear()
    assert _origin(_load(other, _config(folder))) == "built"
    assert _origin(_load(engine, _config(folder))) == "opened"
    assert len(builds) == 1
    other.dispose()

    # The same items, their vectors stored under another model id: another file.
    with write_session(engine) as session:
        for row in session.exec(select(Embedding).where(Embedding.model_id == HashingEncoder.model_id)).all():
            session.add(Embedding(text_hash=row.text_hash, model_id=OtherHashingEncoder.model_id, dim=row.dim, vector=row.vector))
        session.exec(update(ItemFingerprint).where(col(ItemFingerprint.model_id) == HashingEncoder.model_id).values(model_id=OtherHashingEncoder.model_id))
        session.commit()
    assert _origin(_load(engine, _config(folder), OtherHashingEncoder())) == "built"
    assert _origin(_load(engine, _config(folder), OtherHashingEncoder())) == "opened"
    assert len(builds) == 2 and len(list(folder.glob("*.npz"))) == 3


def test_a_small_pool_stays_exact(engine: Engine, tmp_path: Path) -> None:
    _curate(engine, hadoop_reports(100))
    index = _load(engine, _config(tmp_path / "ann", min_items=1000))
    assert index.ann is None and not (tmp_path / "ann").exists()


def _same_answers(index: SimilarityIndex, reference: SimilarityIndex, engine: Engine) -> None:
    """`index` knows and finds what `reference` (built in memory from the same database) does."""
    assert len(index) == len(reference)
    with Session(engine) as session:
        fingerprints = {row.item_id: row for row in session.exec(select(ItemFingerprint))}
    recipe = MinHashRecipe()
    for entry in reference.entries():
        assert index.get(entry.item_id) == entry
        assert index.exact(entry.content_hash) == reference.exact(entry.content_hash)
        sketch = from_bytes(fingerprints[entry.item_id].minhash, recipe)
        assert sorted(index.near(sketch)) == sorted(reference.near(sketch))


def test_the_sketch_table_is_saved_once_opened_after_and_holds_changes_beside(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables: list[int] = []
    original = SketchTable.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[SketchTable], /, **kwargs: Any) -> SketchTable:
        tables.append(len(kwargs["item_ids"]))
        result: SketchTable = original(cls, **kwargs)
        return result

    monkeypatch.setattr(SketchTable, "build", classmethod(counting))
    reports = hadoop_reports(POOL + 40)
    _curate(engine, reports[:POOL])
    config = _config(tmp_path / "ann")
    first = _load(engine, config)
    assert tables == [len(first)] and len(list((tmp_path / "ann").glob("*.sketches"))) == 1 and not first.beside
    second = _load(engine, config)
    assert second.table is not None and isinstance(second.table.values, np.memmap) and not second.beside and tables == [len(first)]
    in_memory = _load(engine, EXACT)
    assert tables == [len(first), len(first)] and in_memory.ann is None
    _same_answers(second, in_memory, engine)

    # One item's text changed (decided again) and 40 new ones: held beside the table, which is opened, not rebuilt.
    changed = {**reports[5], "description": f"{reports[5]['description']}\nA new paragraph about a different failure entirely."}
    _curate(engine, [changed, *reports[POOL:]])
    third = _load(engine, config)
    assert len(tables) == 3 and third.table is not None and isinstance(third.table.values, np.memmap)
    changed_id = next(entry.item_id for entry in third.entries() if entry.item_id not in first or first.get(entry.item_id) != third.get(entry.item_id))
    assert len(third.beside) == 41 and changed_id in {third.get(int(third.item_ids.view[position])).item_id for position in third.beside}
    _same_answers(third, _load(engine, EXACT), engine)
