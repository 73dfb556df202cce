"""`Operations`: every plain REST operation, written once for `Client` and `AsyncClient`.

Each is an `operation`: a function from the method's arguments to the `Call` to send, which both
clients inherit as a method (blocking on `Client`, awaited on `AsyncClient`) answering the call's
model. What is more than one plain call, or answers other than the call's model (following
cursors, streaming the export, posting results in batches, the count of claims given back), each
client writes itself, from the request builders here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from goldenset_client import routes
from goldenset_client._operations import operation
from goldenset_client.models import (
    AuditPage,
    ClaimOutcome,
    ConnectionTestResult,
    CorpusResultsAccepted,
    CorpusResultsPost,
    Decision,
    DedupCheck,
    DedupCheckResult,
    DedupQuestionPage,
    DedupQuestionRead,
    DedupStats,
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
    ProbeCreate,
    ProbeRead,
    PublicInflationReport,
    PullStarted,
    QueueView,
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
    RoundOutcome,
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
)
from goldenset_client.routes import Call


def export_call(eval_name: str, release: int | str, split: str, occurred_after: datetime | None) -> Call[ExportRow]:
    """The request for a split's JSONL export (`iter_export`)."""
    return routes.EXPORT.call({"name": eval_name, "ref": release}, params={"split": split, "occurred_after": occurred_after})


def give_back_claims_call(eval_name: str) -> Call[dict[str, int]]:
    """The request giving back every claim this token's owner holds on the eval (`give_back_claims`)."""
    return routes.GIVE_BACK_CLAIMS.call({"name": eval_name})


def results_calls(run_id: int, results: Iterable[ResultIn], batch: int) -> list[Call[ResultsAccepted]]:
    """The requests posting `results` to the run, `batch` at a time (`post_results`); `ValueError`
    for no results."""
    pending = [result.model_dump(mode="json", exclude_unset=True) for result in results]
    if not pending:
        raise ValueError("no results to post")
    return [routes.POST_RESULTS.call({"run_id": run_id}, json={"results": pending[start : start + batch]}) for start in range(0, len(pending), batch)]


class Operations:
    """The operations `Client` and `AsyncClient` share: one method each, same arguments, same
    answer (awaited on `AsyncClient`)."""

    # Sources

    @operation
    def list_sources() -> Call[list[SourceRead]]:
        """Every source with its item count and pull state (read scope)."""
        return routes.LIST_SOURCES.call()

    @operation
    def get_source(name: str) -> Call[SourceRead]:
        """One source (read scope)."""
        return routes.GET_SOURCE.call({"name": name})

    @operation
    def create_source(data: SourceCreate) -> Call[SourceCreated]:
        """Create a source (admin scope). The answer holds its webhook secret, shown only this once."""
        return routes.CREATE_SOURCE.call(json=data)

    @operation
    def update_source(name: str, data: SourceUpdate) -> Call[SourceRead]:
        """Change a source's mapping, connector, interval, `enabled` or cursor (admin scope)."""
        return routes.UPDATE_SOURCE.call({"name": name}, json=data)

    @operation
    def delete_source(name: str) -> Call[None]:
        """Delete a source that holds no items (admin scope; `Conflict` otherwise: disable it)."""
        return routes.DELETE_SOURCE.call({"name": name})

    @operation
    def start_pull(name: str) -> Call[PullStarted]:
        """Start pulling a connector source in the background (ingest scope); follow it with
        `get_source`. `Conflict` while a pull of it runs, or for a source that is not pulled."""
        return routes.START_PULL.call({"name": name})

    @operation
    def pull(name: str) -> Call[IngestSummary]:
        """Pull a connector source now and return its summary (ingest scope). A failed pull raises
        `ServerError` (502) whose problem holds the source's state."""
        return routes.PULL.call({"name": name}, params={"wait": True})

    @operation
    def test_source(name: str) -> Call[ConnectionTestResult]:
        """Test a connector source's connection (admin scope): one page read from its vendor with
        the stored settings, nothing stored. The answer says `ok`, or the outcome and what to
        change; `Conflict` for a source without a connector."""
        return routes.TEST_SOURCE.call({"name": name})

    @operation
    def push_items(source: str, records: Iterable[Mapping[str, Any]]) -> Call[IngestSummary]:
        """Push records into a source, shaped as its mapping expects (ingest scope); returns the
        summary. When some records are refused, `InvalidRequest` names each (`errors`: position,
        reason, detail) and `problem["summary"]` counts what was stored: the good ones are kept."""
        return routes.PUSH_ITEMS.call({"name": source}, json=[dict(record) for record in records])

    # Items

    @operation
    def list_items(
        *,
        source: str | None = None,
        status: str | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[ItemPage]:
        """One page of items, newest incident first (read scope); `next_cursor` asks for the next."""
        params = {"source": source, "status": status, "occurred_after": occurred_after, "occurred_before": occurred_before, "limit": limit, "cursor": cursor}
        return routes.LIST_ITEMS.call(params=params)

    @operation
    def get_item(item_id: int) -> Call[ItemDetail]:
        """One item with curation's newest decision (`dedup`) and people's rulings (read scope)."""
        return routes.GET_ITEM.call({"item_id": item_id})

    @operation
    def edit_item(item_id: int, data: ItemEdit) -> Call[ItemDetail]:
        """A curator's edit, stored as a new revision (curate scope)."""
        return routes.EDIT_ITEM.call({"item_id": item_id}, json=data)

    @operation
    def item_revisions(item_id: int) -> Call[ItemRevisions]:
        """Every revision of an item, oldest first (read scope)."""
        return routes.ITEM_REVISIONS.call({"item_id": item_id})

    # Review

    @operation
    def approve(item_id: int, reason: str | None = None) -> Call[ItemRead]:
        """Approve an item for evals with manual review (curate scope); `Conflict` if already decided."""
        return routes.APPROVE.call({"item_id": item_id}, json={"reason": reason} if reason is not None else None)

    @operation
    def reject(item_id: int, reason: str) -> Call[ItemRead]:
        """Reject an item, saying why (curate scope); `Conflict` if already decided."""
        return routes.REJECT.call({"item_id": item_id}, json={"reason": reason})

    @operation
    def review(decisions: Iterable[ReviewDecision]) -> Call[ReviewOutcome]:
        """Approve and reject in bulk (curate scope): the good decisions are kept, the others
        listed in `errors` by position."""
        return routes.REVIEW.call(json={"decisions": [decision.model_dump(mode="json", exclude_unset=True) for decision in decisions]})

    @operation
    def undo_review(item_id: int) -> Call[ReviewUndone]:
        """Undo the newest approval or rejection of the item taken by this token's owner (curate scope)."""
        return routes.UNDO_REVIEW.call({"item_id": item_id})

    # Dedup

    @operation
    def similar(item_id: int, k: int = 10) -> Call[list[SimilarRead]]:
        """The `k` items most like this one among those that occurred before it, best first
        (read scope); `Conflict` while it is not curated."""
        return routes.SIMILAR.call({"item_id": item_id}, params={"k": k})

    @operation
    def check_duplicate(data: DedupCheck, k: int = 10) -> Call[DedupCheckResult]:
        """The verdict curation would give this text now, and its `k` nearest items; stores nothing (read scope)."""
        return routes.DEDUP_CHECK.call(params={"k": k}, json=data)

    @operation
    def mark_not_duplicate(item_id: int, note: str) -> Call[ItemRead]:
        """Rule that a duplicate is not one (curate scope)."""
        return routes.NOT_DUPLICATE.call({"item_id": item_id}, json={"note": note})

    @operation
    def mark_duplicate_of(item_id: int, other_id: int, note: str) -> Call[ItemRead]:
        """Rule that the item duplicates `other_id` (curate scope)."""
        return routes.DUPLICATE_OF.call({"item_id": item_id}, json={"item_id": other_id, "note": note})

    @operation
    def dedup_stats() -> Call[DedupStats]:
        """Dedup's figures (read scope)."""
        return routes.DEDUP_STATS.call()

    @operation
    def low_margin(*, source: str | None = None, margin: float | None = None, limit: int | None = None) -> Call[list[LowMarginDuplicate]]:
        """Duplicates whose score cleared its threshold by less than `margin`, closest call first (curate scope)."""
        return routes.LOW_MARGIN.call(params={"source": source, "margin": margin, "limit": limit})

    @operation
    def dedup_questions(
        *, source: str | None = None, state: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Call[DedupQuestionPage]:
        """The pairs dedup asks a curator about, oldest first, both items side by side (read scope);
        `state="answered"` exports the curators' rulings."""
        return routes.DEDUP_QUESTIONS.call(params={"source": source, "state": state, "limit": limit, "cursor": cursor})

    @operation
    def answer_question(question_id: int, ruling: str, note: str | None = None) -> Call[DedupQuestionRead]:
        """Answer a dedup question `same` or `distinct` (curate scope); `Conflict` if already answered."""
        body: dict[str, Any] = {"ruling": ruling} if note is None else {"ruling": ruling, "note": note}
        return routes.ANSWER_QUESTION.call({"question_id": question_id}, json=body)

    # Evals

    @operation
    def list_evals() -> Call[list[EvalRead]]:
        """Every eval (read scope)."""
        return routes.LIST_EVALS.call()

    @operation
    def get_eval(name: str) -> Call[EvalRead]:
        """One eval (read scope)."""
        return routes.GET_EVAL.call({"name": name})

    @operation
    def create_eval(data: EvalCreate) -> Call[EvalRead]:
        """Define an eval (admin scope); `Conflict` if the name is taken."""
        return routes.CREATE_EVAL.call(json=data)

    @operation
    def update_eval(name: str, data: EvalUpdate) -> Call[EvalRead]:
        """Change an eval's settings (admin scope)."""
        return routes.UPDATE_EVAL.call({"name": name}, json=data)

    @operation
    def delete_eval(name: str) -> Call[None]:
        """Delete an eval (admin scope)."""
        return routes.DELETE_EVAL.call({"name": name})

    @operation
    def refresh(name: str, *, at: datetime | None = None, allow_future: bool | None = None) -> Call[RefreshResult]:
        """Write the release of the period holding `at` (default now), or return the one it has
        (`created` false) (admin scope)."""
        return routes.REFRESH.call({"name": name}, params={"at": at, "allow_future": allow_future})

    @operation
    def review_queue(
        name: str,
        *,
        source: str | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        text: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        view: QueueView | None = None,
    ) -> Call[ReviewQueuePage]:
        """One page of the items waiting for review, oldest incident first (curate scope). On an eval
        reviewed by a team, `view` picks what is listed: `mine` (the default there: what waits
        for this token's vote), `disputed` (the disagreements, for an adjudicator) or `all`."""
        params = {"source": source, "occurred_after": occurred_after, "occurred_before": occurred_before, "text": text, "limit": limit, "offset": offset, "view": view}
        return routes.REVIEW_QUEUE.call({"name": name}, params=params)

    @operation
    def open_sealed_review(name: str) -> Call[SealedReviewWindow]:
        """Open (or keep) this token's sealed review window on the eval (curate and sealed scopes);
        opening takes one unit of the sealed-read budget, `Forbidden` once it is spent."""
        return routes.SEALED_REVIEW.call({"name": name})

    # Team review

    @operation
    def claim_review_batch(eval_name: str, size: int = 20) -> Call[ClaimOutcome]:
        """Hold up to `size` (1 to 200) items of an eval shared by claims for this token's owner
        (curate scope): the ones still held, then the oldest they have not voted on whose round has
        room, for four hours, renewed by each claim. `Conflict` (`reason` `not_claim`) on an eval
        not shared by claims."""
        return routes.CLAIM_REVIEW_BATCH.call({"name": eval_name}, json={"size": size})

    @operation
    def vote(eval_name: str, item_id: int, decision: Decision, reason: str = "") -> Call[RoundOutcome]:
        """This token's owner's vote (`approve` or `reject`, a rejection with a reason) on an item
        of an eval reviewed by a team (curate scope); answers the round: `waiting` for more votes,
        `decided` (the votes agreed) or `disputed` (an adjudicator decides). `Conflict` with the
        problem's `reason`: `already_voted`, `enough_votes`, `not_assigned`, `not_reviewable`,
        `unread` (a sealed-bound item the token may not read), `not_team_review`."""
        return routes.VOTE.call({"name": eval_name}, json={"item_id": item_id, "decision": decision, "reason": reason})

    @operation
    def withdraw_vote(eval_name: str, item_id: int) -> Call[RoundOutcome]:
        """Take back this token's owner's open vote on the item, before its round settles (curate
        scope); `Conflict` (`no_vote`) when there is none."""
        return routes.WITHDRAW_VOTE.call({"name": eval_name, "item_id": item_id})

    @operation
    def adjudicate(eval_name: str, item_id: int, decision: Decision, reason: str = "") -> Call[RoundOutcome]:
        """Decide an item of the eval as its adjudicator, whatever its votes (curate scope; one of
        the eval's `adjudicators`, or an admin when it names none, else `Forbidden` with `reason`
        `not_adjudicator`); answers the round, `decided`."""
        return routes.ADJUDICATE.call({"name": eval_name}, json={"item_id": item_id, "decision": decision, "reason": reason})

    @operation
    def review_team(eval_name: str) -> Call[TeamReview]:
        """The eval's team settings and progress: per person, the rounds' agreement, what waits for
        this token's vote and the disagreements (curate scope)."""
        return routes.REVIEW_TEAM.call({"name": eval_name})

    # Releases

    @operation
    def list_releases(eval_name: str) -> Call[list[ReleaseSummary]]:
        """The eval's releases, newest first (read scope)."""
        return routes.LIST_RELEASES.call({"name": eval_name})

    @operation
    def manifest(eval_name: str, release: int | str = "latest") -> Call[ReleaseManifest]:
        """A release's manifest: every item as id, split and digest (read scope)."""
        return routes.MANIFEST.call({"name": eval_name, "ref": release})

    @operation
    def release_items(eval_name: str, release: int | str = "latest", split: str = "dev", occurred_after: datetime | None = None) -> Call[ReleaseItems]:
        """A split's items as released (read scope; the sealed split needs the sealed scope and
        takes one unit of its budget)."""
        return routes.RELEASE_ITEMS.call({"name": eval_name, "ref": release}, params={"split": split, "occurred_after": occurred_after})

    @operation
    def withdraw_release(eval_name: str, number: int, reason: str) -> Call[ReleaseSummary]:
        """Withdraw a release: it stops counting as `latest` (admin scope)."""
        return routes.WITHDRAW.call({"name": eval_name, "number": number}, json={"reason": reason})

    # Runs

    @operation
    def start_run(
        eval_name: str,
        *,
        model: str,
        endpoint: str,
        release: int | str = "latest",
        split: str = "dev",
        occurred_after: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> Call[RunStarted]:
        """Start a run and return it with every item to evaluate (read scope; sealed needs the
        sealed scope and an endpoint the gate allows, else `Forbidden` with its `condition`). The
        request carries an Idempotency-Key (`idempotency_key`, or a fresh one), so a retry returns
        the run already started and charges no budget twice."""
        body = {"model": model, "endpoint": endpoint, "release": release, "split": split, "occurred_after": occurred_after.isoformat() if occurred_after else None}
        key = idempotency_key or uuid.uuid4().hex
        return routes.START_RUN.call({"name": eval_name}, json=body, headers={"Idempotency-Key": key})

    @operation
    def list_runs(eval_name: str, limit: int | None = None) -> Call[list[RunRead]]:
        """The eval's runs, newest first (read scope)."""
        return routes.LIST_RUNS.call({"name": eval_name}, params={"limit": limit})

    @operation
    def get_run(run_id: int) -> Call[RunSummary]:
        """A run with its mean score and confidence interval (read scope)."""
        return routes.GET_RUN.call({"run_id": run_id})

    @operation
    def run_items(run_id: int, *, limit: int | None = None, cursor: str | None = None) -> Call[RunItemPage]:
        """One page of a run's items in the order served (read scope)."""
        return routes.RUN_ITEMS.call({"run_id": run_id}, params={"limit": limit, "cursor": cursor})

    @operation
    def list_results(run_id: int) -> Call[list[ResultRead]]:
        """A run's scores with each item's incident date (read scope)."""
        return routes.LIST_RESULTS.call({"run_id": run_id})

    @operation
    def item_exposures(item_id: int) -> Call[ItemExposures]:
        """Every run that served the item, and whether it is marked exposed (read scope)."""
        return routes.ITEM_EXPOSURES.call({"item_id": item_id})

    @operation
    def eval_exposure(eval_name: str) -> Call[EvalExposure]:
        """Per release: which endpoints saw what share of the eval, under which terms (read scope)."""
        return routes.EVAL_EXPOSURE.call({"name": eval_name})

    # Registry

    @operation
    def list_models() -> Call[list[ModelRead]]:
        """Every registered model (read scope)."""
        return routes.LIST_MODELS.call()

    @operation
    def get_model(name: str) -> Call[ModelRead]:
        """One model (read scope)."""
        return routes.GET_MODEL.call({"name": name})

    @operation
    def create_model(data: ModelCreate) -> Call[ModelRead]:
        """Register a model (admin scope)."""
        return routes.CREATE_MODEL.call(json=data)

    @operation
    def update_model(name: str, data: ModelUpdate) -> Call[ModelRead]:
        """Change a model (admin scope)."""
        return routes.UPDATE_MODEL.call({"name": name}, json=data)

    @operation
    def list_endpoints(model: str | None = None) -> Call[list[EndpointRead]]:
        """Every endpoint, or those of `model` (read scope). `sealed_allowed` says whether a sealed
        run may go there now; `augmented` whether the model there has retrieval, search or tools."""
        return routes.LIST_ENDPOINTS.call(params={"model": model})

    @operation
    def get_endpoint(name: str) -> Call[EndpointRead]:
        """One endpoint (read scope)."""
        return routes.GET_ENDPOINT.call({"name": name})

    @operation
    def create_endpoint(data: EndpointCreate) -> Call[EndpointRead]:
        """Register an endpoint with its data-retention terms and augmentations (admin scope)."""
        return routes.CREATE_ENDPOINT.call(json=data)

    @operation
    def update_endpoint(name: str, data: EndpointUpdate) -> Call[EndpointRead]:
        """Change an endpoint; changed terms are recorded as checked now by the caller (admin scope)."""
        return routes.UPDATE_ENDPOINT.call({"name": name}, json=data)

    @operation
    def delete_endpoint(name: str) -> Call[None]:
        """Delete an endpoint (admin scope)."""
        return routes.DELETE_ENDPOINT.call({"name": name})

    # Evidence

    @operation
    def temporal_split(model: str, *, eval_name: str | None = None, corpus: str | None = None) -> Call[TemporalSplitReport]:
        """The model's score before its training cutoff against after it, over an eval's runs or a
        corpus's uploaded results (read scope)."""
        return routes.TEMPORAL_SPLIT.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": "json"})

    @operation
    def temporal_split_chart(model: str, *, eval_name: str | None = None, corpus: str | None = None, image_format: str = "png") -> Call[bytes]:
        """The temporal split's chart as `png` or `svg` bytes (read scope)."""
        return routes.TEMPORAL_SPLIT_CHART.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": image_format})

    @operation
    def eval_scale(eval_name: str) -> Call[EvalScale]:
        """The eval's newest common-scale fit: per release its difficulty index, per model and run
        the ability, per run its equated score on the reference release (read scope)."""
        return routes.EVAL_SCALE.call({"name": eval_name})

    @operation
    def score_change(run_a: int, run_b: int) -> Call[ScoreChangeReport]:
        """Run B's score minus run A's, split into the part due to the set and the part due to the
        model, with intervals (read scope)."""
        return routes.SCORE_CHANGE.call(params={"run_a": run_a, "run_b": run_b})

    @operation
    def public_inflation(model: str, *, eval_name: str, corpus: str) -> Call[PublicInflationReport]:
        """Whether the model's score on a public corpus is higher than its score on the private eval
        predicts, judged against every other model with results on both (read scope)."""
        return routes.PUBLIC_INFLATION.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": "json"})

    @operation
    def public_inflation_chart(model: str, *, eval_name: str, corpus: str, image_format: str = "png") -> Call[bytes]:
        """The public-inflation report's chart as `png` or `svg` bytes (read scope)."""
        return routes.PUBLIC_INFLATION_CHART.call(params={"model": model, "eval": eval_name, "corpus": corpus, "format": image_format})

    @operation
    def post_corpus_results(corpus: str, data: CorpusResultsPost) -> Call[CorpusResultsAccepted]:
        """Store a model's per-item results on a registered public corpus (read scope)."""
        return routes.POST_CORPUS_RESULTS.call({"name": corpus}, json=data)

    @operation
    def start_probe(data: ProbeCreate) -> Call[ProbeRead]:
        """Start a completion probe in the background (admin scope); follow it with `get_probe`.
        `Forbidden` with `condition` `augmented_endpoint` for an endpoint that can look items up."""
        return routes.START_PROBE.call(json=data)

    @operation
    def list_probes(limit: int | None = None) -> Call[list[ProbeRead]]:
        """Probes, newest first (read scope)."""
        return routes.LIST_PROBES.call(params={"limit": limit})

    @operation
    def get_probe(probe_id: int) -> Call[ProbeRead]:
        """A probe with its progress, and its report once done (read scope)."""
        return routes.GET_PROBE.call({"probe_id": probe_id})

    @operation
    def probe_chart(probe_id: int, image_format: str = "png") -> Call[bytes]:
        """A finished probe's chart as `png` or `svg` bytes (read scope)."""
        return routes.PROBE_CHART.call({"probe_id": probe_id}, params={"format": image_format})

    # Audit

    @operation
    def audit(
        *,
        actor: str | None = None,
        token: str | None = None,
        token_id: int | None = None,
        action: str | None = None,
        object_type: str | None = None,
        object_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        sealed: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[AuditPage]:
        """One page of audit events, newest first (admin scope); `action` may be a prefix (`run.*`);
        `token` names every token that carried a name, `token_id` one token."""
        params = {
            "actor": actor, "token": token, "token_id": token_id, "action": action, "object_type": object_type, "object_id": object_id,
            "since": since, "until": until, "sealed": sealed, "limit": limit, "cursor": cursor,
        }  # fmt: skip
        return routes.AUDIT.call(params=params)
