"""`Client`: goldenset's REST API over a blocking `httpx.Client`, one typed method per operation.

Every answer is parsed into the model named after its OpenAPI schema (`goldenset_client.models`);
every refusal raises the `GoldensetError` subclass of its status. Requests are retried as
`RetryPolicy` says (429 and 503 always, waiting as the server asks; 500, 502, 504, timeouts and
lost connections when the request is idempotent), then with exponential backoff and jitter.
`AsyncClient` has the same methods, awaited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import httpx

from goldenset_client._config import RESULTS_BATCH, Settings, env_arguments, refusal
from goldenset_client.errors import GoldensetUnavailable
from goldenset_client.models import (
    AuditEventRead,
    ExportRow,
    ItemRead,
    ResultIn,
    ResultsAccepted,
    RunItemRead,
)
from goldenset_client.operations import Operations, export_call, give_back_claims_call, results_calls
from goldenset_client.routes import Call

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C", bound="Client")


class Client(Operations):
    """A goldenset API client. `token` is a bearer token (`goldenset token create`); `timeout` the
    seconds each attempt may take; `retries` how many times a failed request is tried again (0:
    never); `backoff` the first wait in seconds (doubling, jittered, at most `max_backoff`, which
    also bounds a wait the server asks for); `transport` replaces the network (tests). Use it as a
    context manager, or `close()` it."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings.check(base_url, token, timeout=timeout, retries=retries, backoff=backoff, max_backoff=max_backoff)
        self._http = httpx.Client(**self.settings.http_options(), transport=transport)

    @classmethod
    def from_env(cls: type[C], base_url: str | None = None, token: str | None = None, **options: Any) -> C:
        """A client for GOLDENSET_URL (default http://127.0.0.1:$PORT, port 8000 without PORT) with
        GOLDENSET_TOKEN; an argument given here wins over its variable. `options` as for the
        constructor."""
        url, secret = env_arguments(base_url, token)
        return cls(url, secret, **options)

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards."""
        self._http.close()

    # Sending

    def _open(self, call: Call[Any], *, stream: bool = False) -> httpx.Response:
        """A 2xx answer to `call`, after retries; raises the refusal's error otherwise. A streamed
        answer is returned unread (the caller closes it)."""
        policy = self.settings.policy
        request = self._http.build_request(call.route.method, call.url, params=call.params, json=call.json, headers=call.headers)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                wait = policy.after_error(exc, attempt, idempotent=call.route.idempotent)
                if wait is None:
                    raise GoldensetUnavailable(exc, attempt) from exc
            else:
                if response.is_success:
                    return response
                wait = policy.after_response(response, attempt, idempotent=call.route.idempotent, now=time.time())
                if wait is None:
                    response.read()
                    response.close()
                    raise refusal(response)
                response.close()
            time.sleep(wait)

    def _send(self, call: Call[T]) -> T:
        return call.parse(self._open(call).content)

    def _bind(self, build: Callable[P, Call[T]]) -> Callable[P, T]:
        """An operation as a function sending the call it builds."""

        def send(*args: P.args, **kwargs: P.kwargs) -> T:
            return self._send(build(*args, **kwargs))

        return send

    # Operations beyond one plain call

    def iter_items(
        self, *, source: str | None = None, status: str | None = None, occurred_after: datetime | None = None, occurred_before: datetime | None = None, page_size: int = 200
    ) -> Iterator[ItemRead]:
        """Every item matching the filters, newest incident first, fetched `page_size` at a time."""
        cursor: str | None = None
        while True:
            page = self.list_items(source=source, status=status, occurred_after=occurred_after, occurred_before=occurred_before, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def iter_export(self, eval_name: str, release: int | str = "latest", split: str = "dev", occurred_after: datetime | None = None) -> Iterator[ExportRow]:
        """A split's JSONL export, streamed: one `ExportRow` per item, read a line at a time. A
        failure before the first row is retried like any read; one after it raises
        `GoldensetUnavailable` (rows already yielded stay valid: start again for the rest)."""
        call = export_call(eval_name, release, split, occurred_after)
        response = self._open(call, stream=True)
        try:
            for line in response.iter_lines():
                if line.strip():
                    yield ExportRow.model_validate_json(line)
        except httpx.TransportError as exc:
            raise GoldensetUnavailable(exc, 1) from exc
        finally:
            response.close()

    def iter_run_items(self, run_id: int, *, page_size: int = 200) -> Iterator[RunItemRead]:
        """Every item of the run in the order served, fetched `page_size` at a time."""
        cursor: str | None = None
        while True:
            page = self.run_items(run_id, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def post_results(self, run_id: int, results: Iterable[ResultIn], *, batch: int = RESULTS_BATCH) -> ResultsAccepted:
        """Post scores in batches of `batch` (only the token that started the run, or an admin);
        returns the last batch's answer, whose `scored` and `remaining` count the whole run. Each
        batch is all or nothing (`InvalidRequest` names items not in the run, `Conflict` an item
        already scored differently); the same scores again are accepted unchanged."""
        answer: ResultsAccepted | None = None
        for call in results_calls(run_id, results, batch):
            answer = self._send(call)
        assert answer is not None
        return answer

    def give_back_claims(self, eval_name: str) -> int:
        """Give back every claim this token's owner holds on the eval (curate scope), so others may
        claim those items; how many were given back."""
        return self._send(give_back_claims_call(eval_name))["released"]

    def iter_audit(
        self,
        *,
        actor: str | None = None,
        token: str | None = None,
        action: str | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        sealed: bool | None = None,
        page_size: int = 200,
    ) -> Iterator[AuditEventRead]:
        """Every audit event matching the filters, newest first, fetched `page_size` at a time."""
        cursor: str | None = None
        while True:
            page = self.audit(
                actor=actor, token=token, action=action, object_type=object_type, object_id=object_id,
                since=since, until=until, sealed=sealed, limit=page_size, cursor=cursor,
            )  # fmt: skip
            yield from page.events
            if page.next_cursor is None:
                return
            cursor = page.next_cursor
