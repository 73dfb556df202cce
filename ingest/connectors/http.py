"""HTTP for connectors: retries with exponential backoff and jitter (tenacity), `Retry-After` and
rate-limit resets honoured, and vendor answers classified into the connector errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from ingest.connectors.base import AuthError, ConnectorContext, ConnectorError, MalformedPage, TransientError

RateLimitDelay = Callable[[httpx.Response], float | None]
"""Given a refused response, how long to wait for the vendor's rate limit to reset (None: not a rate limit)."""

_BODY_EXCERPT = 300


class _Retryable(Exception):
    def __init__(self, message: str, wait_hint: float | None = None) -> None:
        super().__init__(message)
        self.wait_hint = wait_hint


def retry_after_seconds(response: httpx.Response, now: float) -> float | None:
    """Seconds asked for by a `Retry-After` header (delta seconds or an HTTP date), else None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _excerpt(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:_BODY_EXCERPT] + ("…" if len(text) > _BODY_EXCERPT else "")


def send(
    context: ConnectorContext,
    method: str,
    url: str,
    *,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
    headers: Mapping[str, str] | None = None,
    rate_limit_delay: RateLimitDelay | None = None,
    vendor: str,
) -> httpx.Response:
    """Send a request, retrying what is worth retrying; returns a 2xx response.

    Timeouts, connection errors, 5xx and 429 are retried up to `context.retry.max_attempts` times
    (waiting for `Retry-After` or the rate-limit reset when the vendor says, else exponential
    backoff with jitter). 401 and 403 (unless `rate_limit_delay` recognises a rate limit) raise
    `AuthError`; other 4xx raise `ConnectorError`; exhausted retries raise `TransientError`.
    """
    policy = context.retry
    backoff = wait_exponential_jitter(multiplier=policy.initial_wait_seconds, max=policy.max_backoff_seconds, jitter=policy.jitter_seconds)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, _Retryable) and error.wait_hint is not None:
            return min(error.wait_hint, policy.max_wait_seconds)
        return float(backoff(state))

    def attempt() -> httpx.Response:
        try:
            response = context.client.request(method, url, params=params, json=json, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"{vendor} did not answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"{vendor} connection failed ({type(exc).__name__}: {exc})") from exc
        now = context.clock().timestamp()
        status = response.status_code
        if 200 <= status < 300:
            return response
        if status in (401, 403):
            delay = rate_limit_delay(response) if rate_limit_delay else None
            if delay is not None:
                raise _Retryable(f"{vendor} rate limit exhausted ({status})", wait_hint=delay)
            what = "rejected the credentials (401): the token is wrong or expired" if status == 401 else "refused access (403): the credentials lack permission"
            raise AuthError(f"{vendor} {what}; replace them with PATCH /v1/sources/{{name}}. Answer: {_excerpt(response)}")
        if status == 429 or status >= 500:
            hint = retry_after_seconds(response, now)
            if hint is None and rate_limit_delay is not None:
                hint = rate_limit_delay(response)
            raise _Retryable(f"{vendor} answered {status}", wait_hint=hint)
        raise ConnectorError(f"{vendor} answered {status} to {method} {response.request.url.path}: {_excerpt(response)}")

    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry_if_exception_type(_Retryable),
        sleep=context.sleep,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except _Retryable as exc:
        raise TransientError(f"{exc}; gave up after {policy.max_attempts} attempts, the next pull resumes from the last stored page") from exc


def json_body(response: httpx.Response, *, vendor: str) -> Any:
    """The response's JSON, or `MalformedPage` when it is not JSON."""
    try:
        return response.json()
    except ValueError as exc:
        raise MalformedPage(f"{vendor} answered with a body that is not JSON: {_excerpt(response)}") from exc
