"""Every REST operation the clients call, as a declarative table: method, path template, the
model of the answer (and of the body sent), and whether sending the request twice is harmless.

`Client` and `AsyncClient` reach the API only through these routes, so the table is the client's
whole surface; a test compares it with the service's OpenAPI document (every /v1 operation is
here, with the same answer and body schemas). Not here: `POST /v1/sources/{name}/webhook`, which
a source's vendor calls, authenticated by the source's webhook signature rather than a token
(push records with `push_items` instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter

from goldenset_client.models import (
    ApproveBody,
    AuditPage,
    ClaimBody,
    ClaimOutcome,
    ConnectionTestResult,
    CorpusResultsAccepted,
    CorpusResultsPost,
    DedupCheck,
    DedupCheckResult,
    DedupQuestionPage,
    DedupQuestionRead,
    DedupStats,
    DuplicateOfBody,
    EndpointCreate,
    EndpointRead,
    EndpointUpdate,
    EvalCreate,
    EvalExposure,
    EvalRead,
    EvalScale,
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
    NotDuplicateBody,
    ProbeCreate,
    ProbeRead,
    PublicInflationReport,
    PullStarted,
    QuestionAnswer,
    RefreshResult,
    RejectBody,
    ReleaseItems,
    ReleaseManifest,
    ReleaseSummary,
    ResultRead,
    ResultsAccepted,
    ResultsPost,
    ReviewBatch,
    ReviewOutcome,
    ReviewQueuePage,
    ReviewUndone,
    RoundOutcome,
    RunCreate,
    RunItemPage,
    RunRead,
    RunStarted,
    RunSummary,
    ScoreChangeReport,
    SealedReviewWindow,
    SimilarRead,
    SourceCreate,
    SourceCreated,
    SourceRead,
    SourceUpdate,
    TeamReview,
    TemporalSplitReport,
    VoteBody,
    WithdrawBody,
)

T = TypeVar("T")

Records = list[dict[str, Any]]
"""A pushed batch: records shaped as the source's mapping expects."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request ready to send (and to send again, unchanged, on a retry)."""

    route: Route[T]
    url: str
    params: dict[str, str] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def parse(self, body: bytes) -> T:
        """The answer's body as the route's model (None for an empty answer, raw bytes for a chart)."""
        return self.route.parse(body)


class Route(Generic[T]):
    """An operation: `method` and `path` (the OpenAPI template, `{name}` for each path parameter),
    `answer` the type the answer parses into (a model, a list of models, `bytes` for an image,
    `None` for no body; for JSON Lines, one line's model), `body` the model sent (None: no JSON
    body), and `idempotent`: true when sending the request twice does no harm, so it may be
    retried after a lost answer (see `RetryPolicy`)."""

    def __init__(self, method: str, path: str, answer: type[T], *, body: Any = None, idempotent: bool | None = None, lines: bool = False) -> None:
        self.method = method
        self.path = path
        self.answer = answer
        self.body = body
        self.idempotent = method in {"GET", "PUT", "DELETE"} if idempotent is None else idempotent
        self.lines = lines
        self._adapter: TypeAdapter[T] | None = None

    def __repr__(self) -> str:
        return f"Route({self.method} {self.path})"

    def call(self, path: Mapping[str, object] | None = None, *, params: Mapping[str, object] | None = None, json: Any = None, headers: Mapping[str, str] | None = None) -> Call[T]:
        """The request for these path parameters (each quoted whole), query parameters (None
        values left out, dates in ISO 8601, booleans as `true`/`false`) and JSON body (a model is
        sent with only the fields given to it)."""
        url = self.path.format(**{name: quote(str(value), safe="") for name, value in (path or {}).items()})
        query = {name: _query_value(value) for name, value in (params or {}).items() if value is not None}
        return Call(self, url, query, _json_body(json), dict(headers or {}))

    def parse(self, body: bytes) -> T:
        if self.answer is type(None) or self.answer is None:
            return None  # type: ignore[return-value]
        if self.answer is bytes:
            return body  # type: ignore[return-value]
        if self._adapter is None:
            self._adapter = TypeAdapter(self.answer)
        return self._adapter.validate_json(body)


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def _json_body(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list):
        return [_json_body(entry) for entry in value]
    return value


NONE = type(None)

# Sources
LIST_SOURCES = Route("GET", "/v1/sources", list[SourceRead])
CREATE_SOURCE = Route("POST", "/v1/sources", SourceCreated, body=SourceCreate, idempotent=False)
GET_SOURCE = Route("GET", "/v1/sources/{name}", SourceRead)
UPDATE_SOURCE = Route("PATCH", "/v1/sources/{name}", SourceRead, body=SourceUpdate, idempotent=True)
DELETE_SOURCE = Route("DELETE", "/v1/sources/{name}", NONE)
START_PULL = Route("POST", "/v1/sources/{name}/pull", PullStarted, idempotent=False)
PULL = Route("POST", "/v1/sources/{name}/pull", IngestSummary, idempotent=False)
# A connection test stores nothing (an audit event aside): sending it again is harmless.
TEST_SOURCE = Route("POST", "/v1/sources/{name}/test", ConnectionTestResult, idempotent=True)
# A push is idempotent by the records' external ids and versions: sending it again stores nothing twice.
PUSH_ITEMS = Route("POST", "/v1/sources/{name}/items", IngestSummary, body=Records, idempotent=True)

# Items, review and dedup
LIST_ITEMS = Route("GET", "/v1/items", ItemPage)
GET_ITEM = Route("GET", "/v1/items/{item_id}", ItemDetail)
EDIT_ITEM = Route("PATCH", "/v1/items/{item_id}", ItemDetail, body=ItemEdit, idempotent=False)
ITEM_REVISIONS = Route("GET", "/v1/items/{item_id}/revisions", ItemRevisions)
REVIEW = Route("POST", "/v1/items/review", ReviewOutcome, body=ReviewBatch, idempotent=False)
APPROVE = Route("POST", "/v1/items/{item_id}/approve", ItemRead, body=ApproveBody, idempotent=False)
REJECT = Route("POST", "/v1/items/{item_id}/reject", ItemRead, body=RejectBody, idempotent=False)
UNDO_REVIEW = Route("POST", "/v1/items/{item_id}/undo-review", ReviewUndone, idempotent=False)
SIMILAR = Route("GET", "/v1/items/{item_id}/similar", list[SimilarRead])
DEDUP_CHECK = Route("POST", "/v1/dedup/check", DedupCheckResult, body=DedupCheck, idempotent=True)
NOT_DUPLICATE = Route("POST", "/v1/items/{item_id}/not-duplicate", ItemRead, body=NotDuplicateBody, idempotent=False)
DUPLICATE_OF = Route("POST", "/v1/items/{item_id}/duplicate-of", ItemRead, body=DuplicateOfBody, idempotent=False)
DEDUP_STATS = Route("GET", "/v1/dedup/stats", DedupStats)
LOW_MARGIN = Route("GET", "/v1/dedup/low-margin", list[LowMarginDuplicate])
DEDUP_QUESTIONS = Route("GET", "/v1/dedup/questions", DedupQuestionPage)
ANSWER_QUESTION = Route("POST", "/v1/dedup/questions/{question_id}/answer", DedupQuestionRead, body=QuestionAnswer, idempotent=False)

# Evals
LIST_EVALS = Route("GET", "/v1/evals", list[EvalRead])
CREATE_EVAL = Route("POST", "/v1/evals", EvalRead, body=EvalCreate, idempotent=False)
GET_EVAL = Route("GET", "/v1/evals/{name}", EvalRead)
UPDATE_EVAL = Route("PATCH", "/v1/evals/{name}", EvalRead, body=EvalUpdate, idempotent=True)
DELETE_EVAL = Route("DELETE", "/v1/evals/{name}", NONE)
# A refresh owns its (eval, period): asking again returns the release already written.
REFRESH = Route("POST", "/v1/evals/{name}/refresh", RefreshResult, idempotent=True)
REVIEW_QUEUE = Route("GET", "/v1/evals/{name}/review-queue", ReviewQueuePage)
# While the window is open, asking again answers it unchanged (200) and takes no budget.
SEALED_REVIEW = Route("POST", "/v1/evals/{name}/sealed-review", SealedReviewWindow, idempotent=True)

# Team review
# Claiming again answers the batch already held (renewed), so a resent claim takes nothing more.
CLAIM_REVIEW_BATCH = Route("POST", "/v1/evals/{name}/review/claims", ClaimOutcome, body=ClaimBody, idempotent=True)
GIVE_BACK_CLAIMS = Route("DELETE", "/v1/evals/{name}/review/claims", dict[str, int])
VOTE = Route("POST", "/v1/evals/{name}/review/votes", RoundOutcome, body=VoteBody, idempotent=False)
WITHDRAW_VOTE = Route("DELETE", "/v1/evals/{name}/review/votes/{item_id}", RoundOutcome)
ADJUDICATE = Route("POST", "/v1/evals/{name}/review/adjudications", RoundOutcome, body=VoteBody, idempotent=False)
REVIEW_TEAM = Route("GET", "/v1/evals/{name}/review/team", TeamReview)
EVAL_SCALE = Route("GET", "/v1/evals/{name}/scale", EvalScale)
SCORE_CHANGE = Route("GET", "/v1/reports/score-change", ScoreChangeReport)

# Releases
LIST_RELEASES = Route("GET", "/v1/evals/{name}/releases", list[ReleaseSummary])
MANIFEST = Route("GET", "/v1/evals/{name}/releases/{ref}", ReleaseManifest)
RELEASE_ITEMS = Route("GET", "/v1/evals/{name}/releases/{ref}/items", ReleaseItems)
EXPORT = Route("GET", "/v1/evals/{name}/releases/{ref}/export.jsonl", ExportRow, lines=True)
WITHDRAW = Route("POST", "/v1/evals/{name}/releases/{number}/withdraw", ReleaseSummary, body=WithdrawBody, idempotent=False)

# Runs and exposure
# Sent with an Idempotency-Key: a retry returns the run already started.
START_RUN = Route("POST", "/v1/evals/{name}/runs", RunStarted, body=RunCreate, idempotent=True)
LIST_RUNS = Route("GET", "/v1/evals/{name}/runs", list[RunRead])
EVAL_EXPOSURE = Route("GET", "/v1/evals/{name}/exposure", EvalExposure)
ITEM_EXPOSURES = Route("GET", "/v1/items/{item_id}/exposures", ItemExposures)
GET_RUN = Route("GET", "/v1/runs/{run_id}", RunSummary)
RUN_ITEMS = Route("GET", "/v1/runs/{run_id}/items", RunItemPage)
# The same score posted again is accepted without change.
POST_RESULTS = Route("POST", "/v1/runs/{run_id}/results", ResultsAccepted, body=ResultsPost, idempotent=True)
LIST_RESULTS = Route("GET", "/v1/runs/{run_id}/results", list[ResultRead])

# Registry
LIST_MODELS = Route("GET", "/v1/models", list[ModelRead])
CREATE_MODEL = Route("POST", "/v1/models", ModelRead, body=ModelCreate, idempotent=False)
GET_MODEL = Route("GET", "/v1/models/{name}", ModelRead)
UPDATE_MODEL = Route("PATCH", "/v1/models/{name}", ModelRead, body=ModelUpdate, idempotent=True)
LIST_ENDPOINTS = Route("GET", "/v1/endpoints", list[EndpointRead])
CREATE_ENDPOINT = Route("POST", "/v1/endpoints", EndpointRead, body=EndpointCreate, idempotent=False)
GET_ENDPOINT = Route("GET", "/v1/endpoints/{name}", EndpointRead)
UPDATE_ENDPOINT = Route("PATCH", "/v1/endpoints/{name}", EndpointRead, body=EndpointUpdate, idempotent=True)
DELETE_ENDPOINT = Route("DELETE", "/v1/endpoints/{name}", NONE)

# Evidence
TEMPORAL_SPLIT = Route("GET", "/v1/reports/temporal-split", TemporalSplitReport)
TEMPORAL_SPLIT_CHART = Route("GET", "/v1/reports/temporal-split", bytes)
PUBLIC_INFLATION = Route("GET", "/v1/reports/public-inflation", PublicInflationReport)
PUBLIC_INFLATION_CHART = Route("GET", "/v1/reports/public-inflation", bytes)
# Results for the same items again are unchanged (or replaced with `replace`): no harm in resending.
POST_CORPUS_RESULTS = Route("POST", "/v1/corpora/{name}/results", CorpusResultsAccepted, body=CorpusResultsPost, idempotent=True)
START_PROBE = Route("POST", "/v1/probes", ProbeRead, body=ProbeCreate, idempotent=False)
LIST_PROBES = Route("GET", "/v1/probes", list[ProbeRead])
GET_PROBE = Route("GET", "/v1/probes/{probe_id}", ProbeRead)
PROBE_CHART = Route("GET", "/v1/probes/{probe_id}/chart", bytes)

# Audit
AUDIT = Route("GET", "/v1/audit", AuditPage)

ROUTES: tuple[Route[Any], ...] = tuple(value for value in globals().values() if isinstance(value, Route))
"""Every route above."""
