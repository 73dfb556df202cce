"""`ingest.http`: reading how long a server asks us to wait (every header form, dates past and
future, garbage, windows not spent) and the tenacity wait built on it (hint capped, else backoff)."""

from __future__ import annotations

from email.utils import formatdate

import httpx
import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff

NOW = 1_717_243_200.0  # 2024-06-01T12:00:00Z


def _seconds(status: int = 429, **headers: str) -> float | None:
    return retry_after_seconds(httpx.Response(status, headers={name.replace("_", "-"): value for name, value in headers.items()}), NOW)


# --- Retry-After ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("7", 7.0), ("0", 0.0), ("1.5", 1.5), (" 120 ", 120.0), ("86400", 86400.0)])
def test_retry_after_delta_seconds_integer_or_decimal(value: str, expected: float) -> None:
    assert _seconds(503, Retry_After=value) == expected


def test_retry_after_http_date_in_the_future_is_the_time_until_then() -> None:
    assert _seconds(503, Retry_After=formatdate(NOW + 30, usegmt=True)) == 30.0
    assert _seconds(429, Retry_After="Sat, 01 Jun 2024 12:02:00 GMT") == 120.0


def test_retry_after_http_date_in_the_past_means_retry_now() -> None:
    assert _seconds(503, Retry_After=formatdate(NOW - 300, usegmt=True)) == 0.0
    assert _seconds(503, Retry_After="Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


def test_retry_after_date_without_a_zone_is_read_as_gmt() -> None:
    assert _seconds(503, Retry_After="Sat, 01 Jun 2024 12:00:45 -0000") == 45.0


@pytest.mark.parametrize(
    "value",
    ["soon", "-5", "-0.5", "+5", "1e3", "inf", "nan", "5s", "1.2.3", "", "   ", "Sat, 32 Jun 2024 12:00:00 GMT", "Sat, 01 Jun 99999 12:00:00 GMT", "Sat, 01 Jun 2024 25:00:00 GMT"],
)
def test_garbage_or_negative_retry_after_gives_none(value: str) -> None:
    assert _seconds(503, Retry_After=value) is None


# --- RateLimit-Reset (IETF draft, PagerDuty) -----------------------------------------------------


@pytest.mark.parametrize("name", ["RateLimit-Reset", "ratelimit-reset"])
def test_ratelimit_reset_is_seconds_until_the_window_resets(name: str) -> None:
    assert retry_after_seconds(httpx.Response(429, headers={name: "12"}), NOW) == 12.0
    assert retry_after_seconds(httpx.Response(503, headers={name: "12", "RateLimit-Remaining": "0"}), NOW) == 12.0


def test_ratelimit_reset_is_ignored_while_requests_remain() -> None:
    assert _seconds(429, RateLimit_Reset="12", RateLimit_Remaining="3") is None
    assert _seconds(200, RateLimit_Reset="12", RateLimit_Remaining="99") is None
    assert _seconds(503, RateLimit_Reset="12") is None  # not a rate-limit refusal and no spent window


@pytest.mark.parametrize("value", ["-12", "soon", "inf", "Sat, 01 Jun 2024 12:02:00 GMT", ""])
def test_garbage_ratelimit_reset_gives_none(value: str) -> None:
    assert _seconds(429, RateLimit_Reset=value, RateLimit_Remaining="0") is None


# --- X-RateLimit-Reset (GitHub: Unix epoch) ------------------------------------------------------


def test_x_ratelimit_reset_epoch_when_the_window_is_spent() -> None:
    assert _seconds(403, X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(NOW) + 42)) == 42.0
    assert _seconds(200, X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(NOW) + 42)) == 42.0


def test_x_ratelimit_reset_is_honoured_on_429_without_a_remaining_count() -> None:
    assert _seconds(429, X_RateLimit_Reset=str(int(NOW) + 42)) == 42.0


def test_x_ratelimit_reset_is_ignored_while_requests_remain() -> None:
    reset = str(int(NOW) + 42)
    assert _seconds(403, X_RateLimit_Remaining="4999", X_RateLimit_Reset=reset) is None
    assert _seconds(429, X_RateLimit_Remaining="17", X_RateLimit_Reset=reset) is None
    assert _seconds(403, X_RateLimit_Reset=reset) is None  # a 403 alone is not a spent window


def test_x_ratelimit_reset_already_past_means_retry_now() -> None:
    assert _seconds(403, X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(NOW) - 10)) == 0.0


@pytest.mark.parametrize("value", ["-1", "soon", "2024-06-01T12:01:00Z", "nan", ""])
def test_garbage_x_ratelimit_reset_gives_none(value: str) -> None:
    assert _seconds(403, X_RateLimit_Remaining="0", X_RateLimit_Reset=value) is None


# --- which form wins -----------------------------------------------------------------------------


def test_retry_after_wins_over_resets_and_garbage_falls_through_to_them() -> None:
    both = {"X_RateLimit_Remaining": "0", "X_RateLimit_Reset": str(int(NOW) + 42), "RateLimit_Reset": "12"}
    assert _seconds(429, Retry_After="7", **both) == 7.0
    assert _seconds(429, Retry_After="later", **both) == 12.0
    assert _seconds(429, Retry_After="later", X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(NOW) + 42)) == 42.0


def test_no_header_gives_none() -> None:
    assert _seconds(429) is None
    assert _seconds(503) is None


# --- the wait strategy ---------------------------------------------------------------------------


def _waits(failures: list[BaseException], **options: float) -> list[float]:
    """The sleeps tenacity takes between the given failing attempts (then one success)."""
    slept: list[float] = []
    queue = list(failures)

    def attempt() -> str:
        if queue:
            raise queue.pop(0)
        return "ok"

    settings = {"max_wait": 10.0, "multiplier": 1.0, "max_backoff": 5.0, "jitter": 0.0} | options
    retrying = Retrying(
        stop=stop_after_attempt(len(failures) + 1), wait=wait_hint_or_backoff(**settings), retry=retry_if_exception_type((Retryable, OSError)), sleep=slept.append, reraise=True
    )
    assert retrying(attempt) == "ok"
    return slept


def test_a_hint_is_waited_as_given_up_to_the_cap() -> None:
    assert _waits([Retryable("429", wait_hint=3.0), Retryable("429", wait_hint=0.0)]) == [3.0, 0.0]
    assert _waits([Retryable("429", wait_hint=3600.0)], max_wait=10.0) == [10.0]


def test_no_hint_backs_off_exponentially_up_to_max_backoff() -> None:
    failures: list[BaseException] = [Retryable("503") for _ in range(5)]
    assert _waits(failures) == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_other_exceptions_back_off_too() -> None:
    assert _waits([OSError("reset"), ConnectionError("reset")], multiplier=0.5) == [0.5, 1.0]


def test_backoff_jitter_stays_within_its_bound() -> None:
    waits = _waits([Retryable("503") for _ in range(4)], multiplier=1.0, jitter=0.5, max_backoff=100.0)
    for attempt, wait in enumerate(waits):
        assert 2.0**attempt <= wait <= 2.0**attempt + 0.5


def test_the_hint_travels_with_the_exception() -> None:
    error = Retryable("HTTP 429", wait_hint=retry_after_seconds(httpx.Response(429, headers={"Retry-After": "2"}), NOW))
    assert (str(error), error.wait_hint) == ("HTTP 429", 2.0)
    assert Retryable("connection reset").wait_hint is None
