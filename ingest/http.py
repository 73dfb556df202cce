"""Retry timing for outbound HTTP: how long a server asks us to wait, and the tenacity wait
strategy that obeys it. Used by the pull connectors (`ingest.connectors.http`), the completion
probes (`curation.evidence.probe_runner`) and the `http` embedding backend.

Contract:

- `retry_after_seconds(response, now)` is `goldenset_retry`'s, the neutral package the Python
  client uses too, so the service and its client read `Retry-After`, `RateLimit-Reset`,
  `X-RateLimit-Reset` (with its `…-Remaining: 0`) and, last, a 429's or 503's JSON body naming its
  wait (`retry_after`, as incident.io sends it in `rate_limit`) the same way: seconds to wait, or
  None when the answer names no usable wait. Never raises. See that package for the forms honoured
  and their order.
- `Retryable` is the exception a caller raises for an attempt worth another try, carrying that
  wait (`wait_hint`; None when the server named none or there was no answer).
- `wait_hint_or_backoff(...)` builds a tenacity `wait=`: the hint of a `Retryable`, capped at the
  caller's `max_wait`, else exponential backoff with jitter.

Which statuses to retry, margins (GitHub's whole-second resets against a drifting clock) and
vendor signals outside those forms (a GitHub secondary limit named only by its message) belong to
the callers.
"""

from __future__ import annotations

from collections.abc import Callable

from goldenset_retry import retry_after_seconds
from tenacity import RetryCallState, wait_exponential_jitter

__all__ = ["Retryable", "WaitStrategy", "retry_after_seconds", "wait_hint_or_backoff"]

WaitStrategy = Callable[[RetryCallState], float]
"""What tenacity's `wait=` takes: the seconds to sleep before the next attempt."""


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
