"""The temporal-split report in the service: the model, its cutoff and the eval or public corpus
looked up, the per-item results gathered (`curation.evidence.item_results`) and handed to
`curation.evidence.temporal_split`, and the refusals turned into problems a person can act on;
and the upload of a model's results on a public corpus.
"""

from __future__ import annotations

from datetime import date

import numpy as np
from sqlalchemy import func
from sqlmodel import Session, col, select

from curation.evidence.item_results import corpus_item_results, eval_item_results
from curation.evidence.temporal_split import NotEnoughItems, temporal_split_report
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.corpus_results import CorpusResult, CorpusResultError, CorpusResultsAccepted, CorpusResultsPost
from schemas.evidence import EvidenceWarning, TemporalSplitReport
from schemas.item import Item
from schemas.model_registry import Endpoint, Model
from schemas.runs import Result, Run
from schemas.source import Source, SourceKind
from service.core.problems import ProblemError
from service.evals.definitions import require_eval
from service.runs.model_registry import require_model
from service.sources.definitions import get_source

REPORT_SEED = 20240101
"""The bootstrap and permutation draws are seeded: the same results always give the same report."""


def require_corpus(*, session: Session, name: str) -> Source:
    """The registered public corpus `name` (a reference source), or a 404/422 problem."""
    source = get_source(session=session, name=name)
    if source is None:
        raise ProblemError(404, "Not Found", f"no public corpus {name!r}; register one with `goldenset reference add {name} FILE --mapping MAPPING`")
    if source.kind != SourceKind.REFERENCE.value:
        raise ProblemError(
            422,
            "Invalid request",
            f"source {name!r} holds private incidents, not a public corpus; for an eval's items ask with eval=NAME instead of corpus={name}",
            reason="not_a_corpus",
        )
    return source


def require_cutoff(model: Model) -> date:
    """The model's training cutoff, or a 422 problem saying how to record it."""
    if model.training_cutoff is None:
        raise ProblemError(
            422,
            "Training cutoff missing",
            f"model {model.name!r} has no training cutoff registered, so there is no 'before' and 'after' to compare; "
            f'record the date its provider states with PATCH /v1/models/{model.name} {{"training_cutoff": "YYYY-MM-DD"}}',
            reason="no_cutoff",
        )
    return model.training_cutoff


def temporal_split(*, session: Session, model_name: str, eval_name: str | None = None, corpus_name: str | None = None) -> TemporalSplitReport:
    """The temporal-split report of `model_name` on an eval's run results or a corpus's uploaded
    results (exactly one of `eval_name`, `corpus_name`). Raises ProblemError: 404 (unknown eval,
    corpus or model; no results for the model there), 422 (no cutoff registered; a half of the
    split with fewer than 2 items; both or neither target given)."""
    if (eval_name is None) == (corpus_name is None):
        detail = "give exactly one of eval=NAME (results of an eval's runs) or corpus=NAME (results uploaded for a public corpus)"
        raise ProblemError(422, "Invalid request", detail, reason="eval_or_corpus")
    model = require_model(session=session, name=model_name)
    cutoff = require_cutoff(model)
    if eval_name is not None:
        evaluation = require_eval(session=session, name=eval_name)
        results = eval_item_results(session=session, evaluation=evaluation, model=model)
        label, missing = f"eval {eval_name}", f"no results of model {model_name!r} in any run of eval {eval_name!r}; post them with POST /v1/runs/{{id}}/results"
    else:
        assert corpus_name is not None
        corpus = require_corpus(session=session, name=corpus_name)
        results = corpus_item_results(session=session, corpus=corpus, model=model)
        label, missing = corpus_name, f"no results of model {model_name!r} on corpus {corpus_name!r}; upload them with POST /v1/corpora/{corpus_name}/results"
    if not results:
        raise ProblemError(404, "No results", missing)
    try:
        report = temporal_split_report(results, cutoff=cutoff, model=model.name, corpus=label, rng=np.random.default_rng(REPORT_SEED))
    except NotEnoughItems as exc:
        raise ProblemError(422, "Too few items", f"{exc} ({len(results)} items have results)", items=len(results), cutoff=cutoff.isoformat(), reason="too_few_items") from exc
    if eval_name is not None:
        report.warnings.extend(_augmented_runs_warning(session, eval_id=evaluation.id, model_id=model.id))
    return report


def _augmented_runs_warning(session: Session, *, eval_id: int | None, model_id: int | None) -> list[EvidenceWarning]:
    """An `augmented_endpoint` warning when any run contributing results went through an endpoint
    that had retrieval, web search or tools when it started: its scores on old items may come
    from looking them up, not from training."""
    rows = session.exec(
        select(Run.id, Endpoint.name)
        .join(Endpoint, col(Endpoint.id) == col(Run.endpoint_id))
        .where(Run.eval_id == eval_id, Run.model_id == model_id, col(Run.augmented).is_(True), col(Run.id).in_(select(Result.run_id).distinct()))
        .order_by(col(Run.id))
    ).all()
    if not rows:
        return []
    runs = ", ".join(str(run_id) for run_id, _ in rows)
    endpoints = ", ".join(sorted({name for _, name in rows}))
    message = (
        f"{len(rows)} contributing run(s) ({runs}) went through an augmented endpoint ({endpoints}: retrieval, web search or tools); "
        "a model that can look items up scores well on old items without having trained on them, so a difference here does not show contamination. "
        "Report on runs through the bare model instead."
    )
    return [EvidenceWarning(code="augmented_endpoint", message=message)]


def post_corpus_results(*, session: Session, corpus: Source, data: CorpusResultsPost, actor: str) -> CorpusResultsAccepted:
    """Store one model's results on the corpus. Results naming an item the corpus lacks, naming
    one twice, or changing a stored score without `replace` are refused by position; the rest are
    kept, in the caller's unit of work (flushed, so the counts returned include them)."""
    model = require_model(session=session, name=data.model)
    assert model.id is not None and corpus.id is not None
    wanted = {entry.external_id for entry in data.results}
    items = dict(session.exec(select(Item.external_id, Item.id).where(Item.source_id == corpus.id, col(Item.external_id).in_(wanted))).all())
    stored = {row.item_id: row for row in session.exec(select(CorpusResult).where(CorpusResult.model_id == model.id, col(CorpusResult.item_id).in_(list(items.values())))).all()}
    errors: list[CorpusResultError] = []
    seen: set[str] = set()
    counts = {"stored": 0, "replaced": 0, "unchanged": 0}
    now = utcnow()
    for position, entry in enumerate(data.results):
        item_id = items.get(entry.external_id)
        if entry.external_id in seen:
            detail = "this item appears earlier in the batch; give one result per item"
            errors.append(CorpusResultError(position=position, external_id=entry.external_id, reason="duplicate", detail=detail))
            continue
        seen.add(entry.external_id)
        if item_id is None:
            detail = f"corpus {corpus.name!r} has no item {entry.external_id!r}; add it with `goldenset reference add {corpus.name} FILE`"
            errors.append(CorpusResultError(position=position, external_id=entry.external_id, reason="unknown_item", detail=detail))
            continue
        existing = stored.get(item_id)
        if existing is None:
            session.add(CorpusResult(model_id=model.id, item_id=item_id, score=entry.score, human_success=entry.human_success, actor=actor, created_at=now, updated_at=now))
            counts["stored"] += 1
        elif (existing.score, existing.human_success) == (entry.score, entry.human_success):
            counts["unchanged"] += 1
        elif data.replace:
            existing.score, existing.human_success, existing.actor, existing.updated_at = entry.score, entry.human_success, actor, now
            session.add(existing)
            counts["replaced"] += 1
        else:
            detail = f"already scored {existing.score} for model {model.name!r}; send replace: true to overwrite it"
            errors.append(CorpusResultError(position=position, external_id=entry.external_id, reason="conflict", detail=detail))
    if counts["stored"] or counts["replaced"]:
        details = {"model": model.name, **counts, "rejected": len(errors)}
        session.add(
            AuditEvent(actor=actor, action=AuditAction.CORPUS_RESULTS, object_type="source", object_id=corpus.name, count=counts["stored"] + counts["replaced"], details=details)
        )
    session.flush()
    scored = session.exec(
        select(func.count()).select_from(CorpusResult).join(Item, col(Item.id) == col(CorpusResult.item_id)).where(CorpusResult.model_id == model.id, Item.source_id == corpus.id)
    ).one()
    total = session.exec(select(func.count()).select_from(Item).where(Item.source_id == corpus.id)).one()
    return CorpusResultsAccepted(corpus=corpus.name, model=model.name, **counts, rejected=len(errors), errors=errors, scored=int(scored), corpus_items=int(total))
