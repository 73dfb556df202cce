"""Paraphrase embeddings from an OpenAI-compatible `POST {base}/embeddings` server (OpenAI's
createEmbedding, Hugging Face TEI's `/v1/embeddings`, vLLM, Infinity, a provider), through an
`httpx` client the caller owns: this module opens no connection of its own.

Contract of `HttpEncoder.encode(texts)`:

- texts go out in order, `batch_size` per request, at most `concurrency` requests in flight; the
  body is `{"model", "input": [...], "encoding_format": "float"}`;
- each attempt is bounded by `timeout_seconds`; timeouts, connection failures, 429 and 5xx are
  tried again, up to `max_attempts` attempts per request, waiting as long as the server asks
  (`Retry-After` or a rate-limit reset, read by `ingest.http`, at most `MAX_RETRY_AFTER_SECONDS`),
  else with exponential backoff and jitter;
- an answer's `data` entries are put back in input order by their `index` (a server may answer in
  any order); an embedding is a list of numbers or, as OpenAI's clients ask for, base64 of
  little-endian float32;
- rows come back L2-normalised float32, one per text; anything else is an `EmbeddingServiceError`
  that names the server and what was wrong (a status the server will not change its mind about,
  no `data` list, a count or dimension that does not match, a duplicate or missing `index`,
  non-finite or all-zero values), and no vector of the call is returned.

`model_id` is `http:<host>/<model>/dim<dim>`, so vectors from a server never share the
cache or an index with those of an in-process model.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
from pydantic import SecretStr
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from embedding.models import Vectors
from embedding.readability import ReadabilityMeter
from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff

logger = logging.getLogger("goldenset.curation")

MAX_RETRY_AFTER_SECONDS = 60.0
"""Longer waits asked for by the server are cut to this."""
MODEL_ID_LENGTH = 255
"""The longest `model_id` the embedding cache stores."""
_EXCERPT = 300
WAIT = wait_hint_or_backoff(max_wait=MAX_RETRY_AFTER_SECONDS, multiplier=0.5, max_backoff=20.0, jitter=0.5)


class EmbeddingServiceError(RuntimeError):
    """The embedding server did not give a usable vector for every text: it kept failing, refused
    the request, or answered something that is not an embedding list for the texts sent."""


def embeddings_url(base_url: str) -> str:
    """The URL requests are posted to: `base_url` (e.g. `https://api.openai.com/v1`) plus
    `/embeddings`, or `base_url` itself when it already ends with `/embeddings`."""
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the embedding server URL must be an http:// or https:// URL with a host")
    return url if url.endswith("/embeddings") else f"{url}/embeddings"


def shown_url(url: str) -> str:
    """`url` without credentials or query, as errors and logs show it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port is not None else ''}{parts.path}"


def http_model_id(base_url: str, model: str, dim: int) -> str:
    """`http:<host>/<model>/dim<dim>`: the id of the vectors `model` at that host makes (neither
    the port nor credentials in the URL appear in it, so moving the server to another port keeps
    its cached vectors)."""
    host = urlsplit(embeddings_url(base_url)).hostname or ""
    model_id = f"http:{host}/{model}/dim{dim}"
    if len(model_id) > MODEL_ID_LENGTH:
        raise ValueError(f"the embedding model id {model_id[:60]!r}… is longer than {MODEL_ID_LENGTH} characters; use a shorter model name")
    return model_id


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:_EXCERPT] + ("…" if len(flat) > _EXCERPT else "")


def _vector(value: object, *, dim: int, where: str) -> Vectors:
    """One embedding (a list of numbers, or base64 of little-endian float32) as a float64 row of `dim`."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EmbeddingServiceError(f"{where}: the embedding is a string that is not base64") from exc
        if len(raw) % 4:
            raise EmbeddingServiceError(f"{where}: the base64 embedding is {len(raw)} bytes, not a whole number of float32 values")
        row = np.frombuffer(raw, dtype="<f4").astype(np.float64)
    elif isinstance(value, list) and all(isinstance(number, (int, float)) and not isinstance(number, bool) for number in value):
        row = np.asarray(value, dtype=np.float64)
    else:
        raise EmbeddingServiceError(f"{where}: the embedding is not a list of numbers")
    if row.shape != (dim,):
        raise EmbeddingServiceError(f"{where}: the embedding has {row.shape[0]} dimensions, not the {dim} configured; is the server running another model?")
    if not np.all(np.isfinite(row)):
        raise EmbeddingServiceError(f"{where}: the embedding holds non-finite values (NaN or infinity)")
    norm = float(np.linalg.norm(row))
    if norm == 0.0 or not math.isfinite(norm):
        raise EmbeddingServiceError(f"{where}: the embedding is all zeros")
    return np.asarray(row / norm, dtype=np.float32)


def parse_answer(payload: Any, *, count: int, dim: int, where: str = "the embedding server") -> Vectors:
    """The `count` L2-normalised rows of a createEmbedding answer, in input order (by each entry's
    `index`; by position when no entry has one). Raises `EmbeddingServiceError` for anything else."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        message = (payload.get("error") or payload.get("message")) if isinstance(payload, dict) else None
        said = f" (it said: {_excerpt(str(message))})" if message else ""
        raise EmbeddingServiceError(f"{where} answered without a `data` list of embeddings{said}")
    if len(data) != count:
        raise EmbeddingServiceError(f"{where} answered {len(data)} embeddings for {count} texts")
    rows = np.empty((count, dim), dtype=np.float32)
    filled = [False] * count
    for position, entry in enumerate(data):
        if not isinstance(entry, dict) or "embedding" not in entry:
            raise EmbeddingServiceError(f"{where}: entry {position} of `data` has no `embedding`")
        index = entry.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise EmbeddingServiceError(f"{where}: entry {position} of `data` has index {index!r}, outside 0..{count - 1}")
        if filled[index]:
            raise EmbeddingServiceError(f"{where}: two entries of `data` have index {index}")
        rows[index] = _vector(entry["embedding"], dim=dim, where=f"{where}, embedding {index}")
        filled[index] = True
    return rows


class HttpEncoder:
    """An `Encoder` whose vectors come from an OpenAI-compatible embeddings server (see the module
    docstring for the contract). `endpoint` is the name the caller knows the server by (its entry
    in the model registry); it only labels errors here. Safe to share between threads."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        base_url: str,
        model: str,
        dim: int,
        endpoint: str = "",
        api_key: SecretStr | None = None,
        batch_size: int = 32,
        concurrency: int = 4,
        timeout_seconds: float = 30.0,
        max_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        meter: ReadabilityMeter | None = None,
    ) -> None:
        if not model:
            raise ValueError("name the model the embedding server should run (the `model` field of each request)")
        if dim <= 0 or batch_size <= 0 or concurrency <= 0 or max_attempts <= 0 or timeout_seconds <= 0:
            raise ValueError("dim, batch_size, concurrency, max_attempts and timeout_seconds must all be positive")
        self.client = client
        self.url = embeddings_url(base_url)
        self.model = model
        self.dim = dim
        self.model_id = http_model_id(base_url, model, dim)
        self.endpoint = endpoint
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self.max_attempts = max_attempts
        self._sleep = sleep
        self._headers = {"Accept": "application/json"}
        if api_key is not None and api_key.get_secret_value():
            self._headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        self._where = f"the embedding server {shown_url(self.url)}" + (f" (endpoint {endpoint!r})" if endpoint else "")
        self.requests = 0
        self._count_lock = threading.Lock()
        self._meter = meter

    def unreadable(self, texts: Sequence[str]) -> list[float | None]:
        """The share of each text the server's model cannot read, measured with the tokenizer of
        that model named by `meter` (`embedding.readability`); None for each without one."""
        if self._meter is None:
            return [None] * len(texts)
        return list(self._meter.shares(texts))

    def encode(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order; raises `EmbeddingServiceError`."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [list(texts[start : start + self.batch_size]) for start in range(0, len(texts), self.batch_size)]
        if len(batches) == 1:
            return self._batch(batches[0])
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches)), thread_name_prefix="embed")
        try:
            futures: list[Future[Vectors]] = [pool.submit(self._batch, batch) for batch in batches]
            return np.vstack([future.result() for future in futures])
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _batch(self, batch: list[str]) -> Vectors:
        attempts = 0

        def attempt() -> Vectors:
            nonlocal attempts
            attempts += 1
            with self._count_lock:
                self.requests += 1
            body = {"model": self.model, "input": batch, "encoding_format": "float"}
            try:
                response = self.client.post(self.url, json=body, headers=self._headers, timeout=self.timeout_seconds)
            except httpx.TimeoutException as exc:
                raise Retryable(f"no answer within {self.timeout_seconds:g} s ({type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                raise Retryable(f"connection failed ({type(exc).__name__}: {exc})") from exc
            return self._answer(response, len(batch))

        retrying = Retrying(stop=stop_after_attempt(self.max_attempts), wait=WAIT, retry=retry_if_exception_type(Retryable), sleep=self._sleep, reraise=True)
        try:
            return retrying(attempt)
        except Retryable as exc:
            raise EmbeddingServiceError(f"{self._where} failed {attempts} attempts in a row, the last: {exc}") from exc

    def _answer(self, response: httpx.Response, count: int) -> Vectors:
        status = response.status_code
        if status == 429 or status >= 500:
            hint = retry_after_seconds(response, time.time())
            logger.info("%s answered %s; trying again%s", self._where, status, f" in {hint:g} s as asked" if hint is not None else "")
            raise Retryable(f"it answered {status}: {_excerpt(response.text)}", wait_hint=hint)
        if not 200 <= status < 300:
            advice = {
                401: "; check the API key",
                403: "; check the API key and what it may use",
                404: "; check the URL (it should end with /v1 or /v1/embeddings) and the model name",
                413: "; send fewer texts per request (a smaller batch size)",
            }.get(status, "")
            raise EmbeddingServiceError(f"{self._where} answered {status}{advice}: {_excerpt(response.text)}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise EmbeddingServiceError(f"{self._where} answered {status} with a body that is not JSON: {_excerpt(response.text)}") from exc
        return parse_answer(payload, count=count, dim=self.dim, where=self._where)
