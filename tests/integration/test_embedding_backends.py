"""Each exported embedding backend with the real all-MiniLM-L6-v2 (bundled, offline) on a few real
incident texts: it exports once from the local weights and a second load reuses the export; it
gives unit-norm float32 rows of the model's dimension, close to PyTorch's; its model id is not
PyTorch's; and the service picks it from GOLDENSET_EMBEDDING_BACKEND."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from curation.dedup.backends import ExportedEncoder, backend_model_id
from curation.dedup.embeddings import SentenceTransformerEncoder, Vectors, body_text, default_model_path, title_text
from service.core.settings import Settings
from service.dedup.encoder import get_encoder, model_identity

SUPPORT = Path(__file__).resolve().parents[1] / "support"
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
