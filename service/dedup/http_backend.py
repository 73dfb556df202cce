"""The `http` embedding backend in the service: an OpenAI-compatible embeddings server
(`embedding.http_encoder`) built from the `GOLDENSET_EMBEDDING_*` settings, and the gate it
must pass before any incident text is sent to it.

Incident text leaves the process here, so the server must be an endpoint of the model registry
(`GOLDENSET_EMBEDDING_ENDPOINT`), registered with the URL texts are sent to, whose terms pass the
sealed-run gate's terms conditions (`curation.runs.gate.judge_terms`: the provider does not train
on inputs, and its terms were checked within `GOLDENSET_TERMS_MAX_AGE_DAYS`). Curation,
re-fingerprinting and re-deciding check it each time they start (`admit_encoder`), before anything
is encoded; a refusal (`EmbeddingEndpointRefused`) names the failing condition.
"""

from __future__ import annotations

import hashlib
import threading
from datetime import datetime

import httpx
from sqlmodel import Session, select

from curation.dedup.embeddings import Encoder
from curation.refusals import Refused
from curation.runs.gate import judge_terms
from embedding.http_encoder import HttpEncoder, embeddings_url, http_model_id, shown_url
from embedding.readability import ReadabilityMeter
from schemas.common import utcnow
from schemas.model_registry import Endpoint
from service.core.settings import Settings

NOT_REGISTERED = "endpoint_not_registered"
URL_MISMATCH = "endpoint_url_mismatch"

_encoders: dict[str, HttpEncoder] = {}
_encoders_lock = threading.Lock()


class EmbeddingEndpointRefused(Refused):
    """The embedding endpoint may not receive incident text (403, a gate); `condition` (its
    `reason`) names why: one of the gate's terms conditions (`curation.runs.gate.GateCondition`:
    `trains_on_inputs`, `terms_unknown`, `terms_unchecked`, `terms_stale`),
    `endpoint_not_registered` or `endpoint_url_mismatch`. Nothing was curated. A command answers
    it as every refusal (exit 4); the API with its own problem (`service.dedup.routes`)."""

    def __init__(self, condition: str, detail: str) -> None:
        super().__init__(condition, f"incident texts are embedded only by a registered endpoint that passes the sealed-run gate; {detail}", 403)
        self.condition = condition

    def __str__(self) -> str:
        return f"curation refused ({self.condition}): {self.detail}"


def http_identity(settings: Settings) -> tuple[str, int]:
    """The `model_id` and dimension of the vectors the configured server makes, without a request."""
    assert settings.embedding_url is not None and settings.embedding_remote_model is not None and settings.embedding_dim is not None
    return http_model_id(settings.embedding_url, settings.embedding_remote_model, settings.embedding_dim), settings.embedding_dim


def http_encoder(settings: Settings) -> HttpEncoder:
    """An encoder for the server the settings name, with its own connection pool. Nothing is sent
    until `encode`; callers pass `admit_encoder` first."""
    assert settings.embedding_url is not None and settings.embedding_remote_model is not None and settings.embedding_dim is not None
    limits = httpx.Limits(max_connections=settings.embedding_concurrency, max_keepalive_connections=settings.embedding_concurrency)
    client = httpx.Client(timeout=settings.embedding_timeout_seconds, limits=limits, follow_redirects=False)
    return HttpEncoder(
        client,
        base_url=settings.embedding_url,
        model=settings.embedding_remote_model,
        dim=settings.embedding_dim,
        endpoint=settings.embedding_endpoint or "",
        api_key=settings.embedding_api_key,
        batch_size=settings.embedding_batch_size,
        concurrency=settings.embedding_concurrency,
        timeout_seconds=settings.embedding_timeout_seconds,
        max_attempts=settings.embedding_max_attempts,
        meter=ReadabilityMeter.from_model_folder(settings.embedding_tokenizer) if settings.embedding_tokenizer else None,
    )


def shared_http_encoder(settings: Settings) -> HttpEncoder:
    """The process's encoder for the server these settings name (one connection pool per distinct
    set of `GOLDENSET_EMBEDDING_*` settings), shared by its threads."""
    api_key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key is not None else ""
    key = repr(
        (
            settings.embedding_url,
            settings.embedding_endpoint,
            settings.embedding_remote_model,
            settings.embedding_dim,
            settings.embedding_batch_size,
            settings.embedding_concurrency,
            settings.embedding_timeout_seconds,
            settings.embedding_max_attempts,
            settings.embedding_tokenizer,
            hashlib.sha256(api_key.encode()).hexdigest(),
        )
    )
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            encoder = _encoders[key] = http_encoder(settings)
        return encoder


def _destination(settings: Settings, encoder: Encoder | None) -> tuple[str, str] | None:
    """(registry name, URL) of where `encoder` sends texts, or None when it embeds in-process."""
    if isinstance(encoder, HttpEncoder):
        return encoder.endpoint, encoder.url
    if settings.embedding_backend == "http" and settings.embedding_url is not None:
        return settings.embedding_endpoint or "", embeddings_url(settings.embedding_url)
    return None


def admit_encoder(session: Session, settings: Settings, encoder: Encoder | None, *, now: datetime | None = None) -> None:
    """Return when `encoder` (or, when None, the backend the settings choose) embeds in-process, or
    sends texts to a registered endpoint, registered with that URL, whose terms pass
    `judge_terms` at `now`; otherwise raise `EmbeddingEndpointRefused` naming the first failing
    condition (registration, URL, then the gate's order)."""
    refusal = endpoint_refusal(session, settings, encoder, now=now)
    if refusal is not None:
        raise refusal


def endpoint_refusal(session: Session, settings: Settings, encoder: Encoder | None, *, now: datetime | None = None) -> EmbeddingEndpointRefused | None:
    """The refusal `admit_encoder` would raise, or None: for a caller that reports it and goes on."""
    destination = _destination(settings, encoder)
    if destination is None:
        return None
    name, url = destination
    endpoint = session.exec(select(Endpoint).where(Endpoint.name == name)).first() if name else None
    if endpoint is None:
        named = f"endpoint {name!r} is not registered" if name else "no endpoint is named (GOLDENSET_EMBEDDING_ENDPOINT)"
        return EmbeddingEndpointRefused(
            NOT_REGISTERED,
            f"{named}; register the embedding server with POST /v1/endpoints (admin scope), base URL {shown_url(url).removesuffix('/embeddings')}, and its data-retention terms, "
            "then set GOLDENSET_EMBEDDING_ENDPOINT to its name",
        )
    if _comparable(endpoint.base_url) != shown_url(url):  # credentials and query aside
        return EmbeddingEndpointRefused(
            URL_MISMATCH,
            f"endpoint {name!r} is registered with base URL {shown_url(endpoint.base_url)}, but texts would go to {shown_url(url)} (GOLDENSET_EMBEDDING_URL); "
            f"the terms recorded for one say nothing of the other: make them the same (PATCH /v1/endpoints/{name})",
        )
    decision = judge_terms(
        endpoint=endpoint.name,
        trains_on_inputs=endpoint.trains_on_inputs,
        terms_checked_at=endpoint.terms_checked_at,
        now=now or utcnow(),
        terms_max_age_days=settings.terms_max_age_days,
    )
    if decision.allowed:
        return None
    assert decision.condition is not None
    return EmbeddingEndpointRefused(decision.condition.value, decision.detail)


def _comparable(base_url: str) -> str | None:
    try:
        return shown_url(embeddings_url(base_url))
    except ValueError:
        return None
