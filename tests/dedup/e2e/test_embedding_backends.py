"""The machine-specific half of an install, as `make setup` runs it (so an end-to-end test): each
exported embedding backend with the real all-MiniLM-L6-v2 (bundled, offline) on a few real
incident texts: it exports once from the local weights and a second load reuses the export; it
gives unit-norm float32 rows of the model's dimension, close to PyTorch's; its model id is not
PyTorch's; and the service picks it from GOLDENSET_EMBEDDING_BACKEND, or, for `auto`, from the
database's pool or this machine's measurement."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.embeddings import Vectors, body_text, title_text
from embedding import backend_choice
from embedding.backends import ExportedEncoder, backend_model_id
from embedding.models import SentenceTransformerEncoder, default_model_path
from schemas.common import utcnow
from schemas.dedup import ItemFingerprint
from schemas.item import Item
from schemas.source import Source
from service.core.settings import Settings
from service.dedup.encoder import effective_backend, get_encoder, model_identity

SUPPORT = Path(__file__).resolve().parents[2] / "support"
# Worst and mean cosine to PyTorch fp32 over the texts below: fp32 exports agree to rounding;
# int8 ones lose a little (most on the empty text), as bench/embedding_backends.py measures.
FLOORS = {"onnx": (0.9999, 0.9999), "onnx-int8": (0.93, 0.985), "openvino": (0.9999, 0.9999), "openvino-int8": (0.93, 0.985)}


def _texts() -> list[str]:
    paraphrases = json.loads((SUPPORT / "hadoop_paraphrases.json").read_text(encoding="utf-8"))["paraphrases"][:6]
    texts = []
    for entry in paraphrases:
        input_text = f"{entry['title']}\n\n{entry['description']}"
        texts += [body_text(entry["title"], input_text), title_text(entry["title"], input_text)]
    # Past the 256-token cut, a one-word text, and an empty one.
    return [*texts, " ".join(texts), "NameNode", ""]


TEXTS = _texts()


@pytest.fixture(scope="module", autouse=True)
def _offline() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model copied to a folder of its own, so exports land beside it in this test."""
    folder = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2"
    shutil.copytree(default_model_path(), folder)
    return folder


@pytest.fixture(scope="module")
def torch_vectors(model_copy: Path) -> Vectors:
    return SentenceTransformerEncoder(model_copy).encode(TEXTS)


@pytest.mark.parametrize("backend", list(FLOORS))
def test_a_backend_exports_once_and_gives_vectors_close_to_torch(backend: str, model_copy: Path, torch_vectors: Vectors, tmp_path: Path) -> None:
    first = ExportedEncoder(model_copy, backend=backend, cache_dir=tmp_path / "cache")
    assert first.exported and first.folder.parent == model_copy.parent / "all-MiniLM-L6-v2.exports"
    second = ExportedEncoder(model_copy, backend=backend, cache_dir=tmp_path / "cache")
    assert (second.exported, second.folder) == (False, first.folder)
    assert not (tmp_path / "cache").exists()
    assert second.model_id == backend_model_id(model_copy, backend) != backend_model_id(model_copy, "torch")
    vectors = second.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * torch_vectors, axis=1)
    worst, mean = FLOORS[backend]
    assert cosines.min() >= worst and cosines.mean() >= mean, f"{backend}: worst cosine to torch {cosines.min():.4f}, mean {cosines.mean():.4f}"
    alone = second.encode(TEXTS[:1])
    assert float(alone[0] @ vectors[0]) >= mean
    assert second.encode([]).shape == (0, 384)


def test_the_service_loads_the_backend_its_settings_name(model_copy: Path, tmp_path: Path) -> None:
    settings = Settings(embedding_model=str(model_copy), embedding_backend="onnx", embedding_max_seq_length=128, embedding_cache_dir=str(tmp_path / "cache"))
    encoder = get_encoder(settings)
    assert get_encoder(settings) is encoder
    assert encoder.model_id == model_identity(settings).model_id == backend_model_id(model_copy, "onnx", max_seq_length=128)
    assert encoder.model_id != model_identity(Settings(embedding_model=str(model_copy))).model_id
    assert encoder.encode(TEXTS[:2]).shape == (2, 384)


def test_auto_measures_once_per_machine_and_records_the_faster(model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[Path] = []
    real_measure = backend_choice.measure

    def counted(model_path: Path, **kwargs: Any) -> dict[str, Any]:
        measured.append(model_path)
        return real_measure(model_path, **kwargs)

    monkeypatch.setattr(backend_choice, "measure", counted)
    assert backend_choice.recorded_choice(model_copy, cache_dir=tmp_path / "cache") is None
    choice = backend_choice.machine_choice(model_copy, cache_dir=tmp_path / "cache")
    records = list((model_copy.parent / "all-MiniLM-L6-v2.exports").glob("auto-backend-*.json"))
    assert len(measured) == 1 and len(records) == 1
    record = json.loads(records[0].read_text(encoding="utf-8"))
    rates = record["rates"]
    assert record["choice"] == choice and rates["openvino"] > 0 and rates["openvino-int8"] > 0
    assert (choice == "openvino-int8") == (rates["openvino-int8"] >= backend_choice.INT8_MARGIN * rates["openvino"])
    assert record["facts"] == backend_choice.machine_facts()
    # Later calls, in this process or another, read the record.
    assert backend_choice.machine_choice(model_copy, cache_dir=tmp_path / "cache") == choice and len(measured) == 1
    assert backend_choice.recorded_choice(model_copy, cache_dir=tmp_path / "cache") == choice


def _pool_embedded_by(engine: Engine, model_ids: dict[str, int]) -> None:
    with Session(engine) as session:
        source = Source(name="pool", kind="file")
        session.add(source)
        session.flush()
        number = 0
        for model_id, count in model_ids.items():
            for _ in range(count):
                number += 1
                item = Item(
                    source_id=source.id or 0, external_id=str(number), occurred_at=utcnow(), input="x", content_hash=f"{number:064x}", record_digest="0" * 64, status="unique"
                )
                session.add(item)
                session.flush()
                session.add(ItemFingerprint(item_id=item.id or 0, recipe="r", minhash=b"", model_id=model_id, body_key="b", title_key="t"))
        session.commit()


def test_auto_goes_on_with_the_backend_the_pool_was_embedded_with(engine: Engine, model_copy: Path, tmp_path: Path) -> None:
    settings = Settings(embedding_model=str(model_copy), embedding_backend="auto", embedding_cache_dir=str(tmp_path / "cache"))
    machine = backend_choice.machine_choice(model_copy, cache_dir=tmp_path / "cache")
    # An empty pool: this machine's choice; a process that never embeds does not measure.
    assert effective_backend(settings, engine) == machine
    assert effective_backend(settings, engine, measure=False) == machine
    # A pool embedded by PyTorch goes on with openvino (its vectors, adopted); an int8 pool keeps its backend.
    torch_id, int8_id = backend_model_id(model_copy, "torch"), backend_model_id(model_copy, "onnx-int8")
    _pool_embedded_by(engine, {torch_id: 3, int8_id: 1})
    assert effective_backend(settings, engine) == "openvino"
    assert model_identity(settings, engine).model_id == backend_model_id(model_copy, "openvino")
    assert backend_choice.stored_choice({int8_id: 5, torch_id: 1}, model_copy) == "onnx-int8"
    assert backend_choice.stored_choice({"another-model@1234/seq256": 9}, model_copy) is None
    assert backend_choice.stored_choice({backend_model_id(model_copy, "openvino-int8", max_seq_length=128): 9}, model_copy) is None
    # An explicit backend is never second-guessed.
    assert effective_backend(Settings(embedding_model=str(model_copy), embedding_backend="torch"), engine) == "torch"
