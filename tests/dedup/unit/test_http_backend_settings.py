"""The `http` embedding backend's settings: what it needs is named when missing, its API key is a
secret that no error or repr shows, and the process's encoder and identity come from them without
a request or a model load."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from embedding.http_encoder import HttpEncoder
from service.core.settings import Settings, describe_settings_error
from service.dedup.encoder import get_encoder, model_identity

HTTP: dict[str, Any] = {
    "embedding_backend": "http",
    "embedding_url": "http://tei.internal:8080/v1",
    "embedding_endpoint": "tei-minilm",
    "embedding_remote_model": "sentence-transformers/all-MiniLM-L6-v2",
    "embedding_dim": 384,
}


def test_the_http_backend_names_every_setting_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDENSET_EMBEDDING_BACKEND", "http")
    monkeypatch.setenv("GOLDENSET_EMBEDDING_URL", "http://tei.internal:8080/v1")
    with pytest.raises(ValidationError) as refused:
        Settings()
    message = describe_settings_error(refused.value)
    assert "GOLDENSET_EMBEDDING_BACKEND=http needs GOLDENSET_EMBEDDING_ENDPOINT, GOLDENSET_EMBEDDING_REMOTE_MODEL, GOLDENSET_EMBEDDING_DIM" in message
    assert "GOLDENSET_EMBEDDING_URL," not in message


def test_the_url_must_be_http_and_is_never_echoed() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(**{**HTTP, "embedding_url": "tei.internal:8080/v1?token=s3cr3t"})
    message = describe_settings_error(refused.value)
    assert "GOLDENSET_EMBEDDING_URL must be an http:// or https:// URL" in message and "s3cr3t" not in message + repr(refused.value)


def test_the_api_key_is_a_secret() -> None:
    settings = Settings(**HTTP, embedding_api_key="sk-live-4Xq9")
    assert "4Xq9" not in repr(settings) and "4Xq9" not in str(settings.model_dump())
    with pytest.raises(ValidationError) as refused:
        Settings(**{**HTTP, "embedding_api_key": "sk-live-4Xq9", "embedding_dim": "many"})
    assert "4Xq9" not in describe_settings_error(refused.value) + repr(refused.value)


def test_the_default_backend_runs_in_process_and_needs_none_of_them() -> None:
    settings = Settings()
    assert settings.embedding_backend == "auto" and settings.embedding_url is None and settings.embedding_batch_size == 32


def test_the_process_encoder_and_identity_come_from_the_settings_alone() -> None:
    settings = Settings(**HTTP, embedding_api_key="sk-live-4Xq9", embedding_batch_size=16, embedding_concurrency=2)
    encoder = get_encoder(settings)
    assert isinstance(encoder, HttpEncoder)
    assert encoder is get_encoder(settings)  # one per process and settings
    assert (encoder.url, encoder.model, encoder.dim, encoder.endpoint, encoder.batch_size, encoder.concurrency) == (
        "http://tei.internal:8080/v1/embeddings",
        "sentence-transformers/all-MiniLM-L6-v2",
        384,
        "tei-minilm",
        16,
        2,
    )
    assert encoder.model_id == "http:tei.internal/sentence-transformers/all-MiniLM-L6-v2/dim384"
    identity = model_identity(settings)
    assert (identity.model_id, identity.dim) == (encoder.model_id, 384)
    assert encoder is not get_encoder(Settings(**HTTP, embedding_api_key="sk-live-other"))
    assert encoder.requests == 0  # nothing was sent
