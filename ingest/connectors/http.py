"""HTTP for connectors: retries with exponential backoff and jitter (tenacity), `Retry-After`,
rate-limit resets and a rate-limit body's `retry_after` honoured (read by `ingest.http`), and
vendor answers classified into the connector errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from ingest.connectors.base import AuthError, ConnectorContext, ConnectorError, MalformedPage, TransientError
from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff
from ingest.sanity import loads

RateLimitDelay = Callable[[httpx.Response], float | None]
"""Given a refused response, how long to wait for the vendor's rate limit to reset (None: not a rate limit)."""

_BODY_EXCERPT = 300


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
    (waiting as long as the vendor asks: `rate_limit_delay` first when given, then
    `ingest.http.retry_after_seconds`; else exponential backoff with jitter). A vendor that asks
    for a longer wait than `max_wait_seconds` is not waited for: `TransientError` at once, naming
    both (the next pull resumes from the last stored page). 401 and 403 (unless `rate_limit_delay`
    recognises a rate limit) raise `AuthError`; other 4xx raise `ConnectorError`; exhausted
    retries raise `TransientError`. A `TransientError` carries the wait the vendor's last answer
    asked for (`wait_seconds`), so a caller that does not wait (a connection test) can say it.
    """
    policy = context.retry
    wait = wait_hint_or_backoff(max_wait=policy.max_wait_seconds, multiplier=policy.initial_wait_seconds, max_backoff=policy.max_backoff_seconds, jitter=policy.jitter_seconds)

    def _waited_for(error: Retryable) -> Exception:
        """`error`, or when the wait it asks for is longer than the policy allows, a `TransientError` saying so."""
        if error.wait_hint is not None and error.wait_hint > policy.max_wait_seconds:
            refusal = TransientError(
                f"{error}: it asks to wait {error.wait_hint:.0f} s before the next request, more than the {policy.max_wait_seconds:.0f} s a pull waits; "
                "the next pull resumes from the last stored page",
                wait_seconds=error.wait_hint,
            )
            refusal.__cause__ = error  # the vendor's answer, in its own words
            return refusal
        return error

    def attempt() -> httpx.Response:
        try:
            response = context.client.request(method, url, params=params, json=json, headers=headers)
        except httpx.TimeoutException as exc:
            raise Retryable(f"{vendor} did not answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"{vendor} connection failed ({type(exc).__name__}: {exc})") from exc
        now = context.clock().timestamp()
        status = response.status_code
        if 200 <= status < 300:
            return response
        if status in (401, 403):
            delay = rate_limit_delay(response) if rate_limit_delay else None
            if delay is not None:
                raise _waited_for(Retryable(f"{vendor} rate limit exhausted ({status})", wait_hint=delay))
            what = "rejected the credentials (401): the token is wrong or expired" if status == 401 else "refused access (403): the credentials lack permission"
            raise AuthError(
                f"{vendor} {what}; replace them with `goldenset source configure {{name}} --set KEY=-` (it asks for the value) "
                f"or PATCH /v1/sources/{{name}} connector_settings. Answer: {_excerpt(response)}"
            )
        if status == 429 or status >= 500:
            # The connector's own reading of its vendor comes first: it may add a margin or know a
            # wait the headers do not name (GitHub's secondary limits).
            hint = rate_limit_delay(response) if rate_limit_delay is not None else None
            if hint is None:
                hint = retry_after_seconds(response, now)
            raise _waited_for(Retryable(f"{vendor} answered {status}", wait_hint=hint))
        raise ConnectorError(f"{vendor} answered {status} to {method} {response.request.url.path}: {_excerpt(response)}")

    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry_if_exception_type(Retryable),
        sleep=context.sleep,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except Retryable as exc:
        raise TransientError(f"{exc}; gave up after {policy.max_attempts} attempts, the next pull resumes from the last stored page", wait_seconds=exc.wait_hint) from exc


def json_body(response: httpx.Response, *, vendor: str) -> Any:
    """The response's JSON, or `MalformedPage` when it is not JSON. Read with `ingest.sanity.loads`:
    one record nested too deeply costs that record, not the page."""
    try:
        return loads(response.text)
    except ValueError as exc:
        raise MalformedPage(f"{vendor} answered with a body that is not JSON: {_excerpt(response)}") from exc
