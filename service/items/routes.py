"""Items over HTTP: filtered, cursor-paginated lists, single items and their revisions (`read`),
curators' edits (`curate`) and review decisions on the items dedup kept as unique, and their
undoing (`curate`).

Items in (or bound for) a sealed slice are listed without their content (`service.items.reads`);
editing one needs the `sealed` scope as well, and its revisions show text only to that scope.
Every response that serves item content is audited (`item.read`, `item.revisions_read`,
`item.sealed_revisions_read`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlmodel import Session

from curation.editing import edit_item, item_revisions
from curation.review import decide, review_batch, undo_review
from schemas.audit import AuditAction
from schemas.common import Instant, utcnow
from schemas.item import ItemDetail, ItemEdit, ItemPage, ItemRead, ItemRevisions, ItemStatus
from schemas.review import ApproveBody, Decision, RejectBody, ReviewBatch, ReviewOutcome, ReviewUndone
from schemas.token import Scope
from service.core.audit import audit_content_read
from service.core.auth import CuratePrincipal, Principal, ReadPrincipal
from service.core.deps import IdPath, SecretKeyDep, SessionDep, WriteSessionDep, after_commit
from service.core.problems import ProblemError, problem_doc
from service.evals.sealed_review import unread_by
from service.items.reads import answer_after_write, item_detail, item_page, require_item
from service.items.shaping import withheld

router = APIRouter(prefix="/v1/items")
MAX_PAGE = 500


@router.get("", response_model=ItemPage, responses=problem_doc(401, 403, 422), tags=["items"])
def list_items(
    principal: ReadPrincipal,
    request: Request,
    session: SessionDep,
    secret_key: SecretKeyDep,
    source: str | None = None,
    status: ItemStatus | None = None,
    occurred_after: Annotated[Instant | None, Query(description="Only items that occurred at or after this time (with zone).")] = None,
    occurred_before: Annotated[Instant | None, Query(description="Only items that occurred before this time (with zone).")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> ItemPage:
    """List items, newest incident first; pass `next_cursor` as `cursor` for the next page. Items
    in (or bound for) a sealed slice are not listed, so a page may hold fewer than `limit` items."""
    page, next_cursor = item_page(
        session=session,
        secret_key=secret_key,
        source=source,
        status=status,
        occurred_after=occurred_after,
        occurred_before=occurred_before,
        limit=limit,
        cursor=cursor,
    )
    reads = [shown.read() for shown in page]
    audit_content_read(request, principal, [read.id for read in reads])
    return ItemPage(items=reads, next_cursor=next_cursor)


@router.post("/review", response_model=ReviewOutcome, responses=problem_doc(401, 403, 422), tags=["review"])
def review(data: ReviewBatch, principal: CuratePrincipal, session: WriteSessionDep, secret_key: SecretKeyDep) -> ReviewOutcome:
    """Approve or reject many items at once; each refused decision is reported by position and
    reason (`not_found`, `not_reviewable`, `reason_required`, `unread`: an item in or bound for a
    sealed slice approved without the `sealed` scope) and the others are kept."""
    approving = [entry.item_id for entry in data.decisions if entry.decision is Decision.APPROVE]
    unread = unread_by(session=session, principal=principal, item_ids=approving, secret_key=secret_key, through_window=False)
    return review_batch(session=session, decisions=data.decisions, actor=principal.actor, now=utcnow(), unread=unread)


@router.api_route("/review", methods=["GET", "PUT", "PATCH", "DELETE"], include_in_schema=False)
def review_other_methods(principal: CuratePrincipal) -> None:
    """`/v1/items/review` takes only POST; without this route its GET and PATCH would be taken for
    `/v1/items/{item_id}` with the id `review` (and answered 422)."""
    raise ProblemError(405, "Method Not Allowed", "/v1/items/review takes only POST: send the decisions as a JSON body", headers={"Allow": "POST"})


@router.get("/{item_id}", response_model=ItemDetail, responses=problem_doc(401, 403, 404), tags=["items"])
def get_item(item_id: IdPath, principal: ReadPrincipal, request: Request, session: SessionDep, secret_key: SecretKeyDep) -> ItemDetail:
    """One item, with `dedup`: `status`, `duplicate_of`, `stage` (exact, minhash, embedding,
    characters, override, none), `score` and `decided_at` of curation's newest decision about it,
    and its `explanation` (the rule, the threshold cleared and the margin, the item matched, the
    best near-verbatim and paraphrase candidates, the matches refused and why, the fields the
    model cannot read; items of a sealed slice named only as sealed); and `overrides`, people's
    rulings naming it. A sealed item comes without its content, dates, content hash, dedup
    details and rulings (`sealed: true`)."""
    detail = _detail(session, item_id, secret_key)
    if not detail.sealed:
        audit_content_read(request, principal, [item_id])
    return detail


def _detail(session: Session, item_id: int, secret_key: str) -> ItemDetail:
    """The item as `GET /v1/items/{id}` shows it (404 when there is none)."""
    return item_detail(session, item_id, secret_key=secret_key)


@router.patch("/{item_id}", response_model=ItemDetail, responses=problem_doc(401, 403, 404, 409, 413, 422), tags=["items"])
def edit(item_id: IdPath, data: ItemEdit, principal: CuratePrincipal, request: Request, session: WriteSessionDep, secret_key: SecretKeyDep) -> ItemDetail:
    """Edit an item's `title`, `input`, `reference` or `tags` (those left out stay as they are),
    with a `note` saying why: a new revision by the token's owner, kept with the content before it
    (`GET /v1/items/{id}/revisions`). A changed title, input or reference is decided by dedup
    again and then reviewed again (a decided item goes back to `candidate`; a tags-only edit keeps
    its status); releases keep the text they froze. An item in (or bound for) a sealed slice needs
    the `sealed` scope too. Audited (`item.edit`). Refused: `note_required`, `empty_input`,
    `bad_character` and `no_change` (422), `not_found` (404), `reference_item` and `retired` (409)."""
    if item_id in withheld(session=session, item_ids=[item_id], secret_key=secret_key) and Scope.SEALED.value not in principal.scopes:
        raise ProblemError(403, "Forbidden", f"item {item_id} is in (or bound for) an eval's sealed slice: editing it needs the 'sealed' scope as well as 'curate'")
    item = edit_item(
        session=session, item_id=item_id, title=data.title, input=data.input, reference=data.reference, tags=data.tags, note=data.note, actor=principal.actor, now=utcnow()
    )
    if item.status == ItemStatus.CANDIDATE.value:
        after_commit(request, request.app.state.curation_trigger.request)
    detail = _detail(session, item_id, secret_key)
    if not detail.sealed:
        audit_content_read(request, principal, [item_id])
    return detail


@router.get("/{item_id}/revisions", response_model=ItemRevisions, responses=problem_doc(401, 403, 404), tags=["items"])
def revisions(item_id: IdPath, principal: ReadPrincipal, request: Request, session: SessionDep, secret_key: SecretKeyDep) -> ItemRevisions:
    """Every revision of an item, oldest first: `revision`, `kind` (`source`: a changed record;
    `curator`: an edit; `source_held`: a change the source proposed to an edited item, which kept
    the curator's text), `at`, `actor`, `note`, and `changes`, each `{field, before, after}` for the
    title, input, reference and tags. For an item in (or bound for) a sealed slice (`sealed: true`)
    the dates, notes and values are withheld unless the token has the `sealed` scope."""
    item, _source = require_item(session, item_id)
    sealed = item_id in withheld(session=session, item_ids=[item_id], secret_key=secret_key)
    shown = Scope.SEALED.value in principal.scopes
    answer = item_revisions(session, item, sealed=sealed, shown=shown)
    if shown or not sealed:
        audit_content_read(request, principal, [item_id], AuditAction.ITEM_SEALED_REVISIONS_READ if sealed else AuditAction.ITEM_REVISIONS_READ)
    return answer


def _decide(request: Request, principal: Principal, session: Session, secret_key: str, item_id: int, decision: Decision, reason: str) -> ItemRead:
    """Apply a review decision and answer the item as it is now, shaped for the reader: an item in
    (or bound for) a sealed slice comes without its content, as `GET` shows it."""
    unread = unread_by(session=session, principal=principal, item_ids=[item_id], secret_key=secret_key, through_window=False) if decision is Decision.APPROVE else set()
    decide(session=session, item_id=item_id, decision=decision, reason=reason, actor=principal.actor, now=utcnow(), unread=unread)
    return answer_after_write(request, principal, session, item_id, secret_key=secret_key)


@router.post("/{item_id}/approve", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409), tags=["review"])
def approve(item_id: IdPath, principal: CuratePrincipal, request: Request, session: WriteSessionDep, secret_key: SecretKeyDep, data: ApproveBody | None = None) -> ItemRead:
    """Approve a unique item for the evals that take its source (409 unless it is unique). The
    answer is the item as `GET /v1/items/{id}` shows it: without content when it is sealed."""
    return _decide(request, principal, session, secret_key, item_id, Decision.APPROVE, data.reason if data else "")


@router.post("/{item_id}/reject", response_model=ItemRead, responses=problem_doc(401, 403, 404, 409, 422), tags=["review"])
def reject(item_id: IdPath, data: RejectBody, principal: CuratePrincipal, request: Request, session: WriteSessionDep, secret_key: SecretKeyDep) -> ItemRead:
    """Reject a unique item, with the reason (409 unless it is unique); it never enters an eval.
    The answer is the item as `GET /v1/items/{id}` shows it: without content when it is sealed."""
    return _decide(request, principal, session, secret_key, item_id, Decision.REJECT, data.reason)


@router.post("/{item_id}/undo-review", response_model=ReviewUndone, responses=problem_doc(401, 403, 404, 409), tags=["review"])
def undo(item_id: IdPath, principal: CuratePrincipal, session: WriteSessionDep) -> ReviewUndone:
    """Undo the newest approval or rejection of an item, taken by this token's owner: the item is
    `unique` again and back in the review queue, and `item.review_undone` is audited with what was
    undone. Refused: `not_found` (404); `not_reviewed` (409: no decision in force, or undone
    already), `released` (409: a release has taken the decision into account since, and keeps it),
    `not_yours` (409: someone else took it)."""
    return undo_review(session=session, item_id=item_id, actor=principal.actor, now=utcnow())
