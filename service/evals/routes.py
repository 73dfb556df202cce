"""Evals and their releases over HTTP: create, list, read and change evals (`admin` to change),
write the release of a period, serve releases to eval pipelines (lists, manifests, released items
and JSONL exports), and the eval's review queue with its sealed review window (`curate`).

Numbered releases never change, so their answers carry a strong ETag and `Cache-Control:
private, max-age=31536000, immutable` (private: every answer needs a token, so no shared cache may
keep one); `latest` is revalidated (`no-cache`). The one change a numbered release can see is its
withdrawal (admin): from then on its answers say so, carry another ETag and are revalidated
(`no-cache`); a client that cached it before learns of it from the release list or `latest`. Sealed content goes
only to tokens with the `sealed` scope, is never cached (`no-store`), and each response counts
against the eval's per-release sealed-read budget (403 naming the budget once it is spent).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.engine import Engine
from sqlmodel import Session

from schemas.common import MAX_COUNT, MAX_ROW_ID, Instant, utcnow
from schemas.evals import Eval, EvalCreate, EvalRead, EvalUpdate, Split
from schemas.release import RefreshResult, Release, ReleaseItems, ReleaseManifest, ReleaseSummary, WithdrawBody
from schemas.review import ReviewQueuePage, SealedReviewWindow
from schemas.team_review import QueueView
from schemas.token import Scope
from service.core.auth import AdminPrincipal, CuratePrincipal, Principal, ReadPrincipal, authorize_split, require_any
from service.core.deps import SecretKeyDep, SessionDep, SettingsDep, WriteSessionDep, hand_back_connection
from service.core.openapi import JSONL_MEDIA_TYPE
from service.core.problems import ProblemError, problem_doc
from service.evals.content_cache import CachedContent, ReleaseContentCache, release_generation
from service.evals.definitions import create_eval, list_evals, require_eval, to_read, update_eval
from service.evals.refresh import FuturePeriod, NothingToRelease, RefreshBusy, RefreshError, refresh_eval, remove_eval, withdraw
from service.evals.releases import LATEST, SealedBudgetExceeded, export_stream, list_releases, manifest, released_items, resolve_release, split_count, summary, take_sealed_read
from service.evals.review_queue import QueueFilters
from service.evals.scale_routes import scale_router
from service.evals.sealed_review import SealedReviewBudgetSpent, Viewer, open_sealed_review_window, serve_queue
from service.evals.team_routes import team_router
from service.evals.team_views import default_view, view_conditions

eval_router = APIRouter(prefix="/v1/evals", tags=["evals"])
NO_STORE = "no-store"


@eval_router.post("", status_code=201, response_model=EvalRead, responses=problem_doc(401, 403, 409, 422, 503))
def create(data: EvalCreate, principal: AdminPrincipal, session: WriteSessionDep, settings: SettingsDep) -> EvalRead:
    """Define an eval; it gets a canary GUID and a secret seal key (which never leaves the server).
    409 when the name is taken (by a request racing this one too)."""
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
def change(name: str, data: EvalUpdate, principal: AdminPrincipal, session: WriteSessionDep) -> EvalRead:
    """Change an eval's settings; they apply from its next refresh."""
    evaluation = update_eval(session=session, evaluation=require_eval(session=session, name=name), data=data, actor=principal.actor)
    return to_read(session, evaluation)


@eval_router.delete("/{name}", status_code=204, responses=problem_doc(401, 403, 404, 409))
def delete(name: str, request: Request, principal: AdminPrincipal) -> Response:
    """Delete an eval with no release in force (none yet, or every one withdrawn) and no runs, with its seal key and withdrawn releases (409 otherwise, naming what keeps it)."""
    try:
        remove_eval(request.app.state.engine, name=name, actor=principal.actor, wait_seconds=60)
    except RefreshBusy as exc:
        raise ProblemError(409, "Conflict", str(exc), headers={"Retry-After": "10"}, reason="busy") from exc
    return Response(status_code=204)


@eval_router.post("/{name}/refresh", response_model=RefreshResult, responses={**problem_doc(401, 403, 404, 409, 422), 201: {"description": "A release was written."}})
def refresh(
    name: str,
    request: Request,
    response: Response,
    principal: AdminPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    at: Annotated[Instant | None, Query(description="Refresh as of this time (with zone); default now. The release is that of the period holding it.")] = None,
    allow_future: Annotated[
        bool,
        Query(description="Allow a period that starts after the current one (refused otherwise, 422: its release would become `latest` and hold back every period before it)."),
    ] = False,
) -> RefreshResult:
    """Write the release of the schedule period holding `at` (201), or return the one that period
    already has (200): one release per period, however often this is called. A period after the
    current one needs `allow_future=true` (422 otherwise). 409 when another refresh held the eval
    for a minute (`reason` `busy`, with Retry-After) or the period cannot get a release
    (`cannot_refresh`: one before the newest release's, or whose release was withdrawn)."""
    evaluation = require_eval(session=session, name=name)
    hand_back_connection(session)  # the refresh writes on connections of its own
    try:
        outcome = refresh_eval(
            request.app.state.engine, name=name, at=at, secret_key=settings.secret_key.get_secret_value(), actor=principal.actor, wait_seconds=60, allow_future=allow_future
        )
    except FuturePeriod as exc:
        raise ProblemError(422, "Invalid request", str(exc), reason="future_period") from exc
    except RefreshBusy as exc:
        raise ProblemError(409, "Conflict", str(exc), headers={"Retry-After": "10"}, reason="busy") from exc
    except NothingToRelease as exc:
        raise ProblemError(409, "Conflict", str(exc), reason="nothing_to_release") from exc
    except RefreshError as exc:
        raise ProblemError(409, "Conflict", str(exc), reason="cannot_refresh") from exc
    response.status_code = 201 if outcome.created else 200
    return RefreshResult(created=outcome.created, release=summary(evaluation, outcome.release))


MAX_QUEUE_PAGE = 500
MAX_QUEUE_TEXT = 200


@eval_router.get("/{name}/review-queue", response_model=ReviewQueuePage, responses=problem_doc(401, 403, 404, 422), tags=["review"])
def review_queue(
    name: str,
    request: Request,
    response: Response,
    principal: CuratePrincipal,
    session: SessionDep,
    secret_key: SecretKeyDep,
    source: Annotated[str | None, Query(description="Only this one of the eval's sources.")] = None,
    occurred_after: Annotated[Instant | None, Query(description="Only items that occurred at or after this time (with zone).")] = None,
    occurred_before: Annotated[Instant | None, Query(description="Only items that occurred before this time (with zone).")] = None,
    text: Annotated[str | None, Query(min_length=1, max_length=MAX_QUEUE_TEXT, description="Only items whose title or input holds this (any case).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_QUEUE_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_COUNT)] = 0,
    view: Annotated[QueueView | None, Query(description="mine (what waits for this reviewer's vote; the default on an eval reviewed by a team), disputed, or all.")] = None,
) -> ReviewQueuePage:
    """The items of the eval's sources waiting for review (on an eval with automatic approval, not
    those it already took; on an eval reviewed by a team, the `view` asked for), oldest incident first: one page from
    `offset`, each with its `position` of the `total`, its dedup decision, and flags for a sealed
    slice and for a source change after a curator's edit. Sealed-bound items come by metadata only
    (`withheld`) unless this token opened a sealed review window (`POST .../sealed-review`); every
    entry served with content is audited."""
    evaluation = require_eval(session=session, name=name)
    if source is not None and source not in evaluation.sources:
        raise ProblemError(422, "Invalid request", f"eval {name!r} does not take source {source!r}; it takes: {', '.join(evaluation.sources)}", reason="source_not_in_eval")
    viewer = Viewer(actor=principal.actor, token_id=principal.token_id, may_see_sealed=Scope.SEALED.value in principal.scopes, endpoint=f"{request.method} {request.url.path}")
    filters = QueueFilters(occurred_after=occurred_after, occurred_before=occurred_before, text=text)
    sources = evaluation.sources if source is None else [source]
    narrowed = view_conditions(evaluation, view or default_view(evaluation), actor=principal.actor, now=utcnow())
    hand_back_connection(session)  # the queue reads and audits on connections of its own
    page = serve_queue(
        request.app.state.engine, viewer=viewer, sources=sources, secret_key=secret_key, filters=filters, limit=limit, offset=offset, evaluation=evaluation, narrowed=narrowed
    )
    response.headers["Cache-Control"] = NO_STORE
    return page


@eval_router.post("/{name}/sealed-review", response_model=SealedReviewWindow, responses={**problem_doc(401, 403, 404), 201: {"description": "A window opened."}}, tags=["review"])
def sealed_review(name: str, request: Request, response: Response, principal: CuratePrincipal, session: SessionDep, settings: SettingsDep) -> SealedReviewWindow:
    """Open this token's sealed review window on the eval (`curate` and `sealed` scopes): for
    GOLDENSET_SEALED_RUN_READ_HOURS its review queue shows sealed-bound items in full, each read
    audited. Opening takes one unit of the eval's sealed-read budget for its coming release (403
    naming the budget once spent); while the window is open, asking again returns it (200)."""
    if Scope.SEALED.value not in principal.scopes:
        raise ProblemError(403, "Forbidden", f"a sealed review window needs the '{Scope.SEALED.value}' scope; the token has: {', '.join(sorted(principal.scopes))}")
    evaluation = require_eval(session=session, name=name)
    hand_back_connection(session)  # the window opens, or its refusal is audited, in units of work of their own
    try:
        window = open_sealed_review_window(
            request.app.state.engine, evaluation=evaluation, token_id=principal.token_id, actor=principal.actor, hours=settings.sealed_run_read_hours
        )
    except SealedReviewBudgetSpent as exc:
        raise ProblemError(403, "Sealed-read budget spent", str(exc), budget=exc.budget, used=exc.used) from exc
    response.status_code = 201 if window.opened else 200
    response.headers["Cache-Control"] = NO_STORE
    return window


# The split asked for decides between the two (`authorize_split`); a token with neither is refused before anything is read.
READ_OR_SEALED = require_any(Scope.READ, Scope.SEALED)
release_router = APIRouter(prefix="/v1/evals/{name}/releases", tags=["releases"])
IMMUTABLE = "private, max-age=31536000, immutable"
REVALIDATE = "no-cache"
JSONL = JSONL_MEDIA_TYPE
SplitQuery = Annotated[Split, Query(description="`dev` (read scope) or `sealed` (sealed scope; counted against the budget).")]
AfterQuery = Annotated[Instant | None, Query(description="Only items that occurred at or after this time (with zone): score only what a model cannot have seen.")]


def _etag(*parts: object) -> str:
    return '"' + hashlib.sha256("|".join("" if part is None else str(part) for part in parts).encode()).hexdigest()[:40] + '"'


def _cache_headers(ref: str, release: Release, etag: str) -> dict[str, str]:
    return {"ETag": etag, "Cache-Control": REVALIDATE if ref == LATEST or release.withdrawn_at is not None else IMMUTABLE}


def _not_modified(request: Request, headers: dict[str, str]) -> Response | None:
    wanted = request.headers.get("if-none-match", "")
    if wanted and (wanted.strip() == "*" or headers["ETag"] in [tag.strip() for tag in wanted.split(",")]):
        return Response(status_code=304, headers=headers)
    return None


def _consume(engine: Engine, request_session: Session, evaluation: Eval, release: Release, principal: Principal, count: int) -> None:
    """Take `count` sealed items from the release's budget in a unit of work of its own
    (`take_sealed_read`: committed before the content is served, a refusal audited), once the
    request's session has handed its connection back (no request holds two)."""
    hand_back_connection(request_session)
    try:
        take_sealed_read(engine, evaluation=evaluation, release=release, actor=principal.actor, token_id=principal.token_id, item_count=count)
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
    headers = _cache_headers(ref, release, _etag("manifest", evaluation.name, release.id, release.number, release.dev_root, release.sealed_root, release.withdrawn_at))
    if (cached := _not_modified(request, headers)) is not None:
        return cached
    body = manifest(session=session, evaluation=evaluation, release=release).model_dump_json()
    return Response(content=body, media_type="application/json", headers=headers)


@release_router.get("/{ref}/items", response_model=ReleaseItems, responses=problem_doc(401, 403, 404, 422), dependencies=[Depends(READ_OR_SEALED)])
def release_items(name: str, ref: str, request: Request, session: SessionDep, split: SplitQuery = Split.DEV, occurred_after: AfterQuery = None) -> Response:
    """The items of one split as released (frozen content), newest incident first. `sealed`
    needs the sealed scope and counts as one read against the eval's per-release budget."""
    principal = authorize_split(request, split)
    if split is Split.SEALED:
        evaluation = require_eval(session=session, name=name)
        release = resolve_release(session=session, evaluation=evaluation, ref=ref)
        content = _release_items_answer(session, evaluation, release, split, occurred_after, {"Cache-Control": NO_STORE})
        _consume(request.app.state.engine, session, evaluation, release, principal, len(content.item_ids))
    else:
        # A dev answer is the same for every reader while no release is written or withdrawn.
        cache: ReleaseContentCache = request.app.state.release_content_cache
        key = _dev_answer_key(session, "items", name, ref, occurred_after)
        content = cache.get_or_build(key, lambda: _dev_items_answer(session, name, ref, split, occurred_after))
        if (cached := _not_modified(request, content.headers)) is not None:
            return cached
    request.state.release_read = content
    return Response(content=content.body, media_type="application/json", headers=content.headers)


def _dev_answer_key(session: Session, route: str, name: str, ref: str, occurred_after: Instant | None) -> str:
    """The cache key of a dev answer: the same for every reader while no release is written or withdrawn."""
    return f"{route}|{name}|{ref}|{Split.DEV.value}|{occurred_after}|{release_generation(session)}"


def _dev_items_answer(session: Session, name: str, ref: str, split: Split, occurred_after: Instant | None) -> CachedContent:
    evaluation = require_eval(session=session, name=name)
    release = resolve_release(session=session, evaluation=evaluation, ref=ref)
    headers = _cache_headers(ref, release, _etag("items", evaluation.name, release.id, release.number, release.dev_root, split.value, occurred_after, release.withdrawn_at))
    return _release_items_answer(session, evaluation, release, split, occurred_after, headers)


def _release_items_answer(session: Session, evaluation: Eval, release: Release, split: Split, occurred_after: Instant | None, headers: dict[str, str]) -> CachedContent:
    items = released_items(session=session, release=release, split=split, occurred_after=occurred_after)
    body = ReleaseItems(eval=evaluation.name, release=release.number, split=split.value, canary=release.canary, items=items).model_dump_json().encode()
    return CachedContent(body=body, item_ids=tuple(item.item_id for item in items), release_number=release.number, headers=headers)


@release_router.get(
    "/{ref}/export.jsonl",
    responses={**problem_doc(401, 403, 404, 422), 200: {"content": {JSONL: {}}, "description": "One item a line (schema: ExportRow)."}},
    dependencies=[Depends(READ_OR_SEALED)],
)
def export(name: str, ref: str, request: Request, session: SessionDep, split: SplitQuery = Split.DEV, occurred_after: AfterQuery = None) -> Response:
    """The split as JSON Lines, streamed: one item a line and nothing else (`ExportRow`: the
    released item, its split and digest, and `metadata` with the eval's canary, the release and
    the item's own metadata as JSON text), so every line loads as one row. The Merkle roots and
    the sealed items' digests are in the release's manifest (`GET .../releases/{ref}`)."""
    principal = authorize_split(request, split)
    cache: ReleaseContentCache = request.app.state.release_content_cache
    key = _dev_answer_key(session, "export", name, ref, occurred_after) if split is Split.DEV else ""
    if key and (content := cache.get(key)) is not None:
        if (cached := _not_modified(request, content.headers)) is not None:
            return cached
        request.state.release_read = content
        return Response(content=content.body, media_type=JSONL, headers=content.headers)
    evaluation = require_eval(session=session, name=name)
    release = resolve_release(session=session, evaluation=evaluation, ref=ref)
    assert release.id is not None
    filename = f"{evaluation.name}-{release.number}-{split.value}.jsonl"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if split is Split.SEALED:
        _consume(request.app.state.engine, session, evaluation, release, principal, split_count(session=session, release=release, split=split, occurred_after=occurred_after))
        headers["Cache-Control"] = NO_STORE
        sealed_lines = export_stream(request.app.state.engine, eval_name=evaluation.name, release_id=release.id, split=split, occurred_after=occurred_after)
        return StreamingResponse(sealed_lines, media_type=JSONL, headers=headers)
    etag = _etag("export", evaluation.name, release.id, release.number, release.dev_root, release.sealed_root, occurred_after, release.withdrawn_at)
    headers |= _cache_headers(ref, release, etag)
    if (cached := _not_modified(request, headers)) is not None:
        return cached
    served: list[int] = []
    lines = export_stream(request.app.state.engine, eval_name=evaluation.name, release_id=release.id, split=split, occurred_after=occurred_after, served=served)
    answer = CachedContent(body=b"", item_ids=(), release_number=release.number, headers=headers)
    return StreamingResponse(_kept(lines, cache, key, answer, served), media_type=JSONL, headers=headers)


def _kept(chunks: Iterator[str], cache: ReleaseContentCache, key: str, answer: CachedContent, served: list[int]) -> Iterator[bytes]:
    """`chunks` as they come; once all were sent, the whole answer (`answer` with this body and the
    `served` ids) goes into `cache` when it is small enough to be kept (a large export streams
    without being held)."""
    parts: list[bytes] | None = []
    size = 0
    for chunk in chunks:
        data = chunk.encode()
        if parts is not None:
            size += len(data)
            parts.append(data)
            if size * 4 > cache.max_bytes:
                parts = None
        yield data
    if parts is not None:
        cache.put(key, dataclasses.replace(answer, body=b"".join(parts), item_ids=tuple(served)))


@release_router.post("/{number}/withdraw", response_model=ReleaseSummary, responses=problem_doc(401, 403, 404, 409, 422))
def withdraw_one(name: str, number: Annotated[int, Path(ge=1, le=MAX_ROW_ID)], data: WithdrawBody, request: Request, principal: AdminPrincipal) -> ReleaseSummary:
    """Withdraw a release (admin; 409 when it is withdrawn already or a newer release is in force):
    it stays readable by number, marked withdrawn, and no longer counts as `latest` nor for the
    order of periods; its membership changes are undone and audited (`release.withdrawn`)."""
    try:
        release = withdraw(request.app.state.engine, name=name, number=number, actor=principal.actor, reason=data.reason, wait_seconds=60)
    except RefreshBusy as exc:
        raise ProblemError(409, "Conflict", str(exc), headers={"Retry-After": "10"}, reason="busy") from exc
    with Session(request.app.state.engine) as session:
        return summary(require_eval(session=session, name=name), release)


router = APIRouter()
router.include_router(eval_router)
router.include_router(team_router)
router.include_router(scale_router)
router.include_router(release_router)
