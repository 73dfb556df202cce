"""The `auto` embedding backend: the fastest in-process backend that keeps dedup's quality, on
this machine, for this database.

Both candidates keep quality (bench/embedding_backends.py, on every machine measured: the same
recall@5 as PyTorch and at least 99.9% of the same decisions): `openvino` (PyTorch's vectors,
1.3x-1.9x its speed) and `openvino-int8` (int8, 0.66x-5.4x: fast where the CPU's int8 kernels are,
slower than fp32 where they are not). Which is faster is a property of the machine, so it is
measured, once per machine, model and library versions, and remembered in a small record beside
the exports.

A database whose pool was embedded already keeps its backend: vectors of another backend would
need re-encoding. `stored_choice` names it from the model ids stored fingerprints carry, which the
caller reads (`curation.dedup.equivalence.stored_model_ids`): a PyTorch or ONNX fp32 pool continues with
`openvino`, whose vectors are theirs to rounding and are adopted (`curation.dedup.equivalence`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from filelock import FileLock

from embedding.backends import DEFAULT_CACHE_DIR, RECIPES, EmbeddingBackend, backend_model_id, check_backend, export_roots, load_encoder
from embedding.models import DEFAULT_MAX_SEQ_LENGTH, model_folder, model_id_of

logger = logging.getLogger("goldenset.embeddings")

AUTO = "auto"
FP32: EmbeddingBackend = "openvino"
INT8: EmbeddingBackend = "openvino-int8"
# int8 is chosen only when clearly faster: its vectors differ from PyTorch's a little (cosine ~0.994).
INT8_MARGIN = 1.15
TIMED_TEXTS = 128
ROUNDS = 3
# Backends whose vectors are PyTorch's to rounding: a pool they embedded continues with `openvino`.
FP32_FAMILY = ("torch", "onnx", "openvino")


@cache
def machine_facts() -> dict[str, Any]:
    """What makes one backend faster than another here: the CPU (model and instruction sets), how
    many cores, and the libraries' versions (read once per process: they do not change)."""
    cpu, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "model name" and not cpu:
                cpu = value.strip()
            elif name.strip() in ("flags", "Features") and not flags:
                flags = value.strip()
    except OSError:
        pass
    cpu = cpu or platform.processor() or platform.machine()
    versions = {}
    for package in ("openvino", "nncf"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return {
        "cpu": cpu,
        "flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "versions": versions,
        "recipes": {FP32: RECIPES[FP32], INT8: RECIPES[INT8]},
    }


def _record_path(model_path: Path, facts: Mapping[str, Any], max_seq_length: int, cache_dir: str | Path) -> list[Path]:
    digest = hashlib.sha256(json.dumps({**facts, "model": model_id_of(model_path, max_seq_length=max_seq_length)}, sort_keys=True).encode()).hexdigest()[:16]
    return [root / f"auto-backend-{digest}.json" for root in export_roots(model_path, cache_dir)]


def machine_choice(path: str | Path | None = None, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> EmbeddingBackend:
    """The faster of `openvino` and `openvino-int8` on this machine for the model in `path`:
    read from the record of an earlier measurement, else measured now (both exported if they are
    not, then timed on real incident texts, alternately, the best of a few rounds each) and
    recorded, under a lock, so concurrent processes measure once. `openvino-int8` is chosen when
    it is at least `INT8_MARGIN` times as fast."""
    model_path = model_folder(path)
    facts = machine_facts()
    candidates = _record_path(model_path, facts, max_seq_length, cache_dir)
    recorded = _first_recorded(candidates)
    if recorded is not None:
        return recorded
    failures = []
    for record in candidates:
        try:
            record.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(f"{record}.lock", timeout=1800):
                choice = _read_choice(record)
                if choice is not None:
                    return choice
                measured = measure(model_path, max_seq_length=max_seq_length, cache_dir=cache_dir)
                measured.update(facts=facts, measured_at=datetime.now(UTC).isoformat(timespec="seconds"))
                partial = record.with_suffix(".partial")
                partial.write_text(json.dumps(measured, indent=1, sort_keys=True), encoding="utf-8")
                os.replace(partial, record)
                logger.info(
                    "auto embedding backend: %s (%s %.1f, %s %.1f texts/s on this machine)", measured["choice"], FP32, measured["rates"][FP32], INT8, measured["rates"][INT8]
                )
                return _backend(measured["choice"])
        except OSError as error:
            failures.append(f"{record.parent}: {error.strerror or error}")
    raise OSError(f"no writable folder to record the auto embedding backend's measurement ({'; '.join(failures)}): set GOLDENSET_EMBEDDING_CACHE_DIR to a writable folder")


def recorded_choice(path: str | Path | None = None, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> EmbeddingBackend | None:
    """`machine_choice` when it was measured on this machine before; None otherwise (nothing is measured)."""
    return _first_recorded(_record_path(model_folder(path), machine_facts(), max_seq_length, cache_dir))


def _first_recorded(records: list[Path]) -> EmbeddingBackend | None:
    """The choice of the first of `records` that holds one."""
    for record in records:
        choice = _read_choice(record)
        if choice is not None:
            return choice
    return None


def _read_choice(record: Path) -> EmbeddingBackend | None:
    try:
        return _backend(json.loads(record.read_text(encoding="utf-8"))["choice"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _backend(name: object) -> EmbeddingBackend:
    if name == FP32:
        return FP32
    if name == INT8:
        return INT8
    raise ValueError(f"not an auto backend: {name!r}")


def measure(model_path: Path, *, max_seq_length: int, cache_dir: str | Path) -> dict[str, Any]:
    """Texts per second of both candidates on `TIMED_TEXTS` bundled incident texts (the best of
    `ROUNDS` calls each, taken in turn), and the choice they make."""
    from embedding.exports import calibration_texts

    texts = calibration_texts()[:TIMED_TEXTS]
    encoders = {backend: load_encoder(model_path, backend, max_seq_length=max_seq_length, cache_dir=cache_dir) for backend in (FP32, INT8)}
    for encoder in encoders.values():
        encoder.encode(texts[:16])  # the first calls allocate and compile
    best = dict.fromkeys(encoders, float("inf"))
    for _ in range(ROUNDS):
        for backend, encoder in encoders.items():
            started = time.perf_counter()
            encoder.encode(texts)
            best[backend] = min(best[backend], time.perf_counter() - started)
    rates = {backend: round(len(texts) / seconds, 1) for backend, seconds in best.items()}
    choice = INT8 if rates[INT8] >= INT8_MARGIN * rates[FP32] else FP32
    return {"choice": choice, "rates": rates, "texts": len(texts)}


def stored_choice(stored: Mapping[str, int], path: str | Path | None = None, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH) -> EmbeddingBackend | None:
    """The backend that goes on with a pool whose fingerprints carry the model ids `stored` (with
    how many each): that of the most common id that is an in-process backend of this model at this
    sequence length: itself, or `openvino` for PyTorch's and ONNX's fp32 vectors (equivalent, so
    adopted). None when no stored id is one (an empty pool, or another model)."""
    own = {backend_model_id(path, backend, max_seq_length=max_seq_length): backend for backend in (*FP32_FAMILY, "onnx-int8", INT8)}
    for model_id, _ in sorted(stored.items(), key=lambda pair: -pair[1]):
        backend = own.get(model_id)
        if backend is not None:
            return FP32 if backend in FP32_FAMILY else check_backend(backend)
    return None
