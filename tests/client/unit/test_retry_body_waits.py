"""The last form `goldenset_retry.retry_after_seconds` reads: a wait named only in a 429's or 503's
JSON body (incident.io's `rate_limit.retry_after`), as seconds or as a moment, in the places and
spellings vendors use; and every junk body (not JSON, too large, negative, not finite, the wrong
type, nested wrongly) read as no wait without raising. Headers still come first."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from goldenset_client import AsyncClient
from goldenset_retry import retry_after_seconds

NOW = datetime(2025, 9, 1, tzinfo=UTC)
EPOCH = NOW.timestamp()


def wait(body: Any, *, status: int = 429, headers: dict[str, str] | None = None) -> float | None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return retry_after_seconds(httpx.Response(status, content=content, headers={"Content-Type": "application/json", **(headers or {})}), EPOCH)


def test_incident_ios_rate_limit_moment_is_the_wait() -> None:
    body = {
        "type": "too_many_requests",
        "status": 429,
        "rate_limit": {"name": "api_key_name", "limit": 1200, "remaining": 0, "retry_after": "2025-09-01T00:00:20Z"},
        "errors": [{"code": "too_many_requests", "message": "Too many requests hit the API too quickly."}],
    }
    assert wait(body) == 20.0
    assert wait(body, status=503) == 20.0
    # A moment already past means: try now.
    assert wait({"rate_limit": {"retry_after": "2025-08-31T23:59:00Z"}}) == 0.0


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        ({"retry_after": 7}, 7.0),
        ({"retryAfter": 1.5}, 1.5),
        ({"retry_after_seconds": "12"}, 12.0),
        ({"retry_after": " 2.5 "}, 2.5),
        ({"error": {"message": "slow down", "retry_after": 30}}, 30.0),
        ({"error": {"retryAfter": "2025-09-01T02:00:00+02:00"}}, 0.0),
        ({"errors": [{"code": "rate_limited", "retry_after_seconds": 45}, {"retry_after": 1}]}, 45.0),
        ({"rate_limit": {"retry_after": "2025-09-01T00:01:00.250+00:00"}}, 60.25),
        ({"rate_limit": {"retry_after": "2025-09-01T00:00:30.000000Z"}}, 30.0),
        # The top level before the nested objects, then rate_limit, error, errors[0].
        ({"retry_after": 3, "rate_limit": {"retry_after": 9}}, 3.0),
        ({"error": {"retry_after": 4}, "rate_limit": {"retry_after": 9}}, 9.0),
        ({"errors": [{"retry_after": 5}], "error": {"retry_after": 6}}, 6.0),
        # An unusable member is passed over for the next usable one.
        ({"retry_after": "soon", "rate_limit": {"retry_after": 8}}, 8.0),
        ({"retry_after": -1, "retryAfter": 2}, 2.0),
    ],
)
def test_a_body_wait_is_read_in_every_place_spelling_and_form(body: dict[str, Any], seconds: float) -> None:
    assert wait(body) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"Too Many Requests",
        b"<html><body>429 Too Many Requests</body></html>",
        b'{"retry_after": 5',  # cut short
        b"\xff\xfe\x00garbage",
        b"[" * 100_000 + b"]" * 100_000,  # past the size limit
        b'{"pad": "' + b"x" * (64 * 1024) + b'", "retry_after": 5}',  # a wait in a body too large to read
        b"[" * 20_000 + b"]" * 20_000,  # nested past the parser's depth
        b'{"retry_after": NaN}',
        b'{"retry_after": Infinity}',
        b'{"retry_after": -Infinity}',
        b'{"retry_after": 1e999}',
        b'{"retry_after": ' + b"9" * 5000 + b"}",  # more digits than Python converts
        json.dumps({"retry_after": -5}).encode(),
        json.dumps({"retry_after": "-5"}).encode(),
        json.dumps({"retry_after": "1e3"}).encode(),
        json.dumps({"retry_after": "nan"}).encode(),
        json.dumps({"retry_after": "inf"}).encode(),
        json.dumps({"retry_after": True}).encode(),
        json.dumps({"retry_after": None}).encode(),
        json.dumps({"retry_after": [5]}).encode(),
        json.dumps({"retry_after": {"seconds": 5}}).encode(),
        json.dumps({"retry_after": "2025-09-01T00:00:20"}).encode(),  # a moment without a zone
        json.dumps({"retry_after": "2025-09-01"}).encode(),
        json.dumps({"retry_after": "2025-09-01T00:00:20." + "0" * 100 + "Z"}).encode(),  # longer than any moment
        json.dumps({"retry_after": "9" * 400}).encode(),  # a number too large to be finite
        json.dumps({"Retry-After": 5, "retry": 5, "wait": 5}).encode(),  # spellings nobody uses for this
        json.dumps({"rate_limit": [{"retry_after": 5}], "error": "slow down", "errors": {"retry_after": 5}}).encode(),
        json.dumps({"errors": []}).encode(),
        json.dumps({"errors": ["slow down", {"retry_after": 5}]}).encode(),  # only errors[0] is read
        json.dumps({"data": {"rate_limit": {"retry_after": 5}}}).encode(),  # nested deeper than the places read
        json.dumps([{"retry_after": 5}]).encode(),
        json.dumps(5).encode(),
        json.dumps("retry_after").encode(),
    ],
)
def test_junk_bodies_name_no_wait_and_never_raise(body: bytes) -> None:
    assert wait(body) is None


def test_only_429_and_503_bodies_are_read_and_headers_come_first() -> None:
    body = {"rate_limit": {"retry_after": "2025-09-01T00:00:20Z"}}
    for status in (200, 400, 403, 500, 502, 504):
        assert wait(body, status=status) is None
    assert wait(body, headers={"Retry-After": "7"}) == 7.0
    assert wait(body, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH) + 40)}) == 40.0
    # A header that names no usable wait leaves the body to decide.
    assert wait(body, headers={"Retry-After": "whenever"}) == 20.0


def test_a_streamed_answer_not_yet_read_names_no_body_wait() -> None:
    stream = httpx.ByteStream(json.dumps({"retry_after": 5}).encode())
    response = httpx.Response(429, stream=stream)
    assert retry_after_seconds(response, EPOCH) is None


def test_the_client_waits_as_a_429_body_asks() -> None:
    """The Python client, which reads waits with the same function, sleeps the body's wait."""
    moment = datetime.now(UTC) + timedelta(seconds=3)
    answers = [
        httpx.Response(429, json={"type": "too_many_requests", "rate_limit": {"retry_after": moment.isoformat()}}),
        httpx.Response(200, json=[]),
    ]
    requests: list[httpx.Request] = []
    slept: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return answers[len(requests) - 1]

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def list_evals() -> None:
        async with AsyncClient("http://goldenset.test", token="t", max_backoff=10.0, transport=httpx.MockTransport(answer)) as client:
            await client.list_evals()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("goldenset_client.async_client.asyncio.sleep", sleep)
        asyncio.run(list_evals())
    assert len(requests) == 2 and len(slept) == 1 and 2.0 <= slept[0] <= 3.0
