"""Pages: evals and their releases. The list of evals; an eval's releases with its settings (which
an admin changes here); a release's manifest with its verification and its dev items; the JSONL
export of its dev split and its manifest JSON; and the difference between any two releases.

Every page needs the `read` scope. Sealed items appear only as counts to a person without the
`sealed` scope, and as ids without content to one with it (sealed content goes out only through
budgeted reads). Each page or export that shows item content (titles, dates, the export's lines)
leaves an audit event naming the items, as the API's release reads do
(`service.evals.read_audit`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from starlette.background import BackgroundTask

from curation.review_backlog import waiting_for_review
from schemas.audit import AuditAction
from schemas.common import MAX_COUNT
from schemas.evals import ApprovalPolicy, Eval, EvalUpdate, Split
from schemas.release import Release
from schemas.token import Scope
from service.core.audit import record_read
from service.core.auth import Principal
from service.core.deps import WriteSessionDep, hand_back_connection
from service.core.openapi import JSONL_MEDIA_TYPE
from service.core.problems import ProblemError
from service.evals.definitions import get_eval, latest_release_number, list_evals, seal_keys, update_eval
from service.evals.releases import export_stream, list_releases, manifest, release_rows, resolve_release, sealed_reads_used, verify_release
from service.evals.scale import scale_if_fitted
from service.ui.pages import UiRefused, done, need, page, secret_key, ui_router
from service.ui.refusals import shows_refusal
from service.ui.release_composition import composition_of, linking_of, tables
from service.ui.release_diff import LISTED, dev_items, diff_releases

router = ui_router()

JSONL = JSONL_MEDIA_TYPE
SETTINGS = {
    "target_size": "Target size",
    "schedule": "Schedule",
    "approval_policy": "Approval policy",
    "max_age_days": "Maximum age (days)",
    "sealed_fraction": "Sealed fraction",
    "sealed_read_budget": "Sealed-read budget",
    "linking_share": "Linking share",
    "balance_composition": "Balanced composition",
    "sources": "Sources",
}
"""The settings the form changes, by field, with their labels."""


def _reader(request: Request) -> Principal:
    return need(request, Scope.READ, "Reading evals and releases")


def _sees_sealed(who: Principal) -> bool:
    return Scope.SEALED.value in who.scopes


def _eval(session: Session, name: str) -> Eval:
    """The eval called `name`, or a 404 page naming those that exist."""
    evaluation = get_eval(session=session, name=name)
    if evaluation is None:
        names = ", ".join(evaluation.name for evaluation in list_evals(session=session)) or "none yet"
        raise UiRefused(404, "No such eval", f"There is no eval called {name!r}. Evals: {names}.")
    return evaluation


def _release(session: Session, evaluation: Eval, ref: str) -> Release:
    """Release `ref` of the eval, or a 404 page naming the releases it has."""
    try:
        return resolve_release(session=session, evaluation=evaluation, ref=ref)
    except ProblemError as exc:
        numbers = session.exec(select(Release.number).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all()
        have = f"its releases are {', '.join(str(number) for number in numbers)}" if numbers else "it has no release yet"
        raise UiRefused(404, "No such release", f"Eval {evaluation.name!r} has no release {ref!r}: {have}.") from exc


def _audit_shown(request: Request, who: Principal, *, object_id: str, item_ids: list[int], action: str, details: dict[str, Any] | None = None) -> None:
    """One audit event for a page that showed the frozen content of `item_ids` (none: no event)."""
    endpoint = f"{request.method} {request.url.path}"
    details = {"split": Split.DEV.value, **(details or {})}
    record_read(request.app.state.engine, actor=who.actor, action=action, endpoint=endpoint, object_type="release", object_id=object_id, item_ids=item_ids, details=details)


@router.get("/ui/evals")
def eval_list(request: Request) -> HTMLResponse:
    """Every eval with its settings, newest release and the items waiting for review."""
    _reader(request)
    with Session(request.app.state.engine) as session:
        evaluations = list_evals(session=session)
        pending = waiting_for_review(session, evaluations)
        rows = []
        for evaluation in evaluations:
            assert evaluation.id is not None
            rows.append({"eval": evaluation, "latest": latest_release_number(session, evaluation.id), "pending": pending[evaluation.name]})
        return page(request, "evals.html", {"rows": rows})


def _form_values(evaluation: Eval) -> dict[str, str]:
    return {
        "target_size": str(evaluation.target_size),
        "schedule": evaluation.schedule,
        "approval_policy": evaluation.approval_policy,
        "max_age_days": "" if evaluation.max_age_days is None else str(evaluation.max_age_days),
        "sealed_fraction": f"{evaluation.sealed_fraction:g}",
        "sealed_read_budget": str(evaluation.sealed_read_budget),
        "linking_share": f"{evaluation.linking_share:g}",
        "balance_composition": "true" if evaluation.balance_composition else "false",
        "sources": ", ".join(evaluation.sources),
    }


def _releases_page(request: Request, name: str, *, form: dict[str, str] | None = None, errors: list[str] | None = None, status: int = 200) -> HTMLResponse:
    _reader(request)
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        summaries = list_releases(session=session, evaluation=evaluation)
        rows = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all()
        used = {release.number: sealed_reads_used(session=session, release=release) for release in rows}
        context: dict[str, Any] = {
            "evaluation": evaluation,
            "releases": summaries,
            "used": used,
            "form": form or _form_values(evaluation),
            "errors": errors or [],
            "policies": [policy.value for policy in ApprovalPolicy],
            "compare_from": summaries[-2].number if len(summaries) > 1 else (summaries[0].number if summaries else None),
            "compare_to": summaries[-1].number if summaries else None,
            "scale": scale_if_fitted(session, evaluation),
        }
        return page(request, "eval_releases.html", context, status=status)


@router.get("/ui/evals/{name}/releases")
def eval_releases(request: Request, name: str) -> HTMLResponse:
    """The eval's releases with their sizes and sealed reads, its settings, and the compare form."""
    return _releases_page(request, name)


def _parse_settings(evaluation: Eval, given: dict[str, str | None]) -> tuple[EvalUpdate | None, list[str]]:
    """The settings that change, as an `EvalUpdate` (None when none does), or the errors found."""
    values: dict[str, object] = {}
    errors: list[str] = []
    for field, label in SETTINGS.items():
        text = given.get(field)
        if text is None:
            continue  # not on the form (the sealed fraction, once a release exists)
        text = text.strip()
        if field == "sources":
            values[field] = [part.strip() for part in text.split(",") if part.strip()]
        elif text:
            values[field] = text
        elif field == "max_age_days":
            values[field] = None  # no limit
        else:
            errors.append(f"{label}: give a value.")
    try:
        parsed = EvalUpdate.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            errors.append(f"{SETTINGS.get(field, field)}: {error['msg'].removeprefix('Value error, ')}.")
        return None, errors
    if errors:
        return None, errors
    changed = {field: value for field, value in parsed.model_dump(exclude_unset=True).items() if value != getattr(evaluation, field)}
    return (EvalUpdate.model_validate(changed) if changed else None), []


@router.post("/ui/evals/{name}/settings")
def change_settings(
    request: Request,
    name: str,
    session: WriteSessionDep,
    target_size: Annotated[str | None, Form(max_length=20)] = None,
    schedule: Annotated[str | None, Form(max_length=200)] = None,
    approval_policy: Annotated[str | None, Form(max_length=20)] = None,
    max_age_days: Annotated[str | None, Form(max_length=20)] = None,
    sealed_fraction: Annotated[str | None, Form(max_length=20)] = None,
    sealed_read_budget: Annotated[str | None, Form(max_length=20)] = None,
    linking_share: Annotated[str | None, Form(max_length=20)] = None,
    balance_composition: Annotated[str | None, Form(max_length=20)] = None,
    sources: Annotated[str | None, Form(max_length=4000)] = None,
) -> Response:
    """Change the eval's settings (admin), in the request's unit of work; they apply from its next
    refresh. Settings it refuses show the form again with why, as typed."""
    who = need(request, Scope.ADMIN, "Changing an eval's settings")
    given = {
        "target_size": target_size,
        "schedule": schedule,
        "approval_policy": approval_policy,
        "max_age_days": max_age_days,
        "sealed_fraction": sealed_fraction,
        "sealed_read_budget": sealed_read_budget,
        "linking_share": linking_share,
        "balance_composition": balance_composition,
        "sources": sources,
    }
    url = f"/ui/evals/{name}/releases"
    evaluation = _eval(session, name)
    update, errors = _parse_settings(evaluation, given)
    form = {**_form_values(evaluation), **{field: value for field, value in given.items() if value is not None}}
    if errors:
        hand_back_connection(session)  # the page reads on a connection of its own
        return _releases_page(request, name, form=form, errors=errors, status=422)
    if update is None:
        return done(url, "Nothing changed.")
    shows_refusal(request, lambda refusal: _releases_page(request, name, form=form, errors=[refusal.detail], status=422))
    update_eval(session=session, evaluation=evaluation, data=update, actor=who.actor)
    changed = ", ".join(f"{SETTINGS[field].lower()} {value}" for field, value in update.model_dump(exclude_unset=True).items())
    return done(url, f"Settings of {name} saved ({changed}); they apply from its next refresh.")


@router.get("/ui/evals/{name}/compare")
def compare(
    request: Request,
    name: str,
    a: Annotated[str, Query(max_length=20)] = "",
    b: Annotated[str, Query(max_length=20)] = "",
) -> RedirectResponse:
    """The compare form's target: to the diff page of the two releases chosen."""
    _reader(request)
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        first, second = _release(session, evaluation, a.strip()), _release(session, evaluation, b.strip())
    return RedirectResponse(f"/ui/evals/{name}/releases/{first.number}/diff/{second.number}", status_code=303)


@router.get("/ui/evals/{name}/releases/{ref}")
def release_page(request: Request, name: str, ref: str, offset: Annotated[int, Query(ge=0, le=MAX_COUNT)] = 0) -> HTMLResponse:
    """A release's manifest: summary, roots, verification, its dev items and its sealed count."""
    who = _reader(request)
    key = secret_key(request)
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        release = _release(session, evaluation, ref)
        try:
            digest_key: bytes | None = seal_keys(secret_key=key)(evaluation)
        except ValueError:
            digest_key = None  # unreadable under this secret key: keyed sealed digests go unchecked, the roots still are
        report = verify_release(session=session, evaluation=evaluation, release=release, seal_key=digest_key)
        sealed_entries = [entry for entry in manifest(session=session, evaluation=evaluation, release=release).items if entry.split == Split.SEALED.value]
        findings = report.mismatches
        if not _sees_sealed(who):
            hidden = {f"item {entry.item_id}:" for entry in sealed_entries}
            findings = [("a sealed item:" + finding.split(":", 1)[1]) if finding.split(":", 1)[0] + ":" in hidden else finding for finding in findings]
        dev = dev_items(session, release=release, offset=offset, secret_key=key)
        composition = composition_of(release)
        context = {
            "evaluation": evaluation,
            "release": release,
            "report": report,
            "findings": findings,
            "dev": dev,
            "listed": LISTED,
            "sealed_entries": sealed_entries if _sees_sealed(who) else [],
            "used": sealed_reads_used(session=session, release=release),
            "previous": release.number - 1 if release.number > 1 else None,
            "composition": tables([composition]),
            "balanced_against": composition.balanced_against if composition else None,
            "linking": linking_of(release),
        }
    _audit_shown(request, who, object_id=f"{evaluation.name}/{release.number}", item_ids=[entry.item_id for entry in dev.entries], action=AuditAction.RELEASE_ITEMS_READ)
    return page(request, "release.html", context)


@router.get("/ui/evals/{name}/releases/{ref}/manifest.json")
def manifest_json(request: Request, name: str, ref: str) -> Response:
    """The manifest as the API serves it to a reader (sealed items as id and digest only), as a
    download: a browser saves it rather than showing it in place of the page."""
    _reader(request)
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        release = _release(session, evaluation, ref)
        body = manifest(session=session, evaluation=evaluation, release=release).model_dump_json()
    filename = f"{evaluation.name}-{release.number}-manifest.json"
    return Response(body, media_type="application/json", headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"})


def _audit_export(engine: Engine, *, actor: str, endpoint: str, name: str, release_id: int) -> None:
    """Audit the export once it went out, naming the items it served (as `service.evals.read_audit`)."""
    with Session(engine) as session:
        release = session.get(Release, release_id)
        assert release is not None
        ids = [row.item_id for row in release_rows(session=session, release=release, split=Split.DEV)]
    record_read(
        engine,
        actor=actor,
        action=AuditAction.RELEASE_EXPORT,
        endpoint=endpoint,
        object_type="release",
        object_id=f"{name}/{release.number}",
        item_ids=ids,
        details={"split": Split.DEV.value},
    )


@router.get("/ui/evals/{name}/releases/{ref}/export.jsonl")
def export(request: Request, name: str, ref: str) -> StreamingResponse:
    """The dev split as JSON Lines, as a download: the API's export, audited the same way."""
    who = _reader(request)
    engine = request.app.state.engine
    with Session(engine) as session:
        evaluation = _eval(session, name)
        release = _release(session, evaluation, ref)
    assert release.id is not None
    audit = BackgroundTask(_audit_export, engine, actor=who.actor, endpoint=f"{request.method} {request.url.path}", name=evaluation.name, release_id=release.id)
    headers = {"Content-Disposition": f'attachment; filename="{evaluation.name}-{release.number}-dev.jsonl"', "Cache-Control": "no-store"}
    return StreamingResponse(export_stream(engine, eval_name=evaluation.name, release_id=release.id, split=Split.DEV), media_type=JSONL, headers=headers, background=audit)


@router.get("/ui/evals/{name}/releases/{a}/diff/{b}")
def diff_page(request: Request, name: str, a: str, b: str) -> HTMLResponse:
    """What changed between two releases, in either order: added, retired (with the reason), withheld."""
    who = _reader(request)
    with Session(request.app.state.engine) as session:
        evaluation = _eval(session, name)
        first, second = _release(session, evaluation, a), _release(session, evaluation, b)
        view = diff_releases(session, evaluation=evaluation, a=first, b=second, may_see_sealed=_sees_sealed(who), secret_key=secret_key(request))
        numbers = list(session.exec(select(Release.number).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all())
    details = {"from": first.number, "to": second.number}
    _audit_shown(request, who, object_id=f"{evaluation.name}/{first.number}..{second.number}", item_ids=view.shown, action=AuditAction.RELEASE_DIFF_READ, details=details)
    return page(request, "release_diff.html", {"evaluation": evaluation, "view": view, "a": view.a, "b": view.b, "numbers": numbers})
