"""A switch of embedding backend on real curated Hadoop reports, on every database backend: the
fp32 ONNX export of the bundled model is checked against the PyTorch vectors stored, found
equivalent and its vectors adopted without re-encoding the pool (recorded, and curation goes on);
the int8 export is not equivalent, is refused with the measured cosine and both ways on, and
nothing is written."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.embeddings import Encoder, Vectors, body_text, title_text
from curation.dedup.equivalence import EQUIVALENT_COSINE, check_equivalence
from curation.dedup.index import MixedRecipeError
from embedding.backends import ExportedEncoder, backend_of, same_model
from embedding.models import SentenceTransformerEncoder, default_model_path
from schemas.common import utcnow
from schemas.dedup import Embedding, EmbeddingEquivalence, ItemFingerprint
from schemas.item import Item, ItemStatus
from service.cli import app
from service.core.settings import Settings
from service.dedup.runner import run_curation, run_refingerprint
from tests.dedup_support import MemoEncoder, hadoop_reports, ingest
from tests.support.command_line import command_line

POOL = 30


class Recording:
    """An encoder that records the texts of each call it gets."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return self.inner.encode(texts)


@pytest.fixture(scope="session")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bundled model copied to a folder of its own, so its exports land beside it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        folder = tmp_path_factory.mktemp("equivalence-models") / "all-MiniLM-L6-v2"
        shutil.copytree(default_model_path(), folder)
        yield folder


@pytest.fixture(scope="session")
def torch(model_copy: Path) -> MemoEncoder:
    """The model run by PyTorch, whatever backend the settings default to."""
    return MemoEncoder(SentenceTransformerEncoder(model_copy))


@pytest.fixture(scope="session")
def onnx(model_copy: Path) -> ExportedEncoder:
    return ExportedEncoder(model_copy, backend="onnx", cache_dir=model_copy.parent / "cache")


@pytest.fixture(scope="session")
def onnx_int8(model_copy: Path) -> ExportedEncoder:
    return ExportedEncoder(model_copy, backend="onnx-int8", cache_dir=model_copy.parent / "cache")


def _texts(engine: Engine) -> set[str]:
    """The body and title texts of every decided item, as curation embeds them."""
    with Session(engine) as session:
        items = session.exec(select(Item).where(Item.status != ItemStatus.CANDIDATE.value)).all()
    return {text for item in items for text in (body_text(item.title, item.input), title_text(item.title, item.input))}


def _curated(engine: Engine, settings: Settings, encoder: Encoder, count: int = POOL) -> list[dict[str, str]]:
    reports = hadoop_reports(count)
    ingest(engine, "hadoop", reports)
    assert run_curation(engine, settings, encoder=encoder).decided == count
    return reports


def _stored(engine: Engine) -> tuple[dict[str | None, int], dict[str, int], int]:
    """Fingerprints and embeddings by model id, and recorded switches."""
    with Session(engine) as session:
        fingerprints = dict(session.exec(select(ItemFingerprint.model_id, func.count()).group_by(col(ItemFingerprint.model_id))).all())
        embeddings = dict(session.exec(select(Embedding.model_id, func.count()).group_by(col(Embedding.model_id))).all())
        switches = session.exec(select(func.count()).select_from(EmbeddingEquivalence)).one()
    return fingerprints, embeddings, switches


def test_the_onnx_export_adopts_the_torch_vectors_and_curation_goes_on(engine: Engine, settings: Settings, torch: MemoEncoder, onnx: ExportedEncoder) -> None:
    assert same_model(torch.model_id, onnx.model_id) and backend_of(onnx.model_id) == "onnx"
    reports = _curated(engine, settings, torch)
    old = _texts(engine)
    later = hadoop_reports(POOL + 4)[POOL:]
    repeat = copy.deepcopy(reports[0])
    repeat.update(id="REPEAT-0", created="2023-01-01T00:00:00")
    ingest(engine, "hadoop", [*later, repeat])

    recording = Recording(onnx)
    summary = run_curation(engine, settings, encoder=recording)

    check, *rest = recording.calls
    assert set(check) <= old and len(check) == 2 * POOL  # one call checks the sample (the whole small pool)
    assert not old & {text for call in rest for text in call}  # no old text is encoded again
    assert summary.decided == 5 and summary.encoded == sum(len(call) for call in rest) == 2 * len(later)
    with Session(engine) as session:
        switch = session.exec(select(EmbeddingEquivalence)).one()
        copied = session.exec(select(Item).where(Item.external_id == "REPEAT-0")).one()
        original = session.exec(select(Item).where(Item.external_id == reports[0]["id"])).one()
        assert (switch.from_model_id, switch.to_model_id, switch.texts) == (torch.model_id, onnx.model_id, 2 * POOL)
        assert EQUIVALENT_COSINE <= switch.min_cosine <= switch.mean_cosine <= 1.0001
        print(f"torch -> onnx over {switch.texts} stored texts: min cosine {switch.min_cosine:.7f}, mean {switch.mean_cosine:.7f}")
        assert (copied.status, copied.duplicate_of) == (ItemStatus.DUPLICATE.value, original.id)
        assert len(Deduplicator(clock=utcnow, encoder=onnx).load(session)) == POOL + 5
    fingerprints, embeddings, _ = _stored(engine)
    assert fingerprints == {onnx.model_id: POOL + 5}
    assert embeddings == {torch.model_id: 2 * POOL, onnx.model_id: 2 * POOL + 2 * len(later)}
    assert run_refingerprint(engine, settings, encoder=onnx).items == 0


def test_refingerprint_adopts_equivalent_vectors_instead_of_encoding(
    engine: Engine, database_url: str, settings: Settings, torch: MemoEncoder, onnx: ExportedEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _curated(engine, settings, torch, count=12)
    recording = Recording(onnx)
    with command_line(database_url, monkeypatch, encoder=recording) as cli:
        done = cli.invoke(app, ["curate", "--refingerprint"])
    assert done.exit_code == 0, done.output
    shown = " ".join(done.output.split())
    assert f"adopted the vectors stored under {torch.model_id} instead of re-encoding them: {onnx.model_id} agrees with them" in shown
    assert "re-fingerprinted" not in shown and len(recording.calls) == 1
    fingerprints, _, switches = _stored(engine)
    assert fingerprints == {onnx.model_id: 12} and switches == 1


def test_the_int8_export_is_refused_with_the_measured_cosine_and_nothing_is_written(engine: Engine, settings: Settings, torch: MemoEncoder, onnx_int8: ExportedEncoder) -> None:
    _curated(engine, settings, torch, count=20)
    ingest(engine, "hadoop", hadoop_reports(22)[20:])
    before = _stored(engine)
    with Session(engine) as session:
        measured = check_equivalence(session, onnx_int8, torch.model_id)
    assert measured.texts == 40 and not measured.equivalent and 0.9 < measured.min_cosine < EQUIVALENT_COSINE
    print(f"torch -> onnx-int8 over {measured.texts} stored texts: min cosine {measured.min_cosine:.6f}, mean {measured.mean_cosine:.6f}")

    recording = Recording(onnx_int8)
    with pytest.raises(MixedRecipeError) as refused:
        run_curation(engine, settings, encoder=recording)
    message = str(refused.value)
    assert f"min cosine of {measured.min_cosine:.5f} over 40 stored texts" in message
    assert "GOLDENSET_EMBEDDING_BACKEND=torch" in message and "goldenset curate --refingerprint" in message
    assert torch.model_id in message and onnx_int8.model_id in message
    assert _stored(engine) == before
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Item).where(Item.status == ItemStatus.CANDIDATE.value)).one() == 2

    # A pair that failed is not checked again by this process; the message still says why.
    calls = len(recording.calls)
    with pytest.raises(MixedRecipeError, match="min cosine of"):
        run_curation(engine, settings, encoder=recording)
    assert len(recording.calls) == calls == 1

    # The other way on: re-encode everything with the int8 export, then curate.
    redone = run_refingerprint(engine, settings, encoder=recording)
    assert (redone.items, redone.encoded) == (20, 40)
    assert run_curation(engine, settings, encoder=recording).decided == 2
    fingerprints, _, switches = _stored(engine)
    assert fingerprints == {onnx_int8.model_id: 22} and switches == 0
