"""Sending probe requests to an endpoint, through an `httpx` client the caller owns (so the
service's gate, proxies and test transports all apply): `post_each` sends any kind of request
under the rules below, `complete_sync` the completion test's prompts to an OpenAI-compatible
`/chat/completions` (the log-probability tests' requests are `curation.evidence.logprob_runner`'s).

Every chat request asks for greedy decoding (temperature 0) and one choice. At most
`endpoint.concurrency` requests are in flight; each attempt is bounded by
`endpoint.timeout_seconds`; timeouts, connection failures, 429 and 5xx are retried up to
`endpoint.max_attempts` attempts, waiting as long as the endpoint asks (`Retry-After` or a
rate-limit reset, read by `ingest.http`, at most `MAX_RETRY_AFTER_SECONDS`), else with exponential
backoff and jitter. A probe that still fails comes back with `error` set: one bad item never sinks
the run.

The whole flow is `probing.plan_probes` → `complete_sync` here → `probe_report.probe_report`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from curation.clock import EpochClock
from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff
from schemas.evidence import ProbeCompletion, ProbeEndpoint, ProbePrompt

Progress = Callable[[int, int], None]
"""Called with (done, total) after each probe completes, for a progress bar."""

MAX_RETRY_AFTER_SECONDS = 60.0
"""Longer waits asked for by the endpoint are cut to this, so that one throttled item cannot stall a whole probe."""
_EXCERPT = 300


class NotRetried(Exception):
    """An answer not worth retrying (4xx other than 429, a body that is not the answer expected)."""


def request_body(prompt: ProbePrompt, endpoint: ProbeEndpoint) -> dict[str, Any]:
    """The JSON body of one chat-completions request: greedy, one choice, no streaming."""
    return {
        "model": endpoint.model,
        "messages": [message.model_dump() for message in prompt.messages],
        "temperature": 0,
        "top_p": 1,
        "n": 1,
        "stream": False,
        "max_tokens": prompt.max_tokens,
    }


def _headers(endpoint: ProbeEndpoint) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if endpoint.api_key is not None:
        headers["Authorization"] = f"Bearer {endpoint.api_key.get_secret_value()}"
    return headers


def excerpt(response: httpx.Response) -> str:
    """The start of an answer's body, whitespace collapsed, for an error message."""
    text = " ".join(response.text.split())
    return text[:_EXCERPT] + ("…" if len(text) > _EXCERPT else "")


def _check_status(response: httpx.Response, clock: EpochClock) -> None:
    """Raise `Retryable` for 429 and 5xx (a rate-limit reset is read against `clock`), `NotRetried`
    for any other status outside 2xx."""
    status = response.status_code
    if status == 429 or status >= 500:
        raise Retryable(f"the endpoint answered {status}", wait_hint=retry_after_seconds(response, clock()))
    if not 200 <= status < 300:
        raise NotRetried(f"the endpoint answered {status}: {excerpt(response)}")


def _read_chat(response: httpx.Response, prompt: ProbePrompt) -> tuple[str, str | None]:
    """(content, finish_reason) of a 2xx chat-completions answer; `NotRetried` otherwise."""
    try:
        choice = response.json()["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise NotRetried(f"the answer for item {prompt.item_id} is not a chat completion: {excerpt(response)}") from exc
    if not isinstance(content, str):
        raise NotRetried(f"the answer for item {prompt.item_id} has no text content")
    finish = choice.get("finish_reason")
    return content, finish if isinstance(finish, str) else None


def _transport_error(exc: httpx.TransportError) -> Retryable:
    if isinstance(exc, httpx.TimeoutException):
        return Retryable(f"no answer within the timeout ({type(exc).__name__})")
    return Retryable(f"connection failed ({type(exc).__name__}: {exc})")


def _failure(exc: Exception, attempts: int) -> str:
    if isinstance(exc, Retryable):
        return f"{exc}; gave up after {attempts} attempts"
    return str(exc)


WAIT = wait_hint_or_backoff(max_wait=MAX_RETRY_AFTER_SECONDS, multiplier=0.5, max_backoff=20.0, jitter=0.5)

JobT = TypeVar("JobT")
ValueT = TypeVar("ValueT")


@dataclass(frozen=True)
class Answered(Generic[ValueT]):
    """One job's outcome: the value read from its answer, or `error` (why none came back after
    `attempts` attempts)."""

    value: ValueT | None
    error: str | None
    attempts: int


def post_each(
    client: httpx.Client,
    jobs: Sequence[JobT],
    endpoint: ProbeEndpoint,
    *,
    url: str,
    body: Callable[[JobT], dict[str, Any]],
    read: Callable[[httpx.Response, JobT], ValueT],
    clock: EpochClock,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> list[Answered[ValueT]]:
    """POST `body(job)` to `url` for every job from a pool of `endpoint.concurrency` threads and
    `read` each 2xx answer; outcomes in job order. Retries and limits as the module says; a job
    whose `read` raises `NotRetried`, or that runs out of attempts, comes back with `error`. Any
    other exception `read` raises (an answer that shows the endpoint cannot do what is asked) stops
    the jobs not yet sent and is raised here."""
    headers = _headers(endpoint)
    done = 0
    lock = threading.Lock()
    abandoned = threading.Event()

    def one(job: JobT) -> Answered[ValueT]:
        attempts = 0

        def attempt() -> ValueT:
            nonlocal attempts
            attempts += 1
            try:
                response = client.post(url, json=body(job), headers=headers, timeout=endpoint.timeout_seconds)
            except httpx.TransportError as exc:
                raise _transport_error(exc) from exc
            _check_status(response, clock)
            return read(response, job)

        if abandoned.is_set():
            return Answered(None, "not sent: the endpoint's answer to another item showed it cannot do this", 0)
        retrying = Retrying(stop=stop_after_attempt(endpoint.max_attempts), wait=WAIT, retry=retry_if_exception_type(Retryable), sleep=sleep, reraise=True)
        try:
            return Answered(retrying(attempt), None, attempts)
        except (Retryable, NotRetried) as exc:
            return Answered(None, _failure(exc, attempts), attempts)
        except Exception:
            abandoned.set()
            raise

    def tracked(job: JobT) -> Answered[ValueT]:
        nonlocal done
        result = one(job)
        if progress is not None:
            with lock:
                done += 1
                progress(done, len(jobs))
        return result

    with ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="probe") as pool:
        return list(pool.map(tracked, jobs))


def complete_sync(
    client: httpx.Client,
    prompts: Sequence[ProbePrompt],
    endpoint: ProbeEndpoint,
    *,
    clock: EpochClock,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> list[ProbeCompletion]:
    """Send every prompt to `{endpoint.base_url}/chat/completions` (`post_each`); completions in
    prompt order. `clock` (seconds since the epoch, e.g. `time.time`) is what an endpoint's
    rate-limit reset time is read against."""
    url = f"{endpoint.base_url}/chat/completions"
    answers = post_each(client, prompts, endpoint, url=url, body=lambda prompt: request_body(prompt, endpoint), read=_read_chat, clock=clock, sleep=sleep, progress=progress)
    return [
        ProbeCompletion(item_id=prompt.item_id, completion=answer.value[0], finish_reason=answer.value[1], attempts=answer.attempts)
        if answer.value is not None
        else ProbeCompletion(item_id=prompt.item_id, error=answer.error, attempts=answer.attempts)
        for prompt, answer in zip(prompts, answers, strict=True)
    ]
