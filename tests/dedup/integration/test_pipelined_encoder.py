"""The backfill encoder (tokenizer ahead of the model, length-sorted batches) gives, on the CPU,
the vectors of the plain encoder in the order of the texts, and says so by sharing its model id;
asked for a CUDA device on a machine without one, it refuses with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from curation.dedup.embeddings import body_text
from embedding.models import SentenceTransformerEncoder
from embedding.pipelined import PipelinedEncoder
from tests.dedup_support import hadoop_reports


def test_on_the_cpu_the_vectors_and_model_id_are_the_plain_encoders() -> None:
    reports = hadoop_reports(60)
    texts = [body_text(report["title"], report.get("description") or "") for report in reports] + ["", "a", "x " * 2000]
    plain = SentenceTransformerEncoder()
    pipelined = PipelinedEncoder(batch_size=7, prefetch=2)
    expected = plain.encode(texts)
    got = pipelined.encode(texts)
    assert pipelined.model_id == plain.model_id and pipelined.dim == plain.dim == got.shape[1]
    assert got.dtype == np.float32 and got.shape == (len(texts), plain.dim)
    assert np.allclose(got, expected, atol=2e-5), float(np.abs(got - expected).max())
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert pipelined.encode([]).shape == (0, plain.dim)


def test_a_tokenizer_failure_is_raised_to_the_caller() -> None:
    pipelined = PipelinedEncoder(batch_size=2)
    with pytest.raises(TypeError):
        pipelined.encode(["fine", "also fine", None, "after"])  # type: ignore[list-item]


def test_cuda_without_a_device_is_refused() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        PipelinedEncoder(device="cuda")
