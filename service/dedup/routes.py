"""Dedup over HTTP: explaining it (the items most like a stored item, the verdict a text would
get), its figures and close calls, and people overruling it.

Dedup questions (`/v1/dedup/questions`, `curation.dedup.questions`): the pairs curation asks a
curator about, and their answers, applied as rulings in the request's transaction.

`/similar` and `/v1/dedup/check` read the app's `DedupReader` index (rebuilt when curation decided
something since it was built) and never write. Only `/v1/dedup/check` runs the embedding model, in
the thread pool and behind the app's semaphore, never on the event loop (the model takes one call
at a time, so a check may wait for a curation batch to finish encoding); `/similar` uses the
stored vectors (the model is loaded for its id, never run). The rulings
(`curation.dedup.overrides`) write in the request's transaction; curation reads them on every
later run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Annotated

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.answers import answer_question, asked_pair
from curation.dedup.deduplicator import Deduplicator
from curation.dedup.index import MixedRecipeError
from curation.dedup.overrides import rule_duplicate_of, rule_not_duplicate
from curation.dedup.similarity import NotIndexed, check_text, similar_to_stored
from curation.dedup.stats import LOW_MARGIN
from embedding.http_encoder import EmbeddingServiceError
from schemas.audit import AuditAction
from schemas.common import utcnow
from schemas.dedup import DedupCheck, DedupCheckResult, DedupStats, DuplicateOfBody, LowMarginDuplicate, NotDuplicateBody, SimilarRead
from schemas.dedup_questions import DedupQuestionPage, DedupQuestionRead, QuestionAnswer, QuestionState
from schemas.item import Item, ItemRead
from schemas.token import Scope
from service.core.audit import audit_content_read
from service.core.auth import CuratePrincipal, Principal, ReadPrincipal
from service.core.deps import IdPath, SecretKeyDep, SessionDep, WriteSessionDep
from service.core.problems import ProblemError, problem_doc, problem_response
from service.core.rate_limits import RateLimits
from service.dedup.http_backend import EmbeddingEndpointRefused, admit_encoder
from service.dedup.questions import one_question, question_page
from service.dedup.reader import DedupReader
from service.dedup.reads import low_margin_for_readers, stats_for_readers
from service.evals.sealed_review import revealed_to
from service.items.reads import answer_after_write, shown_item, similar_reads
from service.items.ruling_guard import guarded_ruling
from service.items.shaping import ShownItem, withheld

router = APIRouter(tags=["dedup"])
MAX_K = 100
MAX_LOW_MARGIN = 500
MAX_QUESTIONS = 200
ITEM_DETAILS = ("matched_item", "kept_over", "best_jaccard", "best_embedding")
SEALED_MATCH_ACTION = AuditAction.ITEM_SEALED_CHECK_MATCHED


def _deduplicator(reader: DedupReader, session: Session) -> Deduplicator:
    try:
        return reader.deduplicator(session)
    except MixedRecipeError as exc:
        raise ProblemError(409, "Conflict", f"the dedup index cannot be built: {exc}") from exc


def _audit(request: Request, principal: Principal, action: str, reads: Sequence[SimilarRead]) -> None:
    """Audit a response that showed the titles of `reads` (sealed ones were withheld)."""
    audit_content_read(request, principal, [read.id for read in reads if not read.sealed], action)


@router.get("/v1/items/{item_id}/similar", response_model=list[SimilarRead], responses=problem_doc(401, 403, 404, 409))
def similar(
    item_id: IdPath,
    request: Request,
    principal: ReadPrincipal,
    session: SessionDep,
    secret_key: SecretKeyDep,
    k: Annotated[int, Query(ge=1, le=MAX_K, description="How many items.")] = 10,
) -> list[SimilarRead]:
    """The `k` items most like this one among those that occurred before it (never itself), best
    first: `score` fuses the body `cosine`, `title_cosine` and `lexical` similarity; `jaccard` is
    the MinHash estimate. 409 while the item is not curated yet. The neighbours of an item in (or
    bound for) a sealed slice say what it is about, so they need the `sealed` scope (403
    `sealed_item` without it), and reading them is audited as a sealed read
    (`item.sealed_similar_read`, naming the item)."""
    item, shown = shown_item(session, item_id, secret_key=secret_key)
    if shown.withheld and Scope.SEALED.value not in principal.scopes:
        raise ProblemError(
            403,
            "Forbidden",
            f"item {item_id} is in (or bound for) an eval's sealed slice: its neighbours tell what it is about, so listing them needs the 'sealed' scope",
            condition="sealed_item",
        )
    try:
        ranked = similar_to_stored(session, lambda: _deduplicator(request.app.state.dedup_reader, session), item, k=k)
    except NotIndexed as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    reads = similar_reads(session=session, ranked=ranked, secret_key=secret_key)
    if shown.withheld:
        audit_content_read(request, principal, [item_id], AuditAction.ITEM_SEALED_SIMILAR_READ)
    _audit(request, principal, AuditAction.ITEM_SIMILAR_READ, reads)
    return reads


def _check(engine: Engine, reader: DedupReader, data: DedupCheck, k: int, secret_key: str) -> tuple[DedupCheckResult, int | None]:
    """The check's answer, and the item of a sealed slice it matched (never named in the answer)."""
    with Session(engine) as session:
        deduplicator = _deduplicator(reader, session)
        admit_encoder(session, reader.settings, deduplicator.encoder)  # a refusal is answered by `install_problem_handlers`
        try:
            verdict, ranked = check_text(session, deduplicator, title=data.title, input_text=data.input, reference=data.reference, identity=data.identity, k=k, now=utcnow())
        except EmbeddingServiceError as exc:
            raise ProblemError(503, "Service Unavailable", f"{exc}; nothing was checked") from exc
        details = dict(verdict.details)
        named = _named_items(details)
        vetoed = [entry for entry in details.get("vetoed", []) if isinstance(entry, dict)]
        refused = [entry["item"] for entry in vetoed if isinstance(entry.get("item"), int)]
        hidden = withheld(session=session, item_ids=[*named.values(), *refused, *([verdict.matched] if verdict.matched is not None else [])], secret_key=secret_key)
        for key, item_id in named.items():
            if item_id in hidden:
                details.pop(key)
        if vetoed:
            # A veto's reason quotes words of both titles: one naming a sealed item is left out.
            details["vetoed"] = [entry for entry in vetoed if entry.get("item") not in hidden]
        matched = named.get("matched_item")
        sealed_match = verdict.matched in hidden or matched in hidden
        if sealed_match:
            details["matched"] = "an item of a sealed slice: which one is not said"
        sealed_item = (verdict.matched if verdict.matched in hidden else matched) if sealed_match else None
        result = DedupCheckResult(
            status=verdict.status,
            stage=verdict.stage,
            score=verdict.score,
            duplicate_of=None if sealed_match else verdict.matched,
            matched_item=None if sealed_match else matched,
            details=details,
            similar=similar_reads(session=session, ranked=ranked, secret_key=secret_key),
        )
        return result, sealed_item


def install_problem_handlers(app: FastAPI) -> None:
    """Answer an embedding endpoint the gate refuses (`EmbeddingEndpointRefused`, from whatever
    route embeds a text) with 403 naming its `condition`, as the sealed-run gate's refusals are;
    more specific than the app's handler of every other refusal (`service.core.problems`)."""

    @app.exception_handler(EmbeddingEndpointRefused)
    async def _embedding_refused(request: Request, exc: EmbeddingEndpointRefused) -> JSONResponse:
        return problem_response(403, "Embedding endpoint refused", str(exc), instance=request.url.path, condition=exc.condition)


def _named_items(details: dict[str, object]) -> dict[str, int]:
    """The items a verdict's details name: the item matched, the one it was kept over, and the best
    near-verbatim and paraphrase candidates."""
    named: dict[str, int] = {}
    for key in ITEM_DETAILS:
        value = details.get(key)
        item = value.get("item") if isinstance(value, dict) else value
        if isinstance(item, int):
            named[key] = item
    return named


@router.post("/v1/dedup/check", response_model=DedupCheckResult, responses=problem_doc(401, 403, 409, 422, 429, 503))
async def check(
    data: DedupCheck,
    request: Request,
    principal: ReadPrincipal,
    secret_key: SecretKeyDep,
    k: Annotated[int, Query(ge=1, le=MAX_K, description="How many similar items.")] = 10,
) -> DedupCheckResult:
    """The verdict curation would give this text now (against every curated item), with the `k`
    most similar items. Nothing is stored. A match with an item of a sealed slice is reported
    without naming the item, and sealed items are never among the similar ones. The text is
    embedded in a worker thread, a few requests at a time. 503 from an API replica that does not
    load the embedding model (docs/deploying.md, "Roles").

    A match with a sealed item confirms a guess at its text: it is audited as a sealed event
    (`item.sealed_check_matched`, naming the item), and a token that had
    `GOLDENSET_SEALED_CHECK_RATE_LIMIT` such matches in its window is refused (429, `Retry-After`)."""
    limits: RateLimits = request.app.state.rate_limits
    if (refusal := limits.exhausted("sealed_check", str(principal.token_id))) is not None:
        raise refusal
    if not request.app.state.dedup_reader.can_encode:
        raise ProblemError(
            503,
            "Service Unavailable",
            "this replica does not load the embedding model (an API replica: `goldenset serve --no-scheduler`), so it cannot embed a text to check; "
            "send the check to a process that does (`goldenset serve`), or set GOLDENSET_API_CURATES=true on the API replicas",
        )
    async with request.app.state.dedup_semaphore:
        result, sealed_item = await run_in_threadpool(_check, request.app.state.engine, request.app.state.dedup_reader, data, k, secret_key)
    if sealed_item is not None:
        limits.count("sealed_check", str(principal.token_id))
        await run_in_threadpool(audit_content_read, request, principal, [sealed_item], SEALED_MATCH_ACTION)
    await run_in_threadpool(_audit, request, principal, AuditAction.DEDUP_CHECK_READ, result.similar)
    return result


def _ruled(request: Request, principal: Principal, session: Session, secret_key: str, item_ids: tuple[int, ...], rule: Callable[[], Item]) -> ItemRead:
    """Apply a ruling on `item_ids` (the first is the item answered) and answer that item as it is
    now (without its content when it is sealed); a ruling blind on a sealed-bound item, or one that
    would show the caller one, is refused (`service.items.ruling_guard`)."""
    guarded_ruling(session=session, item_ids=item_ids, secret_key=secret_key, revealed=revealed_to(session=session, principal=principal), rule=rule)
    return answer_after_write(request, principal, session, item_ids[0], secret_key=secret_key)


@router.post("/v1/items/{item_id}/not-duplicate", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409, 422))
def not_duplicate(item_id: IdPath, data: NotDuplicateBody, request: Request, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> ItemRead:
    """Rule that a duplicate (or contaminated) item is not a duplicate of the item it names, with a
    note saying why: it becomes `unique` (and waits for review), and no curation run matches the
    pair again. Audited (`item.not_duplicate`). Refused: `note_required` (422, a blank note),
    `not_found` (404), `not_a_duplicate` (409)."""
    rule = partial(rule_not_duplicate, session=session, item_id=item_id, note=data.note, actor=principal.actor, now=utcnow())
    return _ruled(request, principal, session, secret_key, (item_id,), rule)


@router.post("/v1/items/{item_id}/duplicate-of", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409, 422))
def duplicate_of(item_id: IdPath, data: DuplicateOfBody, request: Request, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> ItemRead:
    """Rule by hand that a curated item is a duplicate of item `item_id` of the body, with a note:
    it becomes `duplicate` (`contaminated` when that item belongs to a reference corpus) and stays
    so whenever it is curated again. Audited (`item.duplicate_of`). Refused: `same_item` and
    `note_required` (422), `not_found` (404, either item), `not_curated`, `reviewed`, `retired`,
    `reference_item`, `other_not_curated` and `other_is_duplicate` (409; the last names the item
    to point at instead)."""
    rule = partial(rule_duplicate_of, session=session, item_id=item_id, other_id=data.item_id, note=data.note, actor=principal.actor, now=utcnow())
    return _ruled(request, principal, session, secret_key, (item_id, data.item_id), rule)


@router.get("/v1/dedup/stats", response_model=DedupStats, responses=problem_doc(401, 403))
def stats(request: Request, principal: ReadPrincipal, session: SessionDep, secret_key: SecretKeyDep) -> DedupStats:
    """What dedup decided: items by status, decisions in force by stage and rule, the cluster-size
    distribution and the ten largest clusters (a sealed representative's title withheld), people's
    rulings in force by kind, and the share of decided items marked duplicate."""
    figures = stats_for_readers(session=session, secret_key=secret_key)
    audit_content_read(request, principal, [cluster.representative for cluster in figures.largest_clusters if not cluster.sealed], AuditAction.DEDUP_STATS_READ)
    return figures


@router.get("/v1/dedup/low-margin", response_model=list[LowMarginDuplicate], responses=problem_doc(401, 403, 422))
def low_margin(
    principal: CuratePrincipal,
    session: SessionDep,
    secret_key: SecretKeyDep,
    source: Annotated[str | None, Query(description="Only duplicates of this source.")] = None,
    margin: Annotated[float, Query(gt=0, le=1, description="Only decisions whose score cleared its threshold by less than this.")] = LOW_MARGIN,
    limit: Annotated[int, Query(ge=1, le=MAX_LOW_MARGIN)] = 50,
) -> list[LowMarginDuplicate]:
    """Duplicates decided with a low margin, closest call first, for a person to check: the item,
    the item it matched, the stage, the rule (`fresh` or `guard`), the score and its margin over
    the threshold. Pairs with a sealed item are left out."""
    return low_margin_for_readers(session=session, secret_key=secret_key, sources=None if source is None else [source], margin=margin, limit=limit)




def _audit_shown(request: Request, principal: Principal, shown: Sequence[ShownItem]) -> None:
    """Audit the items whose content a questions answer carried (sealed ones shown through a window apart)."""
    audit_content_read(request, principal, [item.id for item in shown if not item.withheld and not item.sealed], AuditAction.DEDUP_QUESTIONS_READ)
    audit_content_read(request, principal, [item.id for item in shown if not item.withheld and item.sealed], AuditAction.ITEM_SEALED_QUESTION_READ)


@router.get("/v1/dedup/questions", response_model=DedupQuestionPage, responses=problem_doc(401, 403, 422))
def questions(
    request: Request,
    principal: ReadPrincipal,
    session: SessionDep,
    secret_key: SecretKeyDep,
    source: Annotated[str | None, Query(max_length=200, description="Only questions about items of this source.")] = None,
    state: Annotated[QuestionState | None, Query(description="Only questions in this state (`open`, `answered`, `withdrawn`).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_QUESTIONS)] = 50,
    cursor: str | None = None,
) -> DedupQuestionPage:
    """The pairs dedup asks a curator about, oldest first; pass `next_cursor` as `cursor` for the
    next page. Each shows both items side by side (a sealed item without its content, and then
    without the pair's features and evidence), the judge's P (same incident), the rules' outcome
    and why the pair was asked. `state=answered` exports the curators' rulings: labelled pairs
    for refitting the judge."""
    reads, shown, next_cursor = question_page(
        session=session, secret_key=secret_key, source=source, state=state, limit=limit, cursor=cursor, revealed=revealed_to(session=session, principal=principal)
    )
    _audit_shown(request, principal, shown)
    return DedupQuestionPage(questions=reads, next_cursor=next_cursor)


@router.post("/v1/dedup/questions/{question_id}/answer", response_model=DedupQuestionRead, responses=problem_doc(401, 403, 404, 409, 422))
def answer(question_id: IdPath, data: QuestionAnswer, request: Request, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> DedupQuestionRead:
    """Answer an open dedup question: `same` makes the later item of the pair a duplicate of the
    earlier, `distinct` rules the pair apart (never matched again); either is a ruling (stage
    `override`, audited) that every later curation run keeps. Refused: `not_found` (404),
    `already_answered` and `withdrawn` (409), and a ruling's own refusals (409, e.g. `reviewed`)."""
    revealed = revealed_to(session=session, principal=principal)
    rule = partial(answer_question, session=session, question_id=question_id, ruling=data.ruling, note=data.note, actor=principal.actor, token_id=principal.token_id, now=utcnow())
    guarded_ruling(session=session, item_ids=asked_pair(session, question_id), secret_key=secret_key, revealed=revealed, rule=rule)
    read, shown = one_question(session=session, question_id=question_id, secret_key=secret_key, revealed=revealed)
    if read is None:
        raise ProblemError(404, "Not Found", f"no dedup question with id {question_id}")
    _audit_shown(request, principal, shown)
    return read
