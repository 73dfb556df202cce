"""When the client tries a request again: `RetryPolicy`, which decides after each attempt whether
to try again and after how long.

The timing it obeys (`retry_after_seconds`: how long a server asks to wait; `backoff_seconds`:
exponential backoff with jitter) is `goldenset_retry`'s, shared with the service, and re-exported
here. See `RetryPolicy`'s docstring for which failures count as retryable.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from goldenset_retry import backoff_seconds, retry_after_seconds

__all__ = ["ALWAYS_RETRIED", "RETRIED_WHEN_IDEMPOTENT", "RetryPolicy", "backoff_seconds", "retry_after_seconds"]

ALWAYS_RETRIED = frozenset({429, 503})
"""Statuses that mean the server did not act on the request: retried for every request."""
RETRIED_WHEN_IDEMPOTENT = frozenset({500, 502, 504})
"""Statuses after which the request may or may not have taken effect: retried only when sending
it twice does no harm."""


def _never_delivered(error: httpx.TransportError) -> bool:
    """True when the request surely never reached the server (no connection, no pool slot)."""
    return isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. `attempts` counts every try (1: never retry); `backoff`
    is the first wait in seconds (doubling, jittered) and `max_backoff` the longest wait.

    A request is tried again, while attempts remain, after:

    - a 429 or 503: after the wait the server asks for (`retry_after_seconds`), else backoff. A
      server asking for longer than `max_backoff` is not retried: the error says how long to wait;
    - a 500, 502 or 504, a timeout or a lost connection: only when the request is `idempotent`
      (sending it twice does no harm: a read, a run start with its Idempotency-Key, results);
    - a failure to connect at all: always, since nothing was sent.
    """

    attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 20.0
    uniform: Callable[[], float] = random.random

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retries is the number of attempts, at least 1 (got {self.attempts})")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff and max_backoff are seconds, at least 0")

    def after_response(self, response: httpx.Response, attempt: int, *, idempotent: bool, now: float) -> float | None:
        """Seconds to wait before trying again after `response` answered the `attempt`-th try, or
        None to keep this answer (a success, a refusal, or retries used up)."""
        status = response.status_code
        if attempt >= self.attempts or not (status in ALWAYS_RETRIED or (idempotent and status in RETRIED_WHEN_IDEMPOTENT)):
            return None
        asked = retry_after_seconds(response, now)
        if asked is None:
            return backoff_seconds(attempt, base=self.backoff, cap=self.max_backoff, uniform=self.uniform)
        return asked if asked <= self.max_backoff else None

    def after_error(self, error: httpx.TransportError, attempt: int, *, idempotent: bool) -> float | None:
        """Seconds to wait before trying again after the `attempt`-th try failed with `error`
        (no answer), or None to give up."""
        if attempt >= self.attempts or not (idempotent or _never_delivered(error)):
            return None
        return backoff_seconds(attempt, base=self.backoff, cap=self.max_backoff, uniform=self.uniform)
