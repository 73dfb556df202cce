"""Backfill encoding with the tokenizer running ahead of the model.

For a large backfill (a year of tickets, a public corpus) on a GPU, a plain `model.encode`
leaves the device waiting on the host: it tokenizes a batch, runs it, tokenizes the next. Here the
texts are sorted by length (so each batch pads little), a background thread tokenizes batch after
batch into a short queue (the Rust tokenizer releases the GIL), and the calling thread moves
each batch to the device and runs the forward pass, under fp16 autocast on CUDA. Vectors come
back in the order of the texts, L2-normalised, float32.

On the CPU the forward pass is fp32 and the vectors equal those of `SentenceTransformerEncoder`
(the same modules, tokenizer and truncation; padding never reaches a masked mean), so it shares
that encoder's model id. On CUDA the fp16 vectors differ in the last digits: the model id says
`+cuda-fp16`, and stored vectors of the two are not mixed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedding.models import DEFAULT_MAX_SEQ_LENGTH, Vectors, model_folder, model_id_of, offline

_DONE = object()


class PipelinedEncoder:
    """A sentence-transformers model on `device` (`cpu`, `cuda`, `cuda:1`), encoding length-sorted
    batches of `batch_size` with up to `prefetch` batches tokenized ahead."""

    def __init__(
        self, path: str | Path | None = None, *, device: str = "cpu", batch_size: int = 256, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH, prefetch: int = 4
    ) -> None:
        offline()
        import torch
        from sentence_transformers import SentenceTransformer

        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"device {device!r} was asked for, but this machine has no CUDA device that torch can use")
        self._torch = torch
        self._model = SentenceTransformer(str(model_folder(path)), device=device, local_files_only=True)
        self._model.max_seq_length = max_seq_length
        self._model.eval()
        self.device = device
        self.half = device.startswith("cuda")
        self.batch_size = batch_size
        self.prefetch = prefetch
        dimension = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dimension() or 0)
        base = model_id_of(path, max_seq_length=max_seq_length)
        self.model_id = f"{base}+cuda-fp16" if self.half else base
        # Newer sentence-transformers releases call it `preprocess`, older ones `tokenize`.
        self._preprocess = getattr(self._model, "preprocess", None) or self._model.tokenize

    def encode(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in the order given."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]), reverse=True)
        batches = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        torch = self._torch
        with torch.inference_mode():
            for rows, features in self._tokenized(texts, batches):
                on_device = {name: value.to(self.device, non_blocking=True) if isinstance(value, torch.Tensor) else value for name, value in features.items()}
                with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=self.half):
                    embedded = self._model.forward(on_device)["sentence_embedding"]
                embedded = torch.nn.functional.normalize(embedded.float(), p=2, dim=1)
                result[rows] = embedded.cpu().numpy()
        return result

    def _tokenized(self, texts: Sequence[str], batches: list[list[int]]) -> Iterator[tuple[list[int], dict[str, Any]]]:
        """Each batch's rows with its tokenized features, made by a thread that keeps up to
        `prefetch` batches ready; an error in that thread is raised here."""
        ready: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()

        def tokenize() -> None:
            try:
                for rows in batches:
                    if stop.is_set():
                        return
                    features = self._preprocess([texts[row] for row in rows])
                    if self.half:
                        features = {name: value.pin_memory() if isinstance(value, self._torch.Tensor) else value for name, value in features.items()}
                    ready.put((rows, features))
                ready.put(_DONE)
            except BaseException as exc:  # handed to the consumer, which raises it
                ready.put(exc)

        worker = threading.Thread(target=tokenize, name="tokenize-ahead", daemon=True)
        worker.start()
        try:
            while (item := ready.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while worker.is_alive():  # let a blocked producer finish its put
                try:
                    ready.get_nowait()
                except queue.Empty:
                    worker.join(timeout=0.05)
