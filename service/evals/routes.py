"""Evals and their releases over HTTP: create, list, read and change evals (`admin` to change),
write the release of a period, and serve releases to eval pipelines: lists, manifests, released
items and JSONL exports.

Numbered releases never change, so their answers carry a strong ETag and `Cache-Control:
private, max-age=31536000, immutable` (private: every answer needs a token, so no shared cache may
keep one); `latest` is revalidated (`no-cache`). Sealed content goes
only to tokens with the `sealed` scope, is never cached (`no-store`), and each response counts
against the eval's per-release sealed-read budget (403 naming the budget once it is spent).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.common import Instant
from schemas.evals import Eval, EvalCreate, EvalRead, EvalUpdate, Split
from schemas.release import RefreshResult, Release, ReleaseItems, ReleaseManifest, ReleaseSummary
from service.core.auth import AdminPrincipal, Principal, ReadPrincipal, authorize_split
from service.core.db import write_session
from service.core.deps import SessionDep, SettingsDep
from service.core.problems import ProblemError, problem_doc
from service.evals.definitions import create_eval, list_evals, require_eval, to_read, update_eval
from service.evals.refresh import RefreshBusy, RefreshError, refresh_eval
from service.evals.releases import LATEST, SealedBudgetExceeded, consume_sealed_read, export_lines, list_releases, manifest, released_items, resolve_release, split_count, summary

eval_router = APIRouter(prefix="/v1/evals", tags=["evals"])


@eval_router.post("", status_code=201, response_model=EvalRead, responses=problem_doc(401, 403, 409, 422))
def create(data: EvalCreate, principal: AdminPrincipal, session: SessionDep, settings: SettingsDep) -> EvalRead:
    """Define an eval; it gets a canary GUID and a secret seal key (which never leaves the server)."""
    evaluation = create_eval(session=session, data=data, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor)
    return to_read(session, evaluation)


@eval_router.get("", response_model=list[EvalRead], responses=problem_doc(401, 403))
def list_all(_: ReadPrincipal, session: SessionDep) -> list[EvalRead]:
    """Every eval, by name, with its newest release number."""
    return [to_read(session, evaluation) for evaluation in list_evals(session=session)]


@eval_router.get("/{name}", response_model=EvalRead, responses=problem_doc(401, 403, 404))
def get_one(name: str, _: ReadPrincipal, session: SessionDep) -> EvalRead:
    """One eval's definition."""
    return to_read(session, require_eval(session=session, name=name))


@eval_router.patch("/{name}", response_model=EvalRead, responses=problem_doc(401, 403, 404, 409, 422))
def change(name: str, data: EvalUpdate, principal: AdminPrincipal, session: SessionDep) -> EvalRead:
    """Change an eval's settings; they apply from its next refresh."""
    evaluation = update_eval(session=session, evaluation=require_eval(session=session, name=name), data=data, actor=principal.actor)
    return to_read(session, evaluation)


@eval_router.post("/{name}/refresh", response_model=RefreshResult, responses={**problem_doc(401, 403, 404, 409, 422), 201: {"description": "A release was written."}})
def refresh(
    name: str,
    request: Request,
    response: Response,
    principal: AdminPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    at: Annotated[Instant | None, Query(description="Refresh as of this time (with zone); default now. The release is that of the period holding it.")] = None,
) -> RefreshResult:
    """Write the release of the schedule period holding `at` (201), or return the one that period
    already has (200): one release per period, however often this is called."""
    evaluation = require_eval(session=session, name=name)
    try:
        outcome = refresh_eval(request.app.state.engine, name=name, at=at, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor, wait_seconds=60)
    except RefreshBusy as exc:
        raise ProblemError(409, "Conflict", str(exc), headers={"Retry-After": "10"}) from exc
    except RefreshError as exc:
        raise ProblemError(409, "Conflict", str(exc)) from exc
    response.status_code = 201 if outcome.created else 200
    return RefreshResult(created=outcome.created, release=summary(evaluation, outcome.release))


release_router = APIRouter(prefix="/v1/evals/{name}/releases", tags=["releases"])
IMMUTABLE = "private, max-age=31536000, immutable"
REVALIDATE = "no-cache"
NO_STORE = "no-store"
JSONL = "application/x-ndjson"
STREAM_CHUNK = 64 * 1024
SplitQuery = Annotated[Split, Query(description="`dev` (read scope) or `sealed` (sealed scope; counted against the budget).")]
AfterQuery = Annotated[Instant | None, Query(description="Only items that occurred at or after this time (with zone): score only what a model cannot have seen.")]


def _etag(*parts: object) -> str:
    return '"' + hashlib.sha256("|".join("" if part is None else str(part) for part in parts).encode()).hexdigest()[:40] + '"'


def _cache_headers(ref: str, etag: str) -> dict[str, str]:
    return {"ETag": etag, "Cache-Control": REVALIDATE if ref == LATEST else IMMUTABLE}


def _not_modified(request: Request, headers: dict[str, str]) -> Response | None:
    wanted = request.headers.get("if-none-match", "")
    if wanted and (wanted.strip() == "*" or headers["ETag"] in [tag.strip() for tag in wanted.split(",")]):
        return Response(status_code=304, headers=headers)
    return None


def _consume(engine: Engine, evaluation: Eval, release: Release, principal: Principal, count: int) -> None:
    with write_session(engine) as session:
        try:
            consume_sealed_read(session=session, evaluation=evaluation, release=release, actor=principal.actor, item_count=count)
        except SealedBudgetExceeded as exc:
            raise ProblemError(403, "Sealed-read budget spent", str(exc), budget=exc.budget, used=exc.used) from exc


@release_router.get("", response_model=list[ReleaseSummary], responses=problem_doc(401, 403, 404))
def releases(name: str, _: ReadPrincipal, session: SessionDep) -> list[ReleaseSummary]:
    """The eval's releases, oldest first, each with its period, roots, counts and diff."""
    return list_releases(session=session, evaluation=require_eval(session=session, name=name))


@release_router.get("/{ref}", response_model=ReleaseManifest, responses=problem_doc(401, 403, 404, 422))
def release_manifest(name: str, ref: str, request: Request, _: ReadPrincipal, session: SessionDep) -> Response:
    """A release (`ref`: its number, or `latest`): period, canary, Merkle roots, diff, and every
    item as (item_id, split, content_digest). Sealed items show only their digest."""
    evaluation = require_eval(session=session, name=name)
    release = resolve_release(session=session, evaluation=evaluation, ref=ref)
    headers = _cache_headers(ref, _etag("manifest", evaluation.name, release.id, release.number, release.dev_root, release.sealed_root))
    if (cached := _not_modified(request, headers)) is not None:
        return cached
    body = manifest(session=session, evaluation=evaluation, release=release).model_dump_json()
    return Response(content=body, media_type="application/json", headers=headers)


@release_router.get("/{ref}/items", response_model=ReleaseItems, responses=problem_doc(401, 403, 404, 422))
def release_items(name: str, ref: str, request: Request, session: SessionDep, split: SplitQuery = Split.DEV, occurred_after: AfterQuery = None) -> Response:
    """The items of one split as released (frozen content), newest incident first. `sealed`
    needs the sealed scope and counts as one read against the eval's per-release budget."""
    principal = authorize_split(request, split)
    evaluation = require_eval(session=session, name=name)
    release = resolve_release(session=session, evaluation=evaluation, ref=ref)
    if split is Split.SEALED:
        items = released_items(session=session, release=release, split=split, occurred_after=occurred_after)
        _consume(request.app.state.engine, evaluation, release, principal, len(items))
        headers = {"Cache-Control": NO_STORE}
    else:
        headers = _cache_headers(ref, _etag("items", evaluation.name, release.id, release.number, release.dev_root, split.value, occurred_after))
        if (cached := _not_modified(request, headers)) is not None:
            return cached
        items = released_items(session=session, release=release, split=split, occurred_after=occurred_after)
    body = ReleaseItems(eval=evaluation.name, release=release.number, split=split.value, canary=release.canary, items=items).model_dump_json()
    return Response(content=body, media_type="application/json", headers=headers)


def _stream(engine: Engine, eval_name: str, release_id: int, split: Split, after: datetime | None) -> Iterator[str]:
    with Session(engine) as session:
        evaluation = require_eval(session=session, name=eval_name)
        release = session.get(Release, release_id)
        assert release is not None
        # Lines go out in chunks: one thread hop per line would make the stream slow.
        chunk: list[str] = []
        size = 0
        for line in export_lines(session=session, evaluation=evaluation, release=release, split=split, occurred_after=after):
            chunk.append(line)
            size += len(line)
            if size >= STREAM_CHUNK:
                yield "".join(chunk)
                chunk, size = [], 0
        if chunk:
            yield "".join(chunk)


@release_router.get("/{ref}/export.jsonl", responses={**problem_doc(401, 403, 404, 422), 200: {"content": {JSONL: {}}, "description": "A header line, then one item a line."}})
def export(name: str, ref: str, request: Request, session: SessionDep, split: SplitQuery = Split.DEV, occurred_after: AfterQuery = None) -> Response:
    """The split as JSON Lines, streamed: a header line with the eval's canary, the release, its
    Merkle roots (and for dev, the sealed items as id and digest only), then one item a line."""
    principal = authorize_split(request, split)
    evaluation = require_eval(session=session, name=name)
    release = resolve_release(session=session, evaluation=evaluation, ref=ref)
    assert release.id is not None
    filename = f"{evaluation.name}-{release.number}-{split.value}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if split is Split.SEALED:
        _consume(request.app.state.engine, evaluation, release, principal, split_count(session=session, release=release, split=split, occurred_after=occurred_after))
        headers["Cache-Control"] = NO_STORE
    else:
        headers |= _cache_headers(ref, _etag("export", evaluation.name, release.id, release.number, release.dev_root, release.sealed_root, occurred_after))
        if (cached := _not_modified(request, headers)) is not None:
            return cached
    return StreamingResponse(_stream(request.app.state.engine, evaluation.name, release.id, split, occurred_after), media_type=JSONL, headers=headers)


router = APIRouter()
router.include_router(eval_router)
router.include_router(release_router)
