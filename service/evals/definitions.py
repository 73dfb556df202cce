"""Eval definitions: creation (with a fresh seal key and canary), lookup, changes and deletion
(only while the eval has no release in force and no run), each audited.

The seal key is 32 random bytes, kept only encrypted with GOLDENSET_SECRET_KEY; it decides the
sealed slice (`curation.releases.sealing`) and never leaves the server.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from functools import partial
from typing import Any

from sqlalchemy import delete, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from curation.releases.periods import cron_trigger
from curation.releases.sealing import SEAL_KEY_BYTES
from curation.releases.visibility import SealKeyOf
from schemas.audit import AuditAction, AuditEvent
from schemas.common import utcnow
from schemas.evals import ApprovalPolicy, Eval, EvalCreate, EvalItem, EvalRead, EvalUpdate, ReviewAssignment
from schemas.probes import Probe
from schemas.release import Release, ReleaseItem, SealedRead
from schemas.runs import Run
from schemas.source import Source, SourceKind
from schemas.team_review import ReviewClaim, ReviewVote
from service.core.crypto import decrypt, encrypt
from service.core.problems import ProblemError

CANARY_PREFIX = "GOLDENSET CANARY GUID "


def get_eval(*, session: Session, name: str) -> Eval | None:
    return session.exec(select(Eval).where(Eval.name == name)).first()


def require_eval(*, session: Session, name: str) -> Eval:
    """The eval called `name`, or a 404 problem saying how to create it."""
    found = get_eval(session=session, name=name)
    if found is None:
        raise ProblemError(404, "Not Found", f"eval {name!r} does not exist; create it with POST /v1/evals (admin scope) or `goldenset eval create {name}`")
    return found


def seal_key(evaluation: Eval, *, secret_key: str) -> bytes:
    """The eval's seal key in the clear (raises ValueError when GOLDENSET_SECRET_KEY changed)."""
    return base64.b64decode(decrypt(evaluation.seal_key, secret_key=secret_key))


def seal_keys(*, secret_key: str) -> SealKeyOf:
    """Every eval's seal key in the clear, on demand (`curation.releases.visibility.SealKeyOf`)."""
    return partial(seal_key, secret_key=secret_key)


def latest_release_number(session: Session, eval_id: int) -> int | None:
    """The number of the eval's newest release in force (withdrawn releases do not count)."""
    number = session.exec(select(func.max(Release.number)).where(Release.eval_id == eval_id, col(Release.withdrawn_at).is_(None))).one()
    return int(number) if number is not None else None


def release_count(session: Session, eval_id: int) -> int:
    """How many releases the eval has, withdrawn ones included."""
    return int(session.exec(select(func.count()).select_from(Release).where(Release.eval_id == eval_id)).one())


def to_read(session: Session, evaluation: Eval) -> EvalRead:
    assert evaluation.id is not None
    data = evaluation.model_dump(exclude={"seal_key"})
    return EvalRead(**data, latest_release=latest_release_number(session, evaluation.id))


def _check_settings(session: Session, values: dict[str, Any]) -> None:
    """Refuse (422) a schedule that is not a crontab expression and sources that do not exist."""
    if "schedule" in values:
        try:
            cron_trigger(values["schedule"])
        except ValueError as exc:
            raise ProblemError(422, "Invalid request", str(exc), reason="invalid_schedule") from exc
    names = set(values.get("sources") or []) | set(values.get("source_quotas") or {})
    if names:
        rows = session.exec(select(Source.name, Source.kind).where(col(Source.name).in_(names))).all()
        kinds = dict(rows)
        missing = sorted(names - set(kinds))
        if missing:
            detail = f"unknown source(s): {', '.join(missing)}; create them first (`goldenset source create` or ingest into them)"
            raise ProblemError(422, "Invalid request", detail, reason="unknown_source")
        references = sorted(name for name, kind in kinds.items() if kind == SourceKind.REFERENCE.value)
        if references:
            raise ProblemError(422, "Invalid request", f"{', '.join(references)} are public reference corpora: their items are never released", reason="reference_source")
    _check_team(values)
    quotas = values.get("source_quotas") or {}
    outside = sorted(set(quotas) - set(values.get("sources") or quotas))
    if outside:
        raise ProblemError(422, "Invalid request", f"quotas name source(s) the eval does not take: {', '.join(outside)}", reason="source_not_in_eval")


TEAM_FIELDS = ("approval_policy", "reviewers_per_item", "review_assignment", "reviewers", "adjudicators")


def _check_team(values: dict[str, Any]) -> None:
    """Refuse (422) team review settings that could never settle an item: a round-robin with fewer
    named reviewers than the votes an item needs (or none), and team review on an eval whose
    approval is automatic (it takes items without review)."""
    if not any(field in values for field in TEAM_FIELDS[1:]):
        return
    per_item = int(values.get("reviewers_per_item") or 1)
    assignment = str(values.get("review_assignment") or ReviewAssignment.OPEN.value)
    reviewers = list(values.get("reviewers") or [])
    if len(set(reviewers)) != len(reviewers):
        raise ProblemError(422, "Invalid request", "reviewers name someone twice: name each person once", reason="invalid_team")
    if assignment == ReviewAssignment.ROUND_ROBIN.value and len(reviewers) < per_item:
        detail = f"round-robin assignment needs at least {per_item} named reviewer(s) (one per vote an item needs); reviewers names {len(reviewers)}"
        raise ProblemError(422, "Invalid request", detail, reason="invalid_team")
    if str(values.get("approval_policy") or ApprovalPolicy.MANUAL.value) == ApprovalPolicy.AUTO.value and (per_item > 1 or assignment != ReviewAssignment.OPEN.value):
        detail = "approval is automatic, so items enter the eval without review: team review (reviewers per item, claims, round-robin) needs manual approval"
        raise ProblemError(422, "Invalid request", detail, reason="invalid_team")


def create_eval(*, session: Session, data: EvalCreate, secret_key: str, actor: str, key: bytes | None = None) -> Eval:
    """Create an eval with a new canary GUID and seal key (`key`, for restoring an eval elsewhere,
    replaces the random one) and audit it, in the caller's unit of work (flushed: the eval has its
    id). 409 when the name is taken (by a writer racing this one too), 422 on bad settings."""
    values = data.model_dump()
    _check_settings(session, values)
    if get_eval(session=session, name=data.name) is not None:
        raise ProblemError(409, "Conflict", f"eval {data.name!r} already exists; change it with PATCH /v1/evals/{data.name}")
    raw_key = key if key is not None else secrets.token_bytes(SEAL_KEY_BYTES)
    evaluation = Eval(
        **values,
        canary=f"{CANARY_PREFIX}{uuid.uuid4()}",
        seal_key=encrypt(base64.b64encode(raw_key).decode("ascii"), secret_key=secret_key),
    )
    session.add(evaluation)
    try:
        session.flush()
    except IntegrityError as exc:
        raise ProblemError(409, "Conflict", f"eval {data.name!r} already exists") from exc
    details = data.model_dump(mode="json", exclude={"name"})
    session.add(AuditEvent(actor=actor, action=AuditAction.EVAL_CREATE, object_type="eval", object_id=data.name, details=details))
    return evaluation


def update_eval(*, session: Session, evaluation: Eval, data: EvalUpdate, actor: str) -> Eval:
    """Apply the fields set in `data` and audit the change, in the caller's unit of work. The
    sealed fraction is fixed once a release exists (409)."""
    changes = data.model_dump(exclude_unset=True)
    assert evaluation.id is not None
    if "sealed_fraction" in changes and changes["sealed_fraction"] != evaluation.sealed_fraction and release_count(session, evaluation.id):
        raise ProblemError(
            409, "Conflict", f"eval {evaluation.name!r} has releases: its sealed fraction is fixed, so that no item ever moves between the sealed and dev splits"
        )
    current = {"sources": evaluation.sources, "source_quotas": evaluation.source_quotas} | {field: getattr(evaluation, field) for field in TEAM_FIELDS}
    merged = current | {key: value for key, value in changes.items() if value is not None}
    _check_settings(session, merged)
    for field, value in changes.items():
        if value is None and field not in ("max_age_days", "earliest_occurred_at", "description"):
            continue  # a null for a required setting means "unchanged"
        setattr(evaluation, field, value if value is not None or field != "description" else "")
    evaluation.updated_at = utcnow()
    session.add(evaluation)
    session.add(AuditEvent(actor=actor, action=AuditAction.EVAL_UPDATE, object_type="eval", object_id=evaluation.name, details=data.model_dump(mode="json", exclude_unset=True)))
    return evaluation


def delete_eval(*, session: Session, evaluation: Eval, actor: str) -> None:
    """Delete an eval that has no release in force (none, or every one withdrawn), with its seal
    key, canary, memberships and withdrawn releases, and audit it, in the caller's unit of work
    (flushed). Refused (409) while a release is in force, and while any run was served from one of
    its releases: the runs' scores and the exposure ledger refer to them, and are never deleted."""
    assert evaluation.id is not None
    releases = list(session.exec(select(Release).where(Release.eval_id == evaluation.id)).all())
    in_force = [release.number for release in releases if release.withdrawn_at is None]
    if in_force:
        numbers = ", ".join(str(number) for number in in_force)
        raise ProblemError(409, "Conflict", f"eval {evaluation.name!r} has release(s) {numbers} in force; withdraw them first (`goldenset eval withdraw`), then delete it")
    release_ids = [release.id for release in releases if release.id is not None]
    runs = int(session.exec(select(func.count()).select_from(Run).where(Run.eval_id == evaluation.id)).one())
    if runs:
        raise ProblemError(409, "Conflict", f"eval {evaluation.name!r} has {runs} run(s) on its releases; their scores and the exposure ledger refer to them, so it is kept")
    for membership in session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id)).all():
        session.delete(membership)
    session.exec(delete(ReviewVote).where(col(ReviewVote.eval_id) == evaluation.id))
    session.exec(delete(ReviewClaim).where(col(ReviewClaim.eval_id) == evaluation.id))
    for probe in session.exec(select(Probe).where(col(Probe.eval_id) == evaluation.id)).all():
        probe.eval_id, probe.release_id = None, None
        session.add(probe)
    if release_ids:
        session.exec(delete(ReleaseItem).where(col(ReleaseItem.release_id).in_(release_ids)))
        session.exec(delete(SealedRead).where(col(SealedRead.release_id).in_(release_ids)))
        session.exec(delete(Release).where(col(Release.id).in_(release_ids)))
    session.flush()
    session.delete(evaluation)
    details = {"sources": evaluation.sources, "canary": evaluation.canary, "withdrawn_releases": sorted(release.number for release in releases)}
    session.add(AuditEvent(actor=actor, action=AuditAction.EVAL_DELETE, object_type="eval", object_id=evaluation.name, details=details))
    session.flush()


def list_evals(*, session: Session) -> list[Eval]:
    return list(session.exec(select(Eval).order_by(col(Eval.name))).all())
