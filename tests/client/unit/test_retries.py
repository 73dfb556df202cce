"""Retries over `httpx.MockTransport`: overload, rate limits (waiting as the server asks) and lost
connections are retried, a run start keeps one Idempotency-Key throughout, refusals are raised at
once as typed errors, and a request that may have taken effect is not sent twice. Also the
pure timing functions of `goldenset_retry`, which the client re-exports."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import goldenset_retry
import httpx
import pytest
from goldenset_client import AsyncClient, Client, Conflict, Forbidden, GoldensetUnavailable, InvalidRequest, NotFound, RateLimited, ServerError, Unauthorized
from goldenset_client import retry as client_retry
from goldenset_client.retry import RetryPolicy, backoff_seconds, retry_after_seconds

import ingest.http

RUN = {
    "id": 7, "eval": "ops", "release": 1, "split": "dev", "model": "m", "endpoint": "e", "training_cutoff": None, "trains_on_inputs": "no", "terms_checked_at": None,
    "exposes_items": False, "augmented": False, "occurred_after": None, "item_count": 0, "actor": "token:t", "created_at": "2024-06-01T00:00:00Z", "canary": "c",
    "warning": None, "items": [],
}  # fmt: skip
Answer = httpx.Response | str
NOW = 1_717_243_200.0


class Script:
    """A MockTransport handler answering from a list (`"drop"`: the connection is lost, `"refused"`:
    no connection), recording every request and the client's sleeps."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if answer == "drop":
            raise httpx.RemoteProtocolError("server disconnected without sending a response", request=request)
        if answer == "refused":
            raise httpx.ConnectError("connection refused", request=request)
        assert isinstance(answer, httpx.Response)
        return answer


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the clients take, recorded instead of slept."""
    taken: list[float] = []

    async def asleep(seconds: float) -> None:
        taken.append(seconds)

    monkeypatch.setattr("goldenset_client.client.time.sleep", taken.append)
    monkeypatch.setattr("goldenset_client.async_client.asyncio.sleep", asleep)
    return taken


def _client(script: Callable[[httpx.Request], httpx.Response], retries: int = 4) -> Client:
    return Client("http://goldenset.test", token="t", retries=retries, backoff=0.01, max_backoff=5.0, transport=httpx.MockTransport(script))


def test_overload_rate_limits_and_lost_connections_are_retried_with_one_idempotency_key(sleeps: list[float]) -> None:
    script = Script([httpx.Response(503), httpx.Response(429, headers={"Retry-After": "3"}), "drop", httpx.Response(201, json=RUN)])
    with _client(script) as client:
        run = client.start_run("ops", model="m", endpoint="e")
    assert run.id == 7 and len(script.requests) == 4
    assert len({request.headers["Idempotency-Key"] for request in script.requests}) == 1
    assert all(request.headers["Authorization"] == "Bearer t" for request in script.requests)
    assert json.loads(script.requests[0].content) == {"model": "m", "endpoint": "e", "release": "latest", "split": "dev", "occurred_after": None}
    assert sleeps[1] == 3.0 and 0.005 <= sleeps[0] <= 0.01 and 0.02 <= sleeps[2] <= 0.04


def test_the_async_client_retries_the_same_way(sleeps: list[float]) -> None:
    script = Script([httpx.Response(503), httpx.Response(429, headers={"RateLimit-Reset": "2"}), "drop", httpx.Response(201, json=RUN)])

    async def start() -> int:
        async with AsyncClient("http://goldenset.test", token="t", backoff=0.01, transport=httpx.MockTransport(script)) as client:
            return (await client.start_run("ops", model="m", endpoint="e", idempotency_key="k1")).id

    assert asyncio.run(start()) == 7
    assert [request.headers["Idempotency-Key"] for request in script.requests] == ["k1"] * 4 and sleeps[1] == 2.0


@pytest.mark.parametrize(
    ("status", "problem", "error"),
    [
        (401, {"title": "Unauthorized", "detail": "the bearer token expired"}, Unauthorized),
        (403, {"title": "Sealed run refused", "detail": "terms unknown", "condition": "terms_unknown"}, Forbidden),
        (404, {"title": "Not Found", "detail": "no run 1"}, NotFound),
        (409, {"title": "Conflict", "detail": "already approved"}, Conflict),
        (422, {"title": "Invalid", "detail": "3 records refused", "errors": [{"position": 2, "reason": "missing_field"}]}, InvalidRequest),
    ],
)
def test_refusals_are_raised_at_once_as_typed_errors(sleeps: list[float], status: int, problem: dict[str, Any], error: type[Exception]) -> None:
    script = Script([httpx.Response(status, json={**problem, "status": status}, headers={"Content-Type": "application/problem+json"})])
    with _client(script) as client, pytest.raises(error) as caught:
        client.get_run(1)
    assert len(script.requests) == 1 and sleeps == []
    assert (caught.value.status, caught.value.title, caught.value.detail) == (status, problem["title"], problem["detail"])  # type: ignore[attr-defined]
    if isinstance(caught.value, Forbidden):
        assert caught.value.condition == "terms_unknown"
    if isinstance(caught.value, InvalidRequest):
        assert caught.value.errors == [{"position": 2, "reason": "missing_field"}]


def test_retries_end_with_the_last_answer_or_failure(sleeps: list[float]) -> None:
    down = Script([httpx.Response(502, text="bad gateway")])
    with _client(down, retries=2) as client, pytest.raises(ServerError) as caught:
        client.get_run(1)
    assert caught.value.status == 502 and caught.value.detail == "bad gateway" and len(down.requests) == 3

    limited = Script([httpx.Response(429, headers={"Retry-After": "1"})])
    with _client(limited, retries=1) as client, pytest.raises(RateLimited) as limit:
        client.list_evals()
    assert limit.value.retry_after == 1.0 and len(limited.requests) == 2

    # A wait longer than max_backoff is not waited for: the error says how long the server asked.
    patient = Script([httpx.Response(429, headers={"Retry-After": formatdate(time.time() + 3600, usegmt=True)})])
    with _client(patient) as client, pytest.raises(RateLimited) as long_wait:
        client.list_evals()
    assert long_wait.value.retry_after is not None and long_wait.value.retry_after > 5 and len(patient.requests) == 1

    lost = Script(["drop"])
    with _client(lost, retries=2) as client, pytest.raises(GoldensetUnavailable) as unavailable:
        client.list_evals()
    assert unavailable.value.status == 0 and "3 attempt" in unavailable.value.detail and isinstance(unavailable.value.__cause__, httpx.RemoteProtocolError)


def test_a_request_that_may_have_taken_effect_is_not_sent_twice(sleeps: list[float]) -> None:
    # Undoing a review twice would undo two decisions: after a lost answer or a 502 it is not resent ...
    for answer in ("drop", httpx.Response(502)):
        script = Script([answer, httpx.Response(200, json={})])
        with _client(script) as client, pytest.raises(GoldensetUnavailable if answer == "drop" else ServerError):
            client.undo_review(5)
        assert len(script.requests) == 1
    # ... but when it never reached the server, or the server said it did nothing (503), it is.
    undone = {"item_id": 5, "status": "unique", "undone": "approve", "reason": "", "decided_by": "token:t", "decided_at": "2024-06-01T00:00:00Z"}
    script = Script(["refused", httpx.Response(503), httpx.Response(200, json=undone)])
    with _client(script) as client:
        assert client.undo_review(5).undone == "approve"
    assert len(script.requests) == 3


def test_constructor_arguments_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="token"):
        Client("http://x", token="")
    with pytest.raises(ValueError, match="http"):
        Client("goldenset.test", token="t")
    with pytest.raises(ValueError, match="retries"):
        Client("http://x", token="t", retries=-1)
    monkeypatch.delenv("GOLDENSET_TOKEN", raising=False)
    with pytest.raises(ValueError, match="GOLDENSET_TOKEN"):
        Client.from_env()
    monkeypatch.setenv("GOLDENSET_TOKEN", "secret")
    monkeypatch.setenv("GOLDENSET_URL", "http://goldenset.test:9000/")
    with Client.from_env(retries=0) as client:
        assert (client.settings.base_url, client.settings.token, client.settings.policy.attempts) == ("http://goldenset.test:9000", "secret", 1)


def test_server_waits_are_read_in_every_form() -> None:
    def wait(status: int, headers: dict[str, str]) -> float | None:
        return retry_after_seconds(httpx.Response(status, headers=headers), NOW)

    assert wait(503, {"Retry-After": "7"}) == 7.0
    assert wait(503, {"Retry-After": formatdate(NOW + 30, usegmt=True)}) == 30.0
    assert wait(429, {"ratelimit-reset": "12"}) == 12.0
    assert wait(503, {"RateLimit-Reset": "12", "RateLimit-Remaining": "3"}) is None
    assert wait(503, {"X-RateLimit-Reset": str(int(NOW) + 40), "X-RateLimit-Remaining": "0"}) == 40.0
    assert wait(503, {"Retry-After": "soon"}) is None
    # ingest's connectors, probes and embedding backend read waits with the very same function,
    # from the neutral package both use.
    assert ingest.http.retry_after_seconds is client_retry.retry_after_seconds is goldenset_retry.retry_after_seconds


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    assert [backoff_seconds(n, base=1.0, cap=10.0, uniform=lambda: 1.0) for n in range(1, 6)] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert [backoff_seconds(n, base=1.0, cap=10.0, uniform=lambda: 0.0) for n in (1, 5)] == [0.5, 5.0]
    assert backoff_seconds(10_000, base=1.0, cap=10.0) <= 10.0
    policy = RetryPolicy(attempts=3, backoff=1.0, max_backoff=10.0, uniform=lambda: 1.0)
    assert policy.after_response(httpx.Response(500), 1, idempotent=True, now=NOW) == 1.0
    assert policy.after_response(httpx.Response(500), 1, idempotent=False, now=NOW) is None
    assert policy.after_response(httpx.Response(503), 3, idempotent=True, now=NOW) is None
    assert policy.after_response(httpx.Response(404), 1, idempotent=True, now=NOW) is None
