"""When to try a request again, and how long to wait first: pure functions, no I/O, no sleeping.

The server-side half, `retry_after_seconds`, is the one place in goldenset that reads how long a
server asks a client to wait; `ingest.http` (pull connectors, completion probes, the `http`
embedding backend) reuses it.

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
- `backoff_seconds(attempt, base=, cap=)` is exponential backoff with jitter: the `attempt`-th
  wait lies in `[d/2, d]` where `d = min(cap, base * 2**(attempt - 1))`.
- `RetryPolicy` decides, after each attempt of the client, whether to try again and after how
  long (see its docstring for which failures count as retryable).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timezone
from email.utils import parsedate_to_datetime

import httpx

__all__ = ["ALWAYS_RETRIED", "RETRIED_WHEN_IDEMPOTENT", "RetryPolicy", "backoff_seconds", "retry_after_seconds"]

ALWAYS_RETRIED = frozenset({429, 503})
"""Statuses that mean the server did not act on the request: retried for every request."""
RETRIED_WHEN_IDEMPOTENT = frozenset({500, 502, 504})
"""Statuses after which the request may or may not have taken effect: retried only when sending
it twice does no harm."""

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
        when = when.replace(tzinfo=timezone.utc)
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


def backoff_seconds(attempt: int, *, base: float, cap: float, uniform: Callable[[], float] = random.random) -> float:
    """The wait after the `attempt`-th failure (1 for the first) when the server named none:
    `d = min(cap, base * 2**(attempt - 1))`, jittered to `d * (1 + uniform()) / 2`, so in
    `[d/2, d]`. `uniform` returns a number in [0, 1) (tests pass a fixed one)."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 62))
    return ceiling * (1.0 + uniform()) / 2.0


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
