"""How long to wait before trying an HTTP request again: pure functions, no I/O, no sleeping.

The one place in goldenset that reads how long a server asks a client to wait, shared by the
service (`ingest.http`: pull connectors, completion probes, the `http` embedding backend) and the
Python client (`goldenset_client.retry`). It belongs to neither: it imports httpx and the standard
library only (an import-linter contract in the repository's pyproject.toml checks it). It ships in
the goldenset-client distribution, because that one must install alone and the service's
distribution already depends on it.

Contract:

- `retry_after_seconds(response, now)` returns the seconds the server asks the client to wait
  before trying again, or None when it names no usable wait. It never raises. Forms honoured,
  first usable one wins:
  1. `Retry-After` (RFC 9110): delta-seconds, integer or decimal (`7`, `1.5`), or an HTTP date
     (a date already past gives 0.0: retry now);
  2. `RateLimit-Reset` (IETF RateLimit header draft; PagerDuty sends it as `ratelimit-reset`):
     seconds until the window resets;
  3. `X-RateLimit-Reset` (GitHub): the Unix epoch second the window resets (already past: 0.0).
  4. a JSON body's wait, on a 429 or 503 only (incident.io names its wait nowhere else): a
     `retry_after`, `retryAfter` or `retry_after_seconds` member of the body object, else of its
     `rate_limit`, `error` or `errors[0]` object (first found, in that order), holding seconds (a
     number or a numeric string) or a moment (RFC 3339 / ISO 8601 with a zone, as incident.io's
     `rate_limit.retry_after`; already past: 0.0). A body larger than 64 KiB, not JSON, not yet
     read (a streamed answer) or holding none of these is no wait.
  A reset (2 and 3) only counts when the window is spent: its `…-Remaining` companion is `0`, or
  the status is 429 and no companion says otherwise. Negative, non-numeric, non-finite or
  unparseable values give None (in a body: that member is skipped, the next one is read).
- `backoff_seconds(attempt, base=, cap=)` is exponential backoff with jitter: the `attempt`-th
  wait lies in `[d/2, d]` where `d = min(cap, base * 2**(attempt - 1))`.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx

__all__ = ["backoff_seconds", "retry_after_seconds"]

# Unsigned decimal: RFC 9110 delta-seconds are digits only, but servers send fractions too; a sign,
# an exponent, `inf` or `nan` (all of which float() accepts) are not a wait anyone asked for.
_SECONDS = re.compile(r"\d+(?:\.\d+)?")

_BODY_STATUSES = frozenset({429, 503})
_BODY_LIMIT = 64 * 1024
"""Bytes: a rate-limit answer is a few hundred; anything larger is not parsed for a wait."""
_BODY_WAIT_KEYS = ("retry_after", "retryAfter", "retry_after_seconds")
_BODY_WAIT_HOLDERS = ("rate_limit", "error")
_MOMENT_LIMIT = 64
"""Characters: longer than any ISO 8601 timestamp."""


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


def _iso_moment_wait(value: str, now: float) -> float | None:
    """Seconds until an ISO 8601 moment with a zone (`2025-09-01T00:00:20Z`), 0.0 when past."""
    if len(value) > _MOMENT_LIMIT:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:  # a moment without a zone names no instant
        return None
    try:
        return max(0.0, when.timestamp() - now)
    except (OverflowError, OSError, ValueError):
        return None


def _body_value_wait(value: object, now: float) -> float | None:
    """A body member's wait: a non-negative finite number of seconds, a numeric string, or a moment."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            return None
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        number = _number(text)
        return number if number is not None else _iso_moment_wait(text, now)
    return None


def _body_wait(response: httpx.Response, now: float) -> float | None:
    """The wait a 429's or 503's JSON body names (form 4 of the module docstring), or None."""
    if response.status_code not in _BODY_STATUSES:
        return None
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return None
    if not content or len(content) > _BODY_LIMIT:
        return None
    try:
        document = json.loads(content)
    except (ValueError, RecursionError):  # not JSON, not text, or nested past the parser's depth
        return None
    if not isinstance(document, dict):
        return None
    holders: list[object] = [document, *(document.get(name) for name in _BODY_WAIT_HOLDERS)]
    errors = document.get("errors")
    if isinstance(errors, list) and errors:
        holders.append(errors[0])
    for holder in holders:
        if not isinstance(holder, dict):
            continue
        for key in _BODY_WAIT_KEYS:
            if key in holder:
                seconds = _body_value_wait(holder[key], now)
                if seconds is not None:
                    return seconds
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
    return _body_wait(response, now)


def backoff_seconds(attempt: int, *, base: float, cap: float, uniform: Callable[[], float] = random.random) -> float:
    """The wait after the `attempt`-th failure (1 for the first) when the server named none:
    `d = min(cap, base * 2**(attempt - 1))`, jittered to `d * (1 + uniform()) / 2`, so in
    `[d/2, d]`. `uniform` returns a number in [0, 1) (tests pass a fixed one)."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 62))
    return ceiling * (1.0 + uniform()) / 2.0
