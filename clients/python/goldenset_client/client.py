"""`Client`: goldenset's REST API over a blocking `httpx.Client`, one typed method per operation.

Every answer is parsed into the model named after its OpenAPI schema (`goldenset_client.models`);
every refusal raises the `GoldensetError` subclass of its status. Requests are retried as
`RetryPolicy` says (429 and 503 always, waiting as the server asks; 500, 502, 504, timeouts and
lost connections when the request is idempotent), then with exponential backoff and jitter.
`AsyncClient` has the same methods, awaited.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from goldenset_client import routes
from goldenset_client._config import RESULTS_BATCH, Settings, env_arguments, refusal
from goldenset_client.errors import GoldensetUnavailable
from goldenset_client.models import (
    AuditEventRead,
    AuditPage,
    CorpusResultsAccepted,
    CorpusResultsPost,
    DedupCheck,
    DedupCheckResult,
    DedupStats,
    EndpointCreate,
    EndpointRead,
    EndpointUpdate,
    EvalCreate,
    EvalExposure,
    EvalRead,
    EvalUpdate,
    ExportRow,
    IngestSummary,
    ItemDetail,
    ItemEdit,
    ItemExposures,
    ItemPage,
    ItemRead,
    ItemRevisions,
    LowMarginDuplicate,
    ModelCreate,
    ModelRead,
    ModelUpdate,
    ProbeCreate,
    ProbeRead,
    PullStarted,
    RefreshResult,
    ReleaseItems,
    ReleaseManifest,
    ReleaseSummary,
    ResultIn,
    ResultRead,
    ResultsAccepted,
    ReviewDecision,
    ReviewOutcome,
    ReviewQueuePage,
    ReviewUndone,
    RunItemPage,
    RunItemRead,
    RunRead,
    RunStarted,
    RunSummary,
    SealedReviewWindow,
    SimilarRead,
    SourceCreate,
    SourceCreated,
    SourceRead,
    SourceUpdate,
    TemporalSplitReport,
)
from goldenset_client.routes import Call

T = TypeVar("T")
C = TypeVar("C", bound="Client")


class Client:
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
        """A client for GOLDENSET_URL (default http://127.0.0.1:8000) with GOLDENSET_TOKEN; an
        argument given here wins over its variable. `options` as for the constructor."""
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

    # Sources

    def list_sources(self) -> list[SourceRead]:
        """Every source with its item count and pull state (read scope)."""
        return self._send(routes.LIST_SOURCES.call())

    def get_source(self, name: str) -> SourceRead:
        """One source (read scope)."""
        return self._send(routes.GET_SOURCE.call({"name": name}))

    def create_source(self, data: SourceCreate) -> SourceCreated:
        """Create a source (admin scope). The answer holds its webhook secret, shown only this once."""
        return self._send(routes.CREATE_SOURCE.call(json=data))

    def update_source(self, name: str, data: SourceUpdate) -> SourceRead:
        """Change a source's mapping, connector, interval, `enabled` or cursor (admin scope)."""
        return self._send(routes.UPDATE_SOURCE.call({"name": name}, json=data))

    def delete_source(self, name: str) -> None:
        """Delete a source that holds no items (admin scope; `Conflict` otherwise: disable it)."""
        self._send(routes.DELETE_SOURCE.call({"name": name}))

    def start_pull(self, name: str) -> PullStarted:
        """Start pulling a connector source in the background (ingest scope); follow it with
        `get_source`. `Conflict` while a pull of it runs, or for a source that is not pulled."""
        return self._send(routes.START_PULL.call({"name": name}))

    def pull(self, name: str) -> IngestSummary:
        """Pull a connector source now and return its summary (ingest scope). A failed pull raises
        `ServerError` (502) whose problem holds the source's state."""
        return self._send(routes.PULL.call({"name": name}, params={"wait": True}))

    def push_items(self, source: str, records: Iterable[Mapping[str, Any]]) -> IngestSummary:
        """Push records into a source, shaped as its mapping expects (ingest scope); returns the
        summary. When some records are refused, `InvalidRequest` names each (`errors`: position,
        reason, detail) and `problem["summary"]` counts what was stored: the good ones are kept."""
        return self._send(routes.PUSH_ITEMS.call({"name": source}, json=[dict(record) for record in records]))

    # Items

    def list_items(
        self,
        *,
        source: str | None = None,
        status: str | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ItemPage:
        """One page of items, newest incident first (read scope); `next_cursor` asks for the next."""
        params = {"source": source, "status": status, "occurred_after": occurred_after, "occurred_before": occurred_before, "limit": limit, "cursor": cursor}
        return self._send(routes.LIST_ITEMS.call(params=params))

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

    def get_item(self, item_id: int) -> ItemDetail:
        """One item with curation's newest decision (`dedup`) and people's rulings (read scope)."""
        return self._send(routes.GET_ITEM.call({"item_id": item_id}))

    def edit_item(self, item_id: int, data: ItemEdit) -> ItemDetail:
        """A curator's edit, stored as a new revision (curate scope)."""
        return self._send(routes.EDIT_ITEM.call({"item_id": item_id}, json=data))

    def item_revisions(self, item_id: int) -> ItemRevisions:
        """Every revision of an item, oldest first (read scope)."""
        return self._send(routes.ITEM_REVISIONS.call({"item_id": item_id}))

    # Review

    def approve(self, item_id: int, reason: str | None = None) -> ItemRead:
        """Approve an item for evals with manual review (curate scope); `Conflict` if already decided."""
        return self._send(routes.APPROVE.call({"item_id": item_id}, json={"reason": reason} if reason is not None else None))

    def reject(self, item_id: int, reason: str) -> ItemRead:
        """Reject an item, saying why (curate scope); `Conflict` if already decided."""
        return self._send(routes.REJECT.call({"item_id": item_id}, json={"reason": reason}))

    def review(self, decisions: Iterable[ReviewDecision]) -> ReviewOutcome:
        """Approve and reject in bulk (curate scope): the good decisions are kept, the others
        listed in `errors` by position."""
        return self._send(routes.REVIEW.call(json={"decisions": [decision.model_dump(mode="json", exclude_unset=True) for decision in decisions]}))

    def undo_review(self, item_id: int) -> ReviewUndone:
        """Undo the newest approval or rejection of the item taken by this token's owner (curate scope)."""
        return self._send(routes.UNDO_REVIEW.call({"item_id": item_id}))

    # Dedup

    def similar(self, item_id: int, k: int = 10) -> list[SimilarRead]:
        """The `k` items most like this one among those that occurred before it, best first
        (read scope); `Conflict` while it is not curated."""
        return self._send(routes.SIMILAR.call({"item_id": item_id}, params={"k": k}))

    def check_duplicate(self, data: DedupCheck, k: int = 10) -> DedupCheckResult:
        """The verdict curation would give this text now, and its `k` nearest items; stores nothing (read scope)."""
        return self._send(routes.DEDUP_CHECK.call(params={"k": k}, json=data))

    def mark_not_duplicate(self, item_id: int, note: str) -> ItemRead:
        """Rule that a duplicate is not one (curate scope)."""
        return self._send(routes.NOT_DUPLICATE.call({"item_id": item_id}, json={"note": note}))

    def mark_duplicate_of(self, item_id: int, other_id: int, note: str) -> ItemRead:
        """Rule that the item duplicates `other_id` (curate scope)."""
        return self._send(routes.DUPLICATE_OF.call({"item_id": item_id}, json={"item_id": other_id, "note": note}))

    def dedup_stats(self) -> DedupStats:
        """Dedup's figures (read scope)."""
        return self._send(routes.DEDUP_STATS.call())

    def low_margin(self, *, source: str | None = None, margin: float | None = None, limit: int | None = None) -> list[LowMarginDuplicate]:
        """Duplicates whose score cleared its threshold by less than `margin`, closest call first (curate scope)."""
        return self._send(routes.LOW_MARGIN.call(params={"source": source, "margin": margin, "limit": limit}))

    # Evals

    def list_evals(self) -> list[EvalRead]:
        """Every eval (read scope)."""
        return self._send(routes.LIST_EVALS.call())

    def get_eval(self, name: str) -> EvalRead:
        """One eval (read scope)."""
        return self._send(routes.GET_EVAL.call({"name": name}))

    def create_eval(self, data: EvalCreate) -> EvalRead:
        """Define an eval (admin scope); `Conflict` if the name is taken."""
        return self._send(routes.CREATE_EVAL.call(json=data))

    def update_eval(self, name: str, data: EvalUpdate) -> EvalRead:
        """Change an eval's settings (admin scope)."""
        return self._send(routes.UPDATE_EVAL.call({"name": name}, json=data))

    def delete_eval(self, name: str) -> None:
        """Delete an eval (admin scope)."""
        self._send(routes.DELETE_EVAL.call({"name": name}))

    def refresh(self, name: str, *, at: datetime | None = None, allow_future: bool | None = None) -> RefreshResult:
        """Write the release of the period holding `at` (default now), or return the one it has
        (`created` false) (admin scope)."""
        return self._send(routes.REFRESH.call({"name": name}, params={"at": at, "allow_future": allow_future}))

    def review_queue(
        self,
        name: str,
        *,
        source: str | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        text: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> ReviewQueuePage:
        """One page of the items waiting for review, oldest incident first (curate scope)."""
        params = {"source": source, "occurred_after": occurred_after, "occurred_before": occurred_before, "text": text, "limit": limit, "offset": offset}
        return self._send(routes.REVIEW_QUEUE.call({"name": name}, params=params))

    def open_sealed_review(self, name: str) -> SealedReviewWindow:
        """Open (or keep) this token's sealed review window on the eval (curate and sealed scopes);
        opening takes one unit of the sealed-read budget, `Forbidden` once it is spent."""
        return self._send(routes.SEALED_REVIEW.call({"name": name}))

    # Releases

    def list_releases(self, eval_name: str) -> list[ReleaseSummary]:
        """The eval's releases, newest first (read scope)."""
        return self._send(routes.LIST_RELEASES.call({"name": eval_name}))

    def manifest(self, eval_name: str, release: int | str = "latest") -> ReleaseManifest:
        """A release's manifest: every item as id, split and digest (read scope)."""
        return self._send(routes.MANIFEST.call({"name": eval_name, "ref": release}))

    def release_items(self, eval_name: str, release: int | str = "latest", split: str = "dev", occurred_after: datetime | None = None) -> ReleaseItems:
        """A split's items as released (read scope; the sealed split needs the sealed scope and
        takes one unit of its budget)."""
        return self._send(routes.RELEASE_ITEMS.call({"name": eval_name, "ref": release}, params={"split": split, "occurred_after": occurred_after}))

    def iter_export(self, eval_name: str, release: int | str = "latest", split: str = "dev", occurred_after: datetime | None = None) -> Iterator[ExportRow]:
        """A split's JSONL export, streamed: one `ExportRow` per item, read a line at a time. A
        failure before the first row is retried like any read; one after it raises
        `GoldensetUnavailable` (rows already yielded stay valid: start again for the rest)."""
        call = routes.EXPORT.call({"name": eval_name, "ref": release}, params={"split": split, "occurred_after": occurred_after})
        response = self._open(call, stream=True)
        try:
            for line in response.iter_lines():
                if line.strip():
                    yield ExportRow.model_validate_json(line)
        except httpx.TransportError as exc:
            raise GoldensetUnavailable(exc, 1) from exc
        finally:
            response.close()

    def withdraw_release(self, eval_name: str, number: int, reason: str) -> ReleaseSummary:
        """Withdraw a release: it stops counting as `latest` (admin scope)."""
        return self._send(routes.WITHDRAW.call({"name": eval_name, "number": number}, json={"reason": reason}))

    # Runs

    def start_run(
        self,
        eval_name: str,
        *,
        model: str,
        endpoint: str,
        release: int | str = "latest",
        split: str = "dev",
        occurred_after: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> RunStarted:
        """Start a run and return it with every item to evaluate (read scope; sealed needs the
        sealed scope and an endpoint the gate allows, else `Forbidden` with its `condition`). The
        request carries an Idempotency-Key (`idempotency_key`, or a fresh one), so a retry returns
        the run already started and charges no budget twice."""
        body = {"model": model, "endpoint": endpoint, "release": release, "split": split, "occurred_after": occurred_after.isoformat() if occurred_after else None}
        key = idempotency_key or uuid.uuid4().hex
        return self._send(routes.START_RUN.call({"name": eval_name}, json=body, headers={"Idempotency-Key": key}))

    def list_runs(self, eval_name: str, limit: int | None = None) -> list[RunRead]:
        """The eval's runs, newest first (read scope)."""
        return self._send(routes.LIST_RUNS.call({"name": eval_name}, params={"limit": limit}))

    def get_run(self, run_id: int) -> RunSummary:
        """A run with its mean score and confidence interval (read scope)."""
        return self._send(routes.GET_RUN.call({"run_id": run_id}))

    def run_items(self, run_id: int, *, limit: int | None = None, cursor: str | None = None) -> RunItemPage:
        """One page of a run's items in the order served (read scope)."""
        return self._send(routes.RUN_ITEMS.call({"run_id": run_id}, params={"limit": limit, "cursor": cursor}))

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
        pending = [result.model_dump(mode="json", exclude_unset=True) for result in results]
        if not pending:
            raise ValueError("no results to post")
        answer: ResultsAccepted | None = None
        for start in range(0, len(pending), batch):
            answer = self._send(routes.POST_RESULTS.call({"run_id": run_id}, json={"results": pending[start : start + batch]}))
        assert answer is not None
        return answer

    def list_results(self, run_id: int) -> list[ResultRead]:
        """A run's scores with each item's incident date (read scope)."""
        return self._send(routes.LIST_RESULTS.call({"run_id": run_id}))

    def item_exposures(self, item_id: int) -> ItemExposures:
        """Every run that served the item, and whether it is marked exposed (read scope)."""
        return self._send(routes.ITEM_EXPOSURES.call({"item_id": item_id}))

    def eval_exposure(self, eval_name: str) -> EvalExposure:
        """Per release: which endpoints saw what share of the eval, under which terms (read scope)."""
        return self._send(routes.EVAL_EXPOSURE.call({"name": eval_name}))

    # Registry

    def list_models(self) -> list[ModelRead]:
        """Every registered model (read scope)."""
        return self._send(routes.LIST_MODELS.call())

    def get_model(self, name: str) -> ModelRead:
        """One model (read scope)."""
        return self._send(routes.GET_MODEL.call({"name": name}))

    def create_model(self, data: ModelCreate) -> ModelRead:
        """Register a model (admin scope)."""
        return self._send(routes.CREATE_MODEL.call(json=data))

    def update_model(self, name: str, data: ModelUpdate) -> ModelRead:
        """Change a model (admin scope)."""
        return self._send(routes.UPDATE_MODEL.call({"name": name}, json=data))

    def list_endpoints(self, model: str | None = None) -> list[EndpointRead]:
        """Every endpoint, or those of `model` (read scope). `sealed_allowed` says whether a sealed
        run may go there now; `augmented` whether the model there has retrieval, search or tools."""
        return self._send(routes.LIST_ENDPOINTS.call(params={"model": model}))

    def get_endpoint(self, name: str) -> EndpointRead:
        """One endpoint (read scope)."""
        return self._send(routes.GET_ENDPOINT.call({"name": name}))

    def create_endpoint(self, data: EndpointCreate) -> EndpointRead:
        """Register an endpoint with its data-retention terms and augmentations (admin scope)."""
        return self._send(routes.CREATE_ENDPOINT.call(json=data))

    def update_endpoint(self, name: str, data: EndpointUpdate) -> EndpointRead:
        """Change an endpoint; changed terms are recorded as checked now by the caller (admin scope)."""
        return self._send(routes.UPDATE_ENDPOINT.call({"name": name}, json=data))

    def delete_endpoint(self, name: str) -> None:
        """Delete an endpoint (admin scope)."""
        self._send(routes.DELETE_ENDPOINT.call({"name": name}))

    # Evidence

    def temporal_split(self, model: str, *, eval_name: str | None = None, corpus: str | None = None) -> TemporalSplitReport:
        """The model's score before its training cutoff against after it, over an eval's runs or a
        corpus's uploaded results (read scope)."""
        return self._send(routes.TEMPORAL_SPLIT.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": "json"}))

    def temporal_split_chart(self, model: str, *, eval_name: str | None = None, corpus: str | None = None, image_format: str = "png") -> bytes:
        """The temporal split's chart as `png` or `svg` bytes (read scope)."""
        return self._send(routes.TEMPORAL_SPLIT_CHART.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": image_format}))

    def post_corpus_results(self, corpus: str, data: CorpusResultsPost) -> CorpusResultsAccepted:
        """Store a model's per-item results on a registered public corpus (read scope)."""
        return self._send(routes.POST_CORPUS_RESULTS.call({"name": corpus}, json=data))

    def start_probe(self, data: ProbeCreate) -> ProbeRead:
        """Start a completion probe in the background (admin scope); follow it with `get_probe`.
        `Forbidden` with `condition` `augmented_endpoint` for an endpoint that can look items up."""
        return self._send(routes.START_PROBE.call(json=data))

    def list_probes(self, limit: int | None = None) -> list[ProbeRead]:
        """Probes, newest first (read scope)."""
        return self._send(routes.LIST_PROBES.call(params={"limit": limit}))

    def get_probe(self, probe_id: int) -> ProbeRead:
        """A probe with its progress, and its report once done (read scope)."""
        return self._send(routes.GET_PROBE.call({"probe_id": probe_id}))

    def probe_chart(self, probe_id: int, image_format: str = "png") -> bytes:
        """A finished probe's chart as `png` or `svg` bytes (read scope)."""
        return self._send(routes.PROBE_CHART.call({"probe_id": probe_id}, params={"format": image_format}))

    # Audit

    def audit(
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
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AuditPage:
        """One page of audit events, newest first (admin scope); `action` may be a prefix (`run.*`)."""
        params = {
            "actor": actor, "token": token, "action": action, "object_type": object_type, "object_id": object_id,
            "since": since, "until": until, "sealed": sealed, "limit": limit, "cursor": cursor,
        }  # fmt: skip
        return self._send(routes.AUDIT.call(params=params))

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
