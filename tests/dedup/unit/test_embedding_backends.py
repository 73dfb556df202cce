"""Embedding backends without running a model: ids that keep backends' vectors apart, the export
cache's places and its reuse, length-aware batching and pooling, and the settings that pick one."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest

from embedding import backends
from embedding.backends import BACKENDS, backend_model_id, ensure_export, export_roots, find_export, length_batches, mean_pool
from embedding.models import model_id_of
from service.core.settings import Settings


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    """A stand-in model folder: only file names and sizes matter to ids and export names."""
    folder = tmp_path / "models" / "tiny-model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": True}))
    return folder


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """Record each export build instead of running one: it writes the backend's artefacts."""
    made: list[tuple[str, Path]] = []

    def build(model_path: Path, backend: str, folder: Path) -> dict[str, Any]:
        made.append((backend, folder))
        for artefact in backends.ARTEFACTS[backend]:
            (folder / artefact).write_bytes(b"graph")
        (folder / "work.tmp").write_bytes(b"left by a build")
        return {"backend": backend}

    monkeypatch.setattr(backends, "_build", build)
    return made


def test_each_backend_is_its_own_model_and_torch_keeps_the_stored_id(model_folder: Path) -> None:
    ids = {backend: backend_model_id(model_folder, backend, max_seq_length=256) for backend in BACKENDS}
    assert ids["torch"] == model_id_of(model_folder, max_seq_length=256)
    assert len(set(ids.values())) == len(BACKENDS)
    assert all(model_id.startswith(ids["torch"]) and len(model_id) <= 255 for model_id in ids.values())
    assert backend_model_id(model_folder, "onnx-int8", max_seq_length=128) != ids["onnx-int8"]


def test_an_unknown_backend_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="openvino-int8"):
        backend_model_id(None, "tensorrt")


def test_the_settings_offer_exactly_the_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(BACKENDS) <= set(get_args(Settings.model_fields["embedding_backend"].annotation))
    assert Settings().embedding_backend == "auto"
    monkeypatch.setenv("GOLDENSET_EMBEDDING_BACKEND", "openvino-int8")
    monkeypatch.setenv("GOLDENSET_EMBEDDING_MAX_SEQ_LENGTH", "128")
    settings = Settings()
    assert (settings.embedding_backend, settings.embedding_max_seq_length) == ("openvino-int8", 128)
    monkeypatch.setenv("GOLDENSET_EMBEDDING_BACKEND", "tensorrt")
    with pytest.raises(ValueError, match="embedding_backend"):
        Settings()


def test_an_export_is_made_once_beside_the_model_and_then_reused(model_folder: Path, tmp_path: Path, builds: list[tuple[str, Path]]) -> None:
    cache = tmp_path / "cache"
    folder, made = ensure_export(model_folder, "onnx-int8", cache_dir=cache)
    assert made and folder.parent == export_roots(model_folder, cache)[0] == model_folder.parent / "tiny-model.exports"
    assert sorted(path.name for path in folder.iterdir()) == ["export.json", "model.onnx"]
    again, made_again = ensure_export(model_folder, "onnx-int8", cache_dir=cache)
    assert (again, made_again) == (folder, False) and len(builds) == 1
    leftovers = [path.name for path in folder.parent.iterdir() if path.name.startswith(".") and not path.name.endswith(".lock")]
    assert not cache.exists() and not leftovers, "no staging folder is left behind"
    assert model_id_of(model_folder) == backend_model_id(model_folder, "torch"), "an export never changes the model folder's id"


def test_where_the_model_folder_is_not_writable_the_cache_folder_is_used(model_folder: Path, tmp_path: Path, builds: list[tuple[str, Path]]) -> None:
    export_roots(model_folder, tmp_path)[0].write_text("a file where the exports folder would go")
    cache = tmp_path / "cache"
    folder, made = ensure_export(model_folder, "openvino", cache_dir=cache)
    assert made and folder.parent == cache and {"model.xml", "model.bin", "export.json"} == {path.name for path in folder.iterdir()}
    assert find_export(model_folder, "openvino", cache) == folder
    assert ensure_export(model_folder, "openvino", cache_dir=cache) == (folder, False)
    assert find_export(model_folder, "onnx", cache) is None


def test_a_changed_model_is_exported_again(model_folder: Path, tmp_path: Path, builds: list[tuple[str, Path]]) -> None:
    first, _ = ensure_export(model_folder, "onnx", cache_dir=tmp_path / "cache")
    (model_folder / "model.safetensors").write_bytes(b"\0" * 65)
    second, made = ensure_export(model_folder, "onnx", cache_dir=tmp_path / "cache")
    assert made and second != first and len(builds) == 2


def test_concurrent_loads_wait_for_one_export(model_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    building = threading.Event()
    made: list[Path] = []

    def build(model_path: Path, backend: str, folder: Path) -> dict[str, Any]:
        building.set()
        time.sleep(0.5)  # the second load arrives while this one is exporting
        made.append(folder)
        (folder / "model.onnx").write_bytes(b"graph")
        return {}

    monkeypatch.setattr(backends, "_build", build)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(ensure_export, model_folder, "onnx", cache_dir=cache)
        assert building.wait(10)
        second = pool.submit(ensure_export, model_folder, "onnx", cache_dir=cache)
        results = [first.result(timeout=30), second.result(timeout=30)]
    folder = export_roots(model_folder, cache)[0] / backends.export_name(model_folder, "onnx")
    assert results == [(folder, True), (folder, False)] and len(made) == 1
    assert [path.name for path in folder.parent.iterdir() if not path.name.endswith(".lock")] == [folder.name]


def test_the_torch_backend_has_no_export(model_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no export"):
        ensure_export(model_folder, "torch", cache_dir=tmp_path)


@pytest.mark.parametrize(("batch_tokens", "batch_size"), [(64, 4), (1000, 3), (10, 100)])
def test_length_batches_group_similar_lengths_within_bounds(batch_tokens: int, batch_size: int) -> None:
    lengths = [int(n) for n in np.random.default_rng(3).integers(1, 40, size=57)]
    batches = list(length_batches(lengths, batch_tokens=batch_tokens, batch_size=batch_size))
    assert sorted(position for batch in batches for position in batch) == list(range(len(lengths)))
    for batch in batches:
        widest = max(lengths[position] for position in batch)
        assert len(batch) <= batch_size and (len(batch) == 1 or widest * len(batch) <= batch_tokens)
    flat = [lengths[position] for batch in batches for position in batch]
    assert flat == sorted(flat)
    assert list(length_batches([])) == []


def test_mean_pooling_ignores_padding_and_normalises() -> None:
    hidden = np.array([[[3.0, 4.0], [100.0, 100.0]], [[1.0, 0.0], [0.0, 1.0]]], dtype=np.float32)
    mask = np.array([[1, 0], [1, 1]], dtype=np.int64)
    pooled = mean_pool(hidden, mask)
    assert pooled.dtype == np.float32
    np.testing.assert_allclose(pooled, [[0.6, 0.8], [2**-0.5, 2**-0.5]], rtol=1e-6)
