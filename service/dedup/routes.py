"""Explaining and trying dedup: the items most like a stored item, and the verdict a text would get.

Both read the app's `DedupReader` index (rebuilt when curation decided something since it was
built) and never write. Only `/v1/dedup/check` runs the embedding model, in the thread pool and
behind the app's semaphore, never on the event loop (the model takes one call at a time, so a
check may wait for a curation batch to finish encoding); `/similar` uses the stored vectors (the
model is loaded for its id, never run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.engine import Engine
from sqlmodel import Session

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.index import MixedRecipeError
from curation.dedup.similarity import NotIndexed, check_text, similar_to_stored
from schemas.dedup import DedupCheck, DedupCheckResult, SimilarRead
from service.core.audit import audit_content_read
from service.core.auth import Principal, ReadPrincipal
from service.core.deps import IdPath, SecretKeyDep, SessionDep
from service.core.problems import ProblemError, problem_doc
from service.dedup.reader import DedupReader
from service.items.reads import require_item, similar_reads, withheld

router = APIRouter(tags=["dedup"])
MAX_K = 100
ITEM_DETAILS = ("matched_item", "kept_over", "best_jaccard", "best_embedding")


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
    the MinHash estimate. 409 while the item is not curated yet."""
    item, _source = require_item(session, item_id)
    try:
        ranked = similar_to_stored(session, lambda: _deduplicator(request.app.state.dedup_reader, session), item, k=k)
    except NotIndexed as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    reads = similar_reads(session=session, ranked=ranked, secret_key=secret_key)
    _audit(request, principal, "item.similar_read", reads)
    return reads


def _check(engine: Engine, reader: DedupReader, data: DedupCheck, k: int, secret_key: str) -> DedupCheckResult:
    with Session(engine) as session:
        deduplicator = _deduplicator(reader, session)
        verdict, ranked = check_text(session, deduplicator, title=data.title, input_text=data.input, reference=data.reference, identity=data.identity, k=k)
        details = dict(verdict.details)
        named = _named_items(details)
        hidden = withheld(session=session, item_ids=[*named.values(), *([verdict.matched] if verdict.matched is not None else [])], secret_key=secret_key)
        for key, item_id in named.items():
            if item_id in hidden:
                details.pop(key)
        matched = named.get("matched_item")
        sealed_match = verdict.matched in hidden or matched in hidden
        if sealed_match:
            details["matched"] = "an item of a sealed slice: which one is not said"
        return DedupCheckResult(
            status=verdict.status,
            stage=verdict.stage,
            score=verdict.score,
            duplicate_of=None if sealed_match else verdict.matched,
            matched_item=None if sealed_match else matched,
            details=details,
            similar=similar_reads(session=session, ranked=ranked, secret_key=secret_key),
        )


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


@router.post("/v1/dedup/check", response_model=DedupCheckResult, responses=problem_doc(401, 403, 409, 422))
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
    embedded in a worker thread, a few requests at a time."""
    async with request.app.state.dedup_semaphore:
        result = await run_in_threadpool(_check, request.app.state.engine, request.app.state.dedup_reader, data, k, secret_key)
    await run_in_threadpool(_audit, request, principal, "dedup.check_read", result.similar)
    return result
