"""The probe runner against scripted OpenAI-compatible answers (httpx.MockTransport): the request it
sends, retries and what is not retried, timeouts, the concurrency limit, and answer order."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import formatdate

import httpx
import pytest

from curation.evidence.probe_runner import MAX_RETRY_AFTER_SECONDS, complete_sync, request_body
from schemas.evidence import ChatMessage, ProbeCompletion, ProbeEndpoint, ProbePrompt

ENDPOINT = ProbeEndpoint(base_url="https://llm.example.test/v1/", model="m-1", api_key="sk-test", concurrency=3, max_attempts=3, timeout_seconds=5)


def _prompts(count: int) -> list[ProbePrompt]:
    return [ProbePrompt(item_id=f"i{index}", messages=(ChatMessage(role="user", content=f"prompt {index}"),), max_tokens=40) for index in range(count)]


def _answer(content: str, finish: str = "stop") -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]})


def _echo(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    return _answer("echo: " + body["messages"][-1]["content"])


def _sync(
    handler: Callable[[httpx.Request], httpx.Response], prompts: list[ProbePrompt], endpoint: ProbeEndpoint = ENDPOINT, clock: Callable[[], float] = time.time
) -> tuple[list[ProbeCompletion], list[float]]:
    slept: list[float] = []
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        return complete_sync(client, prompts, endpoint, clock=clock, sleep=slept.append), slept


def test_the_request_is_greedy_with_the_model_budget_and_bearer_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _echo(request)

    completions, _ = _sync(handler, _prompts(1))
    request = seen[0]
    assert str(request.url) == "https://llm.example.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = json.loads(request.content)
    assert body == request_body(_prompts(1)[0], ENDPOINT)
    assert body["temperature"] == 0 and body["n"] == 1 and body["stream"] is False and body["max_tokens"] == 40 and body["model"] == "m-1"
    assert completions[0].completion == "echo: prompt 0" and completions[0].finish_reason == "stop" and completions[0].attempts == 1


def test_5xx_and_429_are_retried_honouring_retry_after() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(503, text="overloaded")
        if calls["n"] == 2:
            return httpx.Response(429, headers={"Retry-After": "7"}, text="slow down")
        return _echo(request)

    completions, slept = _sync(handler, _prompts(1))
    assert completions[0].completion == "echo: prompt 0"
    assert completions[0].attempts == 3
    assert len(slept) == 2 and slept[1] == 7.0


def test_exhausted_retries_leave_an_error_on_that_item_only() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if b"prompt 1" in request.content:
            raise httpx.ReadTimeout("slow", request=request)
        return _echo(request)

    completions, _ = _sync(handler, _prompts(3))
    assert [completion.item_id for completion in completions] == ["i0", "i1", "i2"]
    assert completions[1].completion is None
    assert completions[1].error is not None and "no answer within the timeout (ReadTimeout); gave up after 3 attempts" in completions[1].error
    assert completions[1].attempts == 3
    assert completions[0].completion == "echo: prompt 0" and completions[2].completion == "echo: prompt 2"


def test_client_errors_and_malformed_answers_are_not_retried() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if b"prompt 0" in request.content:
            return httpx.Response(400, json={"error": {"message": "max_tokens too large"}})
        return httpx.Response(200, json={"unexpected": True})

    completions, slept = _sync(handler, _prompts(2))
    assert completions[0].attempts == 1 and completions[0].error is not None and "answered 400" in completions[0].error
    assert completions[1].attempts == 1 and completions[1].error is not None and "not a chat completion" in completions[1].error
    assert slept == []


def test_the_sync_runner_keeps_within_the_concurrency_limit() -> None:
    lock = threading.Lock()
    state = {"in_flight": 0, "peak": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            state["in_flight"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
        time.sleep(0.01)
        with lock:
            state["in_flight"] -= 1
        return _echo(request)

    completions, _ = _sync(handler, _prompts(20))
    assert [completion.completion for completion in completions] == [f"echo: prompt {index}" for index in range(20)]
    assert state["peak"] == ENDPOINT.concurrency


def test_a_lost_connection_is_retried_and_progress_counts_every_item() -> None:
    calls = {"n": 0}
    lock = threading.Lock()
    progress: list[tuple[int, int]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            calls["n"] += 1
            first = calls["n"] == 1
        if first:
            raise httpx.ConnectError("refused", request=request)
        return _echo(request)

    slept: list[float] = []
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        completions = complete_sync(client, _prompts(12), ENDPOINT, clock=time.time, sleep=slept.append, progress=lambda done, total: progress.append((done, total)))
    assert [completion.completion for completion in completions] == [f"echo: prompt {index}" for index in range(12)]
    assert all(completion.error is None for completion in completions)
    assert sum(completion.attempts for completion in completions) == 13
    assert len(slept) == 1 and 0 < slept[0] <= 1.0  # the first backoff: half a second plus up to half a second of jitter
    assert progress == [(done, 12) for done in range(1, 13)]


def test_endpoint_settings_are_checked_early() -> None:
    with pytest.raises(ValueError, match="must start with http"):
        ProbeEndpoint(base_url="llm.example.test/v1", model="m")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ProbeEndpoint(base_url="http://x/v1", model="m", concurrency=0)
    assert "sk-test" not in repr(ENDPOINT)


def test_retry_after_as_an_http_date_is_honoured_against_the_clock_handed_in() -> None:
    calls = {"n": 0}
    now = datetime(2025, 6, 1, 12, tzinfo=UTC).timestamp()
    when = now + 30

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(503, headers={"Retry-After": formatdate(when, usegmt=True)})
        return _echo(request)

    _, slept = _sync(handler, _prompts(1), clock=lambda: now)
    assert slept[0] == 30


def test_a_long_wait_asked_for_is_cut_to_a_minute() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx.Response(429, headers={"Retry-After": "3600"})
        return _echo(request)

    completions, slept = _sync(handler, _prompts(1))
    assert completions[0].completion == "echo: prompt 0"
    assert slept == [MAX_RETRY_AFTER_SECONDS] == [60.0]
