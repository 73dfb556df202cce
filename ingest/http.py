"""Retry timing for outbound HTTP: the one place that reads how long a server asks us to wait, and
the tenacity wait strategy that obeys it. Used by the pull connectors (`ingest.connectors.http`),
the completion probes (`curation.evidence.probe_runner`) and the Python client (`service.client`).

Contract:

- `retry_after_seconds(response, now)` returns the seconds the server asks the client to wait
  before trying again, or None when it names no usable wait. It never raises. Forms honoured,
  first usable one wins:
  1. `Retry-After` (RFC 9110): delta-seconds, integer or decimal (`7`, `1.5`), or an HTTP date
     (a date already past gives 0.0: retry now);
  2. `RateLimit-Reset` (IETF RateLimit header draft; PagerDuty sends it as `ratelimit-reset`):
     seconds until the window resets;
  3. `X-RateLimit-Reset` (GitHub): the Unix epoch second the window resets (already past: 0.0).
  A reset (2 and 3) only counts when the window is spent: its `…-Remaining` companion is `0`, or
  the status is 429 and no companion says otherwise. Negative, non-numeric, non-finite or
  unparseable values give None.
- `Retryable` is the exception a caller raises for an attempt worth another try, carrying that
  wait (`wait_hint`; None when the server named none or there was no answer).
- `wait_hint_or_backoff(...)` builds a tenacity `wait=`: the hint of a `Retryable`, capped at the
  caller's `max_wait`, else exponential backoff with jitter.

Which statuses to retry, margins (GitHub's whole-second resets against a drifting clock) and
vendor signals outside the headers (a GitHub secondary limit named only in the body) belong to the
callers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime

import httpx
from tenacity import RetryCallState, wait_exponential_jitter

__all__ = ["Retryable", "WaitStrategy", "retry_after_seconds", "wait_hint_or_backoff"]

WaitStrategy = Callable[[RetryCallState], float]
"""What tenacity's `wait=` takes: the seconds to sleep before the next attempt."""

# Unsigned decimal: RFC 9110 delta-seconds are digits only, but servers send fractions too; a sign,
# an exponent, `inf` or `nan` (all of which float() accepts) are not a wait anyone asked for.
_SECONDS = re.compile(r"\d+(?:\.\d+)?")


def _number(value: str | None) -> float | None:
    """An unsigned decimal header value as a finite float, else None."""
    if value is None or not _SECONDS.fullmatch(value.strip()):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _http_date_wait(value: str, now: float) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    # A date without a zone (`-0000`) comes back naive; HTTP dates are always GMT.
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return max(0.0, when.timestamp() - now)
    except (OverflowError, OSError, ValueError):
        return None


def _window_spent(response: httpx.Response, remaining_header: str) -> bool:
    remaining: str | None = response.headers.get(remaining_header)
    if remaining is None:
        return response.status_code == 429
    return remaining.strip() == "0"


def retry_after_seconds(response: httpx.Response, now: float) -> float | None:
    """Seconds `response` asks the client to wait before retrying (see the module docstring for
    the forms and their order), or None. `now` is the current time as Unix epoch seconds; pass
    the caller's clock so tests can move time. Never raises."""
    headers = response.headers
    retry_after: str = headers.get("retry-after", "").strip()
    if retry_after:
        seconds = _number(retry_after)
        if seconds is None:
            seconds = _http_date_wait(retry_after, now)
        if seconds is not None:
            return seconds
    if _window_spent(response, "ratelimit-remaining"):
        seconds = _number(headers.get("ratelimit-reset"))
        if seconds is not None:
            return seconds
    if _window_spent(response, "x-ratelimit-remaining"):
        reset = _number(headers.get("x-ratelimit-reset"))
        if reset is not None:
            return max(0.0, reset - now)
    return None


class Retryable(Exception):
    """An attempt that failed in a way worth trying again. `wait_hint`: seconds the server asked
    for, as `retry_after_seconds` reads them (None: back off instead)."""

    def __init__(self, message: str, *, wait_hint: float | None = None) -> None:
        super().__init__(message)
        self.wait_hint = wait_hint


def wait_hint_or_backoff(*, max_wait: float, multiplier: float, max_backoff: float, jitter: float) -> WaitStrategy:
    """A tenacity wait strategy. After a `Retryable` with a `wait_hint`: that hint, at most
    `max_wait` seconds. Otherwise (no hint, or any other exception): exponential backoff with
    jitter, `multiplier * 2**(attempt - 1) + uniform(0, jitter)` seconds, at most `max_backoff`."""
    backoff = wait_exponential_jitter(multiplier=multiplier, max=max_backoff, jitter=jitter)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None and state.outcome.failed else None
        if isinstance(error, Retryable) and error.wait_hint is not None:
            return min(error.wait_hint, max_wait)
        return float(backoff(state))

    return wait
