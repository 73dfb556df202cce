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

import numpy as np
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.dedup import Deduplicator
from curation.embeddings import Vectors
from curation.fingerprints import from_bytes, sketch_texts
from curation.index import MixedRecipeError, SimilarityIndex
from curation.similarity import Similar, rank_similar
from ingest.normalisation import content_hash, dedup_text
from schemas.common import utcnow
from schemas.dedup import DedupCheck, DedupCheckResult, Embedding, ItemFingerprint, SimilarRead
from schemas.item import Item, ItemStatus
from schemas.source import Source
from service.api.deps import SessionDep
from service.api.items import audit_read, require_item, secret_key
from service.auth import Principal, ReadPrincipal
from service.curation import DedupReader
from service.problems import ProblemError, problem_doc
from service.visibility import sealed_item_ids

router = APIRouter(tags=["dedup"])
MAX_K = 100
CHECK_EXTERNAL_ID = "dedup-check"


def _deduplicator(reader: DedupReader, session: Session) -> Deduplicator:
    try:
        return reader.deduplicator(session)
    except MixedRecipeError as exc:
        raise ProblemError(409, "Conflict", f"the dedup index cannot be built: {exc}") from exc


def _reads(session: Session, ranked: Sequence[Similar], secret_key: str) -> list[SimilarRead]:
    """The ranked items as the API shows them; items of a sealed slice without external id and
    title (`service.visibility`)."""
    ids = [entry.item_id for entry in ranked]
    hidden = sealed_item_ids(session=session, item_ids=ids, secret_key=secret_key)
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(ids))).all()
    found = {item.id: (item, name) for item, name in rows}
    reads = []
    for entry in ranked:
        if entry.item_id not in found:
            continue  # deleted since the index was built
        item, source = found[entry.item_id]
        sealed = entry.item_id in hidden
        reads.append(
            SimilarRead(
                id=entry.item_id,
                external_id="" if sealed else item.external_id,
                source=source,
                title="" if sealed else item.title,
                occurred_at=item.occurred_at,
                status=item.status,
                score=entry.score,
                cosine=entry.cosine,
                title_cosine=entry.title_cosine,
                jaccard=entry.jaccard,
                lexical=entry.lexical,
                sealed=sealed,
            )
        )
    return reads


def _audit(request: Request, principal: Principal, action: str, reads: Sequence[SimilarRead]) -> None:
    """Audit a response that showed the titles of `reads` (sealed ones were withheld)."""
    audit_read(request, principal, [read.id for read in reads if not read.sealed], action)


def _stored_vectors(session: Session, item: Item, fingerprint: ItemFingerprint, index: SimilarityIndex) -> tuple[Vectors, Vectors]:
    """The item's body and title embeddings as curation stored them. An exact duplicate was never
    embedded: it takes those of an indexed item with the same normalised text."""
    if fingerprint.body_key and fingerprint.title_key:
        rows = session.exec(select(Embedding).where(Embedding.model_id == index.model_id, col(Embedding.text_hash).in_([fingerprint.body_key, fingerprint.title_key]))).all()
        vectors = {row.text_hash: np.frombuffer(row.vector, dtype=np.float32) for row in rows}
        if fingerprint.body_key in vectors and fingerprint.title_key in vectors:
            return vectors[fingerprint.body_key], vectors[fingerprint.title_key]
    for other in index.exact(item.content_hash):
        if other != item.id:
            position = index.position[other]
            return index.body.view[position], index.title.view[position]
    raise ProblemError(409, "Conflict", f"item {item.id} has no stored embedding under {index.model_id}; run `goldenset curate` to re-fingerprint it")


@router.get("/v1/items/{item_id}/similar", response_model=list[SimilarRead], responses=problem_doc(401, 403, 404, 409))
def similar(
    item_id: int, request: Request, principal: ReadPrincipal, session: SessionDep, k: Annotated[int, Query(ge=1, le=MAX_K, description="How many items.")] = 10
) -> list[SimilarRead]:
    """The `k` items most like this one among those that occurred before it (never itself), best
    first: `score` fuses the body `cosine`, `title_cosine` and `lexical` similarity; `jaccard` is
    the MinHash estimate. 409 while the item is not curated yet."""
    item, _source = require_item(session, item_id)
    fingerprint = session.get(ItemFingerprint, item_id)
    if item.status == ItemStatus.CANDIDATE.value or fingerprint is None:
        raise ProblemError(409, "Conflict", f"item {item_id} is not curated yet (status {item.status}); the next curation run decides it (`goldenset curate`)")
    deduplicator = _deduplicator(request.app.state.dedup_reader, session)
    index = deduplicator.index
    assert index is not None
    if fingerprint.recipe != deduplicator.recipe.key:
        raise ProblemError(409, "Conflict", f"item {item_id} was fingerprinted with recipe {fingerprint.recipe}, not {deduplicator.recipe.key}; re-fingerprint it")
    body, title = _stored_vectors(session, item, fingerprint, index)
    sketch = from_bytes(fingerprint.minhash, deduplicator.recipe)
    ranked = rank_similar(
        session, index, text=dedup_text(item.title, item.input), body=body, title=title, sketch=sketch, k=k, before=item.occurred_at.timestamp(), exclude=[item_id]
    )
    reads = _reads(session, ranked, secret_key(request))
    _audit(request, principal, "item.similar_read", reads)
    return reads


def _check(engine: Engine, reader: DedupReader, data: DedupCheck, k: int, secret_key: str) -> DedupCheckResult:
    with Session(engine) as session:
        deduplicator = _deduplicator(reader, session)
        index = deduplicator.index
        assert index is not None
        body, title = deduplicator.embed_one(data.title, data.input)
        text = dedup_text(data.title, data.input)
        sketch = sketch_texts([text], deduplicator.recipe)[0]
        # A transient item: never added to the session, so nothing is stored.
        probe = Item(
            source_id=0,
            external_id=CHECK_EXTERNAL_ID,
            occurred_at=utcnow(),
            title=data.title,
            input=data.input,
            reference=data.reference,
            content_hash=content_hash(data.title, data.input, data.reference),
            identity_key=data.identity,
            record_digest="",
        )
        verdict = deduplicator.judge(probe, sketch, body, title)
        ranked = rank_similar(session, index, text=text, body=body, title=title, sketch=sketch, k=k)
        matched = verdict.details.get("matched_item")
        return DedupCheckResult(
            status=verdict.status,
            stage=verdict.stage,
            score=verdict.score,
            duplicate_of=verdict.matched,
            matched_item=matched if isinstance(matched, int) else None,
            details=verdict.details,
            similar=_reads(session, ranked, secret_key),
        )


@router.post("/v1/dedup/check", response_model=DedupCheckResult, responses=problem_doc(401, 403, 409, 422))
async def check(
    data: DedupCheck, request: Request, principal: ReadPrincipal, k: Annotated[int, Query(ge=1, le=MAX_K, description="How many similar items.")] = 10
) -> DedupCheckResult:
    """The verdict curation would give this text now (against every curated item), with the `k`
    most similar items. Nothing is stored. The text is embedded in a worker thread, a few
    requests at a time."""
    async with request.app.state.dedup_semaphore:
        result = await run_in_threadpool(_check, request.app.state.engine, request.app.state.dedup_reader, data, k, secret_key(request))
    await run_in_threadpool(_audit, request, principal, "dedup.check_read", result.similar)
    return result
