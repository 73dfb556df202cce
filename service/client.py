"""A Python client for eval pipelines, over goldenset's REST API.

    with Client("http://127.0.0.1:8000", token=os.environ["GOLDENSET_TOKEN"]) as client:
        run = client.start_run("ops", model="gpt-x", endpoint="gpt-x-zdr")
        for item in client.iter_run_items(run.id):
            ...
        client.post_results(run.id, [ResultIn(item_id=..., score=1.0)])
        print(client.run(run.id).score)

Every answer is parsed into the API's pydantic models. Requests are retried on connection errors,
timeouts, 429 and 5xx, waiting as long as the server asks (`Retry-After` or a rate-limit reset, read
by `ingest.http`, at most `max_backoff`), else with exponential backoff and jitter. Retrying is safe
for every call made: reads are idempotent, a run is started with an `Idempotency-Key` (a retry
returns the run already started, charging no budget twice), and posting the same scores again is
accepted without change. Any other error raises `GoldensetError` with the problem document.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from ingest.http import Retryable, retry_after_seconds, wait_hint_or_backoff
from schemas.evals import EvalCreate, EvalRead
from schemas.model_registry import EndpointCreate, EndpointRead, ModelCreate, ModelRead
from schemas.release import RefreshResult, ReleaseManifest, ReleaseSummary
from schemas.runs import EvalExposure, ItemExposures, ResultIn, ResultRead, ResultsAccepted, ResultsPost, RunCreate, RunItemPage, RunItemRead, RunRead, RunStarted, RunSummary

T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RESULTS_BATCH = 1000


class GoldensetError(RuntimeError):
    """The API refused a request: `status`, and the problem document's `title`, `detail` and
    other members (`problem`), e.g. `condition` for a refused sealed run."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.title = str(problem.get("title", "error"))
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{status} {self.title}: {self.detail}")


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, Retryable | httpx.TransportError)


class Client:
    """A goldenset API client. `transport` replaces the network (tests); `retries` is the number of
    attempts per request (1: no retry); `backoff` the first wait in seconds (doubling, jittered,
    capped at `max_backoff`)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if retries < 1:
            raise ValueError("retries is the number of attempts: at least 1")
        if not token:
            raise ValueError("a token is needed: create one with `goldenset token create --scopes read`")
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=timeout, transport=transport)
        self._retries = retries
        self._wait = wait_hint_or_backoff(max_wait=max_backoff, multiplier=backoff, max_backoff=max_backoff, jitter=backoff)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
        """Send a request with retries; return a 2xx response or raise GoldensetError (or the last
        transport error once the attempts are used up)."""
        retrying = Retrying(stop=stop_after_attempt(self._retries), wait=self._wait, retry=retry_if_exception(_is_retryable), reraise=True)
        # Once the attempts are used up, the last refusal (still in `response`) is reported like any other answer.
        with contextlib.suppress(Retryable):
            for attempt in retrying:
                with attempt:
                    response = self._http.request(method, path, json=json, params=params, headers=headers)
                    if response.status_code in RETRY_STATUSES:
                        raise Retryable(f"HTTP {response.status_code}", wait_hint=retry_after_seconds(response, time.time()))
        if response.is_success:
            return response
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text[:500]}
        raise GoldensetError(response.status_code, problem if isinstance(problem, dict) else {"detail": str(problem)})

    def _get(self, path: str, shape: type[T], params: dict[str, Any] | None = None) -> T:
        query = {key: value for key, value in (params or {}).items() if value is not None}
        response = self.request("GET", path, params=query or None)
        parsed: T = TypeAdapter(shape).validate_json(response.content)
        return parsed

    def _post(self, path: str, body: BaseModel, shape: type[T], headers: dict[str, str] | None = None) -> T:
        response = self.request("POST", path, json=body.model_dump(mode="json"), headers=headers)
        parsed: T = TypeAdapter(shape).validate_json(response.content)
        return parsed

    # Evals and releases

    def evals(self) -> list[EvalRead]:
        return self._get("/v1/evals", list[EvalRead])

    def create_eval(self, data: EvalCreate) -> EvalRead:
        """Define an eval (admin scope)."""
        return self._post("/v1/evals", data, EvalRead)

    def refresh(self, eval_name: str) -> RefreshResult:
        """Write the release of the current period, or return the one it has (admin scope)."""
        response = self.request("POST", f"/v1/evals/{quote(eval_name)}/refresh")
        return RefreshResult.model_validate_json(response.content)

    def releases(self, eval_name: str) -> list[ReleaseSummary]:
        return self._get(f"/v1/evals/{quote(eval_name)}/releases", list[ReleaseSummary])

    def manifest(self, eval_name: str, release: int | str = "latest") -> ReleaseManifest:
        return self._get(f"/v1/evals/{quote(eval_name)}/releases/{release}", ReleaseManifest)

    # Registry

    def models(self) -> list[ModelRead]:
        return self._get("/v1/models", list[ModelRead])

    def endpoints(self, model: str | None = None) -> list[EndpointRead]:
        return self._get("/v1/endpoints", list[EndpointRead], {"model": model})

    def register_model(self, data: ModelCreate) -> ModelRead:
        """Register a model (admin scope)."""
        return self._post("/v1/models", data, ModelRead)

    def register_endpoint(self, data: EndpointCreate) -> EndpointRead:
        """Register an endpoint with its terms (admin scope)."""
        return self._post("/v1/endpoints", data, EndpointRead)

    # Runs

    def start_run(self, eval_name: str, *, model: str, endpoint: str, release: int | str = "latest", split: str = "dev", occurred_after: Any = None) -> RunStarted:
        """Start a run and return it with every item to evaluate. Retried safely: the request
        carries a fresh Idempotency-Key."""
        body = RunCreate(model=model, endpoint=endpoint, release=release, split=split, occurred_after=occurred_after)
        return self._post(f"/v1/evals/{quote(eval_name)}/runs", body, RunStarted, headers={"Idempotency-Key": uuid.uuid4().hex})

    def runs(self, eval_name: str) -> list[RunRead]:
        return self._get(f"/v1/evals/{quote(eval_name)}/runs", list[RunRead])

    def iter_run_items(self, run_id: int, *, page_size: int = 200) -> Iterator[RunItemRead]:
        """The run's items in the order served, fetched a page at a time."""
        cursor: str | None = None
        while True:
            page = self._get(f"/v1/runs/{run_id}/items", RunItemPage, {"limit": page_size, "cursor": cursor})
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def post_results(self, run_id: int, results: Iterable[ResultIn], *, batch: int = RESULTS_BATCH) -> ResultsAccepted:
        """Post scores in batches of `batch`; returns the last batch's answer (its `scored` and
        `remaining` count the whole run)."""
        pending: list[ResultIn] = list(results)
        if not pending:
            raise ValueError("no results to post")
        answer: ResultsAccepted | None = None
        for start in range(0, len(pending), batch):
            # Not validated here: the server judges the batch (a problem document, as for any call).
            body = ResultsPost.model_construct(results=pending[start : start + batch])
            answer = self._post(f"/v1/runs/{run_id}/results", body, ResultsAccepted)
        assert answer is not None
        return answer

    def run(self, run_id: int) -> RunSummary:
        """The run with its mean score and confidence interval."""
        return self._get(f"/v1/runs/{run_id}", RunSummary)

    def results(self, run_id: int) -> list[ResultRead]:
        return self._get(f"/v1/runs/{run_id}/results", list[ResultRead])

    # Exposure reports

    def item_exposures(self, item_id: int) -> ItemExposures:
        return self._get(f"/v1/items/{item_id}/exposures", ItemExposures)

    def eval_exposure(self, eval_name: str) -> EvalExposure:
        return self._get(f"/v1/evals/{quote(eval_name)}/exposure", EvalExposure)
