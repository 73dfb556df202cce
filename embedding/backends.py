"""Embedding backends: one local sentence-transformers model run by PyTorch (`torch`), or exported
from its own weights to ONNX and run by ONNX Runtime (`onnx`: fused fp32 graph; `onnx-int8`: int8
weights) or to OpenVINO IR (`openvino`: fp32; `openvino-int8`: int8 calibrated on real incidents).

Contracts:
- each backend is its own embedding model: `backend_model_id` is the PyTorch model's id for
  `torch` (so vectors stored before backends existed stay valid) and that id plus the backend and
  its export recipe otherwise, so vectors of two backends are never mixed in one index;
- an export is made once, offline, from the model folder and published atomically in a folder
  named after the model's weights, the backend and the recipe: beside the model folder
  (`<model>.exports/`) where that is writable, else under `cache_dir`; a later load, in this or
  another process, finds it in either place and exports nothing;
- every encoder returns L2-normalised float32 rows (mean pooling over real tokens), one per text;
  `onnx-int8` quantises activations per batch, so a text's vector can move slightly with the texts
  batched with it (the embedding cache encodes a text once per model, so stored vectors do not).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from filelock import FileLock, Timeout
from numpy.typing import NDArray

from embedding.models import DEFAULT_MAX_SEQ_LENGTH, SPECIAL_TOKENS, SentenceTransformerEncoder, Vectors, model_dim_of, model_folder, model_id_of
from embedding.readability import ReadabilityMeter

logger = logging.getLogger("goldenset.embeddings")

EmbeddingBackend = Literal["torch", "onnx", "onnx-int8", "openvino", "openvino-int8"]
BACKENDS: tuple[str, ...] = get_args(EmbeddingBackend)
DEFAULT_BACKEND: EmbeddingBackend = "openvino"
DEFAULT_CACHE_DIR = Path("var") / "embedding-models"
# Bumped whenever an export recipe changes its vectors, so the new ones get a new model id.
RECIPES: dict[str, str] = {"onnx": "r1", "onnx-int8": "r1", "openvino": "r1", "openvino-int8": "r1"}
ARTEFACTS: dict[str, tuple[str, ...]] = {
    "onnx": ("model.onnx",),
    "onnx-int8": ("model.onnx",),
    "openvino": ("model.xml", "model.bin"),
    "openvino-int8": ("model.xml", "model.bin"),
}
RECORD = "export.json"
# How long a process waits for another one's export of the same backend (they take about a minute).
EXPORT_WAIT_SECONDS = 900
DEFAULT_BATCH_TOKENS = 1024
DEFAULT_BATCH_SIZE = 64
PAD_MULTIPLE = 8
_RECIPE = re.compile(r"r[0-9]+")

Runner = Callable[[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]], NDArray[np.float32]]


def check_backend(backend: str) -> EmbeddingBackend:
    """`backend` as an `EmbeddingBackend`, or ValueError naming the ones there are."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}: use one of {', '.join(BACKENDS)} (GOLDENSET_EMBEDDING_BACKEND)")
    return backend  # type: ignore[return-value]


def backend_model_id(path: str | Path | None, backend: str, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH) -> str:
    """The `model_id` of the model in `path` run by `backend`, read from the folder without loading
    anything: `model_id_of(path)` for `torch`, with `/<backend>.<recipe>` after it otherwise."""
    base = model_id_of(path, max_seq_length=max_seq_length)
    backend = check_backend(backend)
    return base if backend == "torch" else f"{base}/{backend}.{RECIPES[backend]}"


def _split(model_id: str) -> tuple[str, str]:
    """`model_id` as (the model's id, the backend that ran it): an exported backend's id ends in
    `/<backend>.r<n>` (`backend_model_id`); any other id is PyTorch's."""
    head, _, tail = model_id.rpartition("/")
    backend, _, recipe = tail.partition(".")
    if head and backend in BACKENDS and _RECIPE.fullmatch(recipe):
        return head, backend
    return model_id, "torch"


def base_model_id(model_id: str) -> str:
    """The id of the model whose backend made vectors under `model_id`: `model_id` without its
    `/<backend>.<recipe>` part (the PyTorch backend's id is the base itself)."""
    return _split(model_id)[0]


def backend_of(model_id: str) -> str:
    """The backend that made vectors under `model_id`, an id of an in-process backend."""
    return _split(model_id)[1]


def same_model(one: str, other: str) -> bool:
    """Whether two model ids are backends of one model (same weights and sequence length), the
    only switches an equivalence check (`curation.dedup.equivalence`) may spare a re-encoding of."""
    return one != other and base_model_id(one) == base_model_id(other)


def export_name(model_path: Path, backend: str) -> str:
    """The folder name of `backend`'s export of the model in `model_path`: its name, a digest of its
    weights, the backend and the recipe (a changed model or recipe never reuses an export)."""
    weights = model_id_of(model_path).rsplit("/", 1)[0].replace("@", "-")
    return f"{weights}.{backend}.{RECIPES[backend]}"


def export_roots(model_path: Path, cache_dir: str | Path) -> tuple[Path, Path]:
    """Where exports of the model in `model_path` are kept: beside it first, then `cache_dir`."""
    return model_path.parent / f"{model_path.name}.exports", Path(cache_dir)


def find_export(model_path: Path, backend: str, cache_dir: str | Path) -> Path | None:
    """The folder of a finished export of `backend` for the model, in either root, or None."""
    name = export_name(model_path, backend)
    for root in export_roots(model_path, cache_dir):
        folder = root / name
        if (folder / RECORD).is_file() and all((folder / artefact).is_file() for artefact in ARTEFACTS[backend]):
            return folder
    return None


def ensure_export(model_path: Path, backend: str, *, cache_dir: str | Path) -> tuple[Path, bool]:
    """The folder of `backend`'s export of the model, and whether this call made it. An export is
    built in a hidden folder of the first writable root and renamed into place when whole, under a
    file lock in that root: a process that finds another one exporting waits for its export (up
    to `EXPORT_WAIT_SECONDS`) instead of making a second one."""
    backend = check_backend(backend)
    if backend == "torch":
        raise ValueError("the torch backend runs the model folder itself; it has no export")
    found = find_export(model_path, backend, cache_dir)
    if found is not None:
        return found, False
    name = export_name(model_path, backend)
    failures = []
    for root in export_roots(model_path, cache_dir):
        try:
            root.mkdir(parents=True, exist_ok=True)
            lock = FileLock(root / f".{name}.lock", timeout=EXPORT_WAIT_SECONDS)
            lock.acquire()
        except (OSError, Timeout) as error:
            failures.append(f"{root}: {getattr(error, 'strerror', None) or error}")
            continue
        try:
            # Another process may have published it while this one waited for the lock.
            found = find_export(model_path, backend, cache_dir)
            if found is not None:
                return found, False
            logger.info("exporting %s for the %s backend into %s (once; about a minute)", model_path.name, backend, root)
            return _export_into(model_path, backend, root, name)
        except OSError as error:
            failures.append(f"{root}: {error.strerror or error}")
        finally:
            lock.release()
    raise OSError(f"no writable folder for the {backend} export of {model_path} ({'; '.join(failures)}): set GOLDENSET_EMBEDDING_CACHE_DIR to a writable folder")


def _export_into(model_path: Path, backend: str, root: Path, name: str) -> tuple[Path, bool]:
    """Build the export in a hidden folder of `root` and rename it to `root / name` when whole
    (the caller holds the export's lock in `root`)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        record = _build(model_path, backend, staging)
        for leftover in staging.iterdir():
            if leftover.name not in ARTEFACTS[backend]:
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
        (staging / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        staging.rename(root / name)
        return root / name, True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _build(model_path: Path, backend: str, folder: Path) -> dict[str, Any]:
    """Write `backend`'s artefacts into `folder` (work files beside them are removed by the
    caller); the export's record."""
    from embedding import exports

    started = time.perf_counter()
    record: dict[str, Any] = {"backend": backend, "recipe": RECIPES[backend], "model": model_id_of(model_path).rsplit("/", 1)[0], "tools": _tool_versions()}
    plain = folder / "plain.onnx"
    exports.export_onnx(model_path, plain)
    if backend in ("onnx", "onnx-int8"):
        fused = folder / ("model.onnx" if backend == "onnx" else "fused.onnx")
        record["fused_operators"] = exports.optimise_onnx(model_path, plain, fused)
        if backend == "onnx-int8":
            exports.quantise_onnx(fused, folder / "model.onnx")
            fused.unlink()
    elif backend == "openvino":
        exports.openvino_from_onnx(plain, folder / "model.xml")
    else:
        tokenizer = load_tokenizer(model_path, DEFAULT_MAX_SEQ_LENGTH)
        texts = exports.calibration_texts()
        samples = [_inputs([encoding.ids]) for encoding in tokenizer.encode_batch(texts)]
        exports.quantise_openvino(plain, folder / "model.xml", samples)
        record["calibration"] = {"file": exports.CALIBRATION_FILE.name, "texts": len(texts)}
    record["export_seconds"] = round(time.perf_counter() - started, 1)
    return record


def _tool_versions() -> dict[str, str]:
    versions = {}
    for package in ("torch", "transformers", "onnxruntime", "openvino", "nncf"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def load_tokenizer(model_path: Path, max_seq_length: int) -> Any:
    """The model's fast tokenizer (`tokenizer.json`), truncating to `max_seq_length` tokens and
    padding nothing, as sentence-transformers tokenises for the model."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    return tokenizer


def _inputs(rows: Sequence[Sequence[int]], multiple: int = 1) -> dict[str, NDArray[np.int64]]:
    """Model inputs for token id rows, padded to the longest row rounded up to `multiple`."""
    longest = max(len(row) for row in rows)
    width = -(-longest // multiple) * multiple
    input_ids = np.zeros((len(rows), width), dtype=np.int64)
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)
    for position, row in enumerate(rows):
        input_ids[position, : len(row)] = row
        attention_mask[position, : len(row)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)}


def length_batches(lengths: Sequence[int], *, batch_tokens: int = DEFAULT_BATCH_TOKENS, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[list[int]]:
    """Positions of `lengths` in batches of similar length: shortest first, each batch at most
    `batch_size` rows and, padded to its longest row, at most `batch_tokens` tokens (a single row
    longer than that is a batch of its own). Every position appears exactly once."""
    batch: list[int] = []
    for position in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batch and (len(batch) >= batch_size or lengths[position] * (len(batch) + 1) > batch_tokens):
            yield batch
            batch = []
        batch.append(position)
    if batch:
        yield batch


def mean_pool(hidden: NDArray[np.float32], attention_mask: NDArray[np.int64]) -> Vectors:
    """L2-normalised means of `hidden`'s token rows where `attention_mask` is 1."""
    mask = attention_mask[:, :, None].astype(np.float32)
    sums = (hidden.astype(np.float32) * mask).sum(axis=1)
    means = sums / np.maximum(mask.sum(axis=1), 1e-9)
    pooled: Vectors = (means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    return pooled


def _check_mean_pooled(model_path: Path) -> None:
    modules_file = model_path / "modules.json"
    modules = json.loads(modules_file.read_text(encoding="utf-8")) if modules_file.is_file() else []
    kinds = [module.get("type", "").rsplit(".", 1)[-1] for module in modules]
    pooling_files = [model_path / module.get("path", "") / "config.json" for module in modules if module.get("type", "").endswith(".Pooling")]
    pooling = json.loads(pooling_files[0].read_text(encoding="utf-8")) if pooling_files and pooling_files[0].is_file() else {}
    others = [value for key, value in pooling.items() if key.startswith("pooling_mode_") and key != "pooling_mode_mean_tokens"]
    mean_only = pooling.get("pooling_mode_mean_tokens") and not any(others)
    if kinds[:2] != ["Transformer", "Pooling"] or not mean_only or any(kind not in ("Transformer", "Pooling", "Normalize") for kind in kinds):
        raise ValueError(f"{model_path} is not a transformer with mean pooling ({', '.join(kinds) or 'no modules.json'}): only the torch embedding backend runs it")


def _onnx_runtime(path: Path, threads: int) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    # Idle threads sleep instead of spinning: curation decides a batch in Python while the next encodes.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = {node.name for node in session.get_inputs()}
    output = session.get_outputs()[0].name

    def run(input_ids: NDArray[np.int64], attention_mask: NDArray[np.int64], token_type_ids: NDArray[np.int64]) -> NDArray[np.float32]:
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        return np.asarray(session.run([output], {name: value for name, value in feeds.items() if name in names})[0], dtype=np.float32)

    return run


def _openvino(path: Path, threads: int) -> Runner:
    import openvino as ov

    core = ov.Core()
    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
    request = compiled.create_infer_request()
    names = {port.get_any_name() for port in compiled.inputs}
    output = compiled.output(0)

    def run(input_ids: NDArray[np.int64], attention_mask: NDArray[np.int64], token_type_ids: NDArray[np.int64]) -> NDArray[np.float32]:
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        result = request.infer({name: value for name, value in feeds.items() if name in names})
        return np.array(result[output], dtype=np.float32)

    return run


class ExportedEncoder:
    """The model in `path` (default all-MiniLM-L6-v2, bundled) run from its `backend` export
    (exported on first use, see the module docstring), offline and without torch at run time.

    Texts are tokenised with the model's fast tokenizer, truncated to `max_seq_length` tokens,
    and run in batches of similar length (`length_batches`), padded to the batch's longest row;
    rows come back in the order of the texts. `encode` runs one call at a time per instance.
    `exported` says whether loading made the export; `folder` is where it lies.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        backend: str,
        max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
        cache_dir: str | Path = DEFAULT_CACHE_DIR,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 0,
    ) -> None:
        self.backend = check_backend(backend)
        if max_seq_length < 8:
            raise ValueError(f"max_seq_length must be at least 8 tokens, not {max_seq_length}")
        model_path = model_folder(path)
        _check_mean_pooled(model_path)
        self.folder, self.exported = ensure_export(model_path, self.backend, cache_dir=cache_dir)
        self._tokenizer = load_tokenizer(model_path, max_seq_length)
        artefact = self.folder / ARTEFACTS[self.backend][0]
        self._run = _onnx_runtime(artefact, threads) if self.backend.startswith("onnx") else _openvino(artefact, threads)
        self.batch_tokens = max(batch_tokens, max_seq_length)
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.dim = model_dim_of(path)
        self.model_id = backend_model_id(path, self.backend, max_seq_length=max_seq_length)
        self._meter = ReadabilityMeter.from_model_folder(model_path, max_seq_length=max_seq_length - SPECIAL_TOKENS)

    def unreadable(self, texts: Sequence[str]) -> list[float]:
        """The share of each text this model's tokenizer cannot represent (`embedding.readability`)."""
        return self._meter.shares(texts)

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return vectors
        rows = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        for batch in length_batches([len(row) for row in rows], batch_tokens=self.batch_tokens, batch_size=self.batch_size):
            inputs = _inputs([rows[position] for position in batch], PAD_MULTIPLE)
            hidden = self._run(inputs["input_ids"], inputs["attention_mask"], inputs["token_type_ids"])
            vectors[batch] = mean_pool(hidden, inputs["attention_mask"])
        return vectors


def load_encoder(
    path: str | Path | None = None, backend: str = DEFAULT_BACKEND, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, cache_dir: str | Path = DEFAULT_CACHE_DIR
) -> SentenceTransformerEncoder | ExportedEncoder:
    """The encoder for the model in `path` run by `backend`; its `model_id` is
    `backend_model_id(path, backend, max_seq_length=max_seq_length)`."""
    if check_backend(backend) == "torch":
        return SentenceTransformerEncoder(path, max_seq_length=max_seq_length)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return ExportedEncoder(path, backend=backend, max_seq_length=max_seq_length, cache_dir=cache_dir)
