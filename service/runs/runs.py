"""Runs: sending a release's split to a model endpoint, recording each item in the exposure
ledger, gating sealed runs, marking exposed items, and collecting per-item results.

A run is written in one transaction with its ledger rows, its audit event and, for an endpoint
that may train on inputs (`curation.runs.gate.exposes`), the exposure marks on its items: the next
refresh of every eval holding them retires them (`service.evals.refresh`), while dedup keeps them in
its history, so a later paraphrase of one is a duplicate rather than a fresh item. A sealed run
first passes the gate (`curation.runs.gate.judge_sealed_run`), then takes one unit of the release's
sealed-read budget (`service.evals.releases.consume_sealed_read`, race-safe) before it is written.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from curation.runs.gate import SealedRunRequest, judge_sealed_run
from curation.runs.ledger import record_run
from curation.runs.scores import summarise
from schemas.audit import AuditAction, AuditEvent
from schemas.common import read_model, utcnow
from schemas.evals import Eval, Split
from schemas.model_registry import Endpoint, Model
from schemas.release import Release, ReleaseItem
from schemas.runs import Result, ResultRead, ResultsAccepted, ResultsPost, Run, RunCreate, RunItem, RunItemRead, RunRead, RunStarted, RunSummary
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.evals.definitions import require_eval
from service.evals.refusal_audit import AuditedRefusal, refusals_audited
from service.evals.releases import SealedBudgetExceeded, consume_sealed_read, release_rows, resolve_release, sealed_reads_used
from service.evals.scale import run_on_scale
from service.runs.model_registry import require_serving_endpoint

MAX_NAMED = 50


def _named(ids: Sequence[int]) -> str:
    shown = ", ".join(str(item_id) for item_id in ids[:MAX_NAMED])
    return shown + (f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else "")


def run_read(session: Session, run: Run) -> RunRead:
    """The run as the API shows it: names of its eval, model and endpoint, its release's number and canary."""
    evaluation, release = session.get(Eval, run.eval_id), session.get(Release, run.release_id)
    model, endpoint = session.get(Model, run.model_id), session.get(Endpoint, run.endpoint_id)
    assert evaluation is not None and release is not None and model is not None and endpoint is not None
    names = {"eval": evaluation.name, "release": release.number, "model": model.name, "endpoint": endpoint.name}
    return read_model(RunRead, run, **names, training_cutoff=model.training_cutoff, canary=release.canary)


def require_run(*, session: Session, run_id: int) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise ProblemError(404, "Not Found", f"no run with id {run_id}; start one with POST /v1/evals/{{name}}/runs")
    return run


def require_sealed_rereading(*, run: Run, token_id: int, window_hours: int, now: datetime | None = None) -> None:
    """Refuse (403) a reading of a sealed run's items by any token but the one that started it
    (compared by id: a name is only a label, and another token may carry the same one), or later
    than `window_hours` after it started. A run that records no token id (started from the command
    line, or before ids were recorded) is re-read by no token."""
    if run.token_id is None or run.token_id != token_id:
        raise ProblemError(403, "Forbidden", f"the items of sealed run {run.id} are for the token that started it ({run.actor}); start a sealed run of your own")
    if (now or utcnow()) - run.created_at > timedelta(hours=window_hours):
        raise ProblemError(
            403,
            "Forbidden",
            f"sealed run {run.id} started more than {window_hours} h ago: its items were for that run's reading; start a new sealed run (it takes one unit of the budget)",
        )


def require_run_owner(*, run: Run, token_id: int, admin: bool) -> None:
    """Refuse (403) results for a run from any token but the one that started it (by id) or an
    admin. A run that records no token id takes results from an admin only."""
    if admin or (run.token_id is not None and run.token_id == token_id):
        return
    raise ProblemError(403, "Forbidden", f"run {run.id} was started by another token ({run.actor}); only that token or an admin may post its results")


def run_items(*, session: Session, run: Run, after_id: int | None = None, limit: int | None = None) -> tuple[list[RunItemRead], int | None]:
    """The run's items in the order they were served (newest incident first), from ledger row
    `after_id` on; and the ledger id of the last one returned when more follow."""
    query = (
        select(RunItem.id, ReleaseItem)
        .join(ReleaseItem, (col(ReleaseItem.release_id) == col(RunItem.release_id)) & (col(ReleaseItem.item_id) == col(RunItem.item_id)))
        .where(RunItem.run_id == run.id)
        .order_by(col(RunItem.id))
    )
    if after_id is not None:
        query = query.where(col(RunItem.id) > after_id)
    if limit is not None:
        query = query.limit(limit + 1)
    rows = session.exec(query).all()
    page = rows[:limit] if limit is not None else rows
    items = [RunItemRead(item_id=row.item_id, split=row.split, occurred_at=row.occurred_at, content_digest=row.content_digest, content=json.loads(row.content)) for _, row in page]
    last = page[-1][0] if limit is not None and len(rows) > limit and page else None
    return items, last


def _warning(endpoint: Endpoint, count: int) -> str:
    return (
        f"endpoint {endpoint.name!r} may train on its inputs (trains_on_inputs: {endpoint.trains_on_inputs}): the {count} items sent are marked exposed "
        "and leave the eval at its next refresh; record its terms (PATCH /v1/endpoints) to stop this"
    )


def _started(session: Session, run: Run, endpoint: Endpoint) -> RunStarted:
    items, _ = run_items(session=session, run=run)
    warning = _warning(endpoint, run.item_count) if run.exposes_items and run.item_count else None
    return RunStarted(**run_read(session, run).model_dump(), warning=warning, items=items)


def _existing(session: Session, actor: str, token_id: int | None, key: str | None) -> Run | None:
    """The run `key` started under this actor's name; 409 when another token of that name (an
    earlier one, since revoked or expired) started it: a key never finds another token's run."""
    if key is None:
        return None
    found = session.exec(select(Run).where(Run.actor == actor, Run.idempotency_key == key)).first()
    if found is not None and found.token_id != token_id:
        raise ProblemError(409, "Conflict", f"Idempotency-Key {key!r} was used by another token named {actor.removeprefix('token:')!r}; use a new key")
    return found


@dataclass(frozen=True)
class _RunRequest:
    """What a run was asked for, and by whom."""

    eval_name: str
    data: RunCreate
    split: Split
    actor: str
    token_id: int | None
    idempotency_key: str | None


@dataclass(frozen=True)
class _Chosen:
    """The run to write: its eval, release, model, endpoint and the release's rows it serves."""

    evaluation: Eval
    release: Release
    model: Model
    endpoint: Endpoint
    rows: list[ReleaseItem]


def start_run(
    *,
    engine: Engine,
    eval_name: str,
    data: RunCreate,
    actor: str,
    scopes: frozenset[str],
    terms_max_age_days: int,
    idempotency_key: str | None = None,
    token_id: int | None = None,
) -> RunStarted:
    """Start a run for the token `token_id` (None: the command line) and return it with its items.
    A repeated `idempotency_key` of the same token returns the run it started, unchanged and
    without charging the budget again; another token's key never finds it (409, before any budget
    is charged, when another token of the same name used that key). Raises ProblemError: 404
    (eval, release, model, endpoint), 422 (the endpoint serves another model, a naive date), 403
    (sealed run refused, audited; `condition` names the failing gate condition).

    Two units of work: the first chooses the items and, for a sealed run, passes the gate and
    charges the budget (`_choose`); the second writes the run with its ledger (`_record`)."""
    request = _RunRequest(eval_name=eval_name, data=data, split=Split(data.split), actor=actor, token_id=token_id, idempotency_key=idempotency_key)
    chosen = _choose(engine, request, scopes=scopes, terms_max_age_days=terms_max_age_days)
    if isinstance(chosen, RunStarted):
        return chosen
    return _record(engine, request, chosen)


def _choose(engine: Engine, request: _RunRequest, *, scopes: frozenset[str], terms_max_age_days: int) -> _Chosen | RunStarted:
    """In a unit of work of its own: the run an idempotency key already started (returned as
    it is), or the items to serve, with a sealed run's gate passed and its budget charged
    (committed, so the charge stands). A refused sealed run raises ProblemError 403, its refusal
    audited (`service.evals.refusal_audit`)."""
    data = request.data
    try:
        with refusals_audited(engine), write_transaction(engine) as session:
            evaluation = require_eval(session=session, name=request.eval_name)
            release = resolve_release(session=session, evaluation=evaluation, ref=str(data.release))
            model, endpoint = require_serving_endpoint(session=session, model=data.model, endpoint=data.endpoint)
            if (found := _existing(session, request.actor, request.token_id, request.idempotency_key)) is not None:
                if (found.eval_id, found.model_id, found.endpoint_id, found.split) != (evaluation.id, model.id, endpoint.id, request.split.value):
                    detail = f"Idempotency-Key {request.idempotency_key!r} already started run {found.id}, which differs from this request; use a new key"
                    raise ProblemError(422, "Invalid request", detail, reason="idempotency_conflict")
                return _started(session, found, endpoint)
            rows = release_rows(session=session, release=release, split=request.split, occurred_after=data.occurred_after)
            if request.split is Split.SEALED:
                _pass_gate(session, evaluation, release, endpoint, request.actor, request.token_id, scopes, terms_max_age_days, len(rows))
    except SealedBudgetExceeded as exc:
        raise ProblemError(403, "Sealed run refused", str(exc), condition="sealed_budget") from exc
    return _Chosen(evaluation, release, model, endpoint, rows)


def _record(engine: Engine, request: _RunRequest, chosen: _Chosen) -> RunStarted:
    """Write the run, its ledger rows and exposure marks in a unit of work of its own. When the
    same key raced in first, the run it started stands and is returned (409 when an earlier token
    of the same name holds the key)."""
    try:
        with write_transaction(engine) as session:
            run = record_run(
                session, evaluation=chosen.evaluation, release=chosen.release, model=chosen.model, endpoint=chosen.endpoint, split=request.split,
                items=chosen.rows, actor=request.actor, token_id=request.token_id, occurred_after=request.data.occurred_after,
                idempotency_key=request.idempotency_key, now=utcnow(),
            )  # fmt: skip
            return _started(session, run, chosen.endpoint)
    except IntegrityError:
        pass  # the same key raced in: that run stands
    with Session(engine) as session:
        found = _existing(session, request.actor, request.token_id, request.idempotency_key)
        if found is None:
            # The key is taken under this name by another token (an earlier one, since revoked).
            raise ProblemError(
                409, "Conflict", f"Idempotency-Key {request.idempotency_key!r} was used by an earlier token named {request.actor.removeprefix('token:')!r}; use a new key"
            ) from None
        return _started(session, found, chosen.endpoint)


def _pass_gate(
    session: Session, evaluation: Eval, release: Release, endpoint: Endpoint, actor: str, token_id: int | None, scopes: frozenset[str], max_age: int, count: int
) -> None:
    """Judge a sealed run (`curation.runs.gate.judge_sealed_run`) and charge the budget in the
    caller's unit of work. A refusal raises `AuditedRefusal`: ProblemError 403 naming the failing
    condition, or SealedBudgetExceeded when the budget ran out meanwhile."""
    decision = judge_sealed_run(
        SealedRunRequest(
            has_sealed_scope="sealed" in scopes,
            endpoint=endpoint.name,
            trains_on_inputs=endpoint.trains_on_inputs,
            terms_checked_at=endpoint.terms_checked_at,
            now=utcnow(),
            terms_max_age_days=max_age,
            budget=evaluation.sealed_read_budget,
            used=sealed_reads_used(session=session, release=release),
        )
    )
    if decision.allowed:
        consume_sealed_read(session=session, evaluation=evaluation, release=release, actor=actor, token_id=token_id, item_count=count, purpose="run")
        return
    assert decision.condition is not None
    details = {"condition": decision.condition.value, "endpoint": endpoint.name, "release": release.number, "trains_on_inputs": endpoint.trains_on_inputs}
    refused = AuditEvent(actor=actor, action=AuditAction.RUN_SEALED_REFUSED, object_type="eval", object_id=evaluation.name, count=0, details=details)
    raise AuditedRefusal(refused, ProblemError(403, "Sealed run refused", decision.detail, condition=decision.condition.value))


def post_results(*, session: Session, run: Run, data: ResultsPost, actor: str, token_id: int | None = None) -> ResultsAccepted:
    """Store per-item scores of the run, all or nothing, recording the token `token_id` that
    posted them (the caller checked it may: `require_run_owner`). Raises ProblemError 422 naming item ids
    not in the run or given twice, 409 naming items already scored differently. Written in the
    caller's unit of work (flushed, so the counts returned include them)."""
    assert run.id is not None
    wanted = [entry.item_id for entry in data.results]
    twice = sorted(item_id for item_id, times in Counter(wanted).items() if times > 1)
    if twice:
        raise ProblemError(422, "Invalid request", f"items given more than once: {_named(twice)}", item_ids=twice, reason="repeated_items")
    in_run = set(session.exec(select(RunItem.item_id).where(RunItem.run_id == run.id, col(RunItem.item_id).in_(wanted))).all())
    unknown = sorted(set(wanted) - in_run)
    if unknown:
        raise ProblemError(422, "Invalid request", f"items not in run {run.id}: {_named(unknown)}; score only the items the run served", item_ids=unknown, reason="not_in_run")
    stored = {result.item_id: result for result in session.exec(select(Result).where(Result.run_id == run.id, col(Result.item_id).in_(wanted))).all()}
    before = {item_id: (result.score, result.human_success) for item_id, result in stored.items()}
    changed = sorted(entry.item_id for entry in data.results if entry.item_id in before and before[entry.item_id] != (entry.score, entry.human_success))
    if changed:
        detail = f"items already scored differently in run {run.id}: {_named(changed)}; a score is final: start a new run to score again"
        raise ProblemError(409, "Conflict", detail, item_ids=changed)
    fresh = [entry for entry in data.results if entry.item_id not in stored]
    session.add_all(Result(run_id=run.id, item_id=entry.item_id, score=entry.score, human_success=entry.human_success, actor=actor, token_id=token_id) for entry in fresh)
    if fresh:
        details = {"item_ids": sorted(entry.item_id for entry in fresh)}
        session.add(AuditEvent(actor=actor, action=AuditAction.RUN_RESULTS, object_type="run", object_id=str(run.id), count=len(fresh), details=details))
    session.flush()
    scored = int(session.exec(select(func.count()).select_from(Result).where(Result.run_id == run.id)).one())
    return ResultsAccepted(run_id=run.id, stored=len(fresh), unchanged=len(data.results) - len(fresh), scored=scored, remaining=run.item_count - scored)


def results(*, session: Session, run: Run) -> list[ResultRead]:
    """The run's results by item, with each item's incident date."""
    rows = session.exec(
        select(Result, RunItem.occurred_at)
        .join(RunItem, (col(RunItem.run_id) == col(Result.run_id)) & (col(RunItem.item_id) == col(Result.item_id)))
        .where(Result.run_id == run.id)
        .order_by(col(Result.item_id))
    ).all()
    return [ResultRead(item_id=r.item_id, occurred_at=at, score=r.score, human_success=r.human_success, created_at=r.created_at) for r, at in rows]


def run_summary(*, session: Session, run: Run) -> RunSummary:
    """The run with its mean score and 95% interval (`curation.runs.scores.summarise`), and where
    it stands on its eval's common scale (`service.evals.scale.run_on_scale`)."""
    scored = session.exec(select(Result.score, Result.human_success).where(Result.run_id == run.id)).all()
    interval = summarise([score for score, _ in scored])
    human = [value for _, value in scored if value is not None]
    return RunSummary(
        **run_read(session, run).model_dump(),
        scored=len(scored),
        remaining=run.item_count - len(scored),
        score=interval,
        human_success_mean=sum(human) / len(human) if human else None,
        human_success_n=len(human),
        scale=run_on_scale(session, run),
    )


def list_runs(*, session: Session, evaluation: Eval, limit: int = 100) -> list[RunRead]:
    runs = session.exec(select(Run).where(Run.eval_id == evaluation.id).order_by(col(Run.id).desc()).limit(limit)).all()
    return [run_read(session, run) for run in runs]
