"""Reading releases: summaries, manifests, released items, JSONL exports, verification, and the
sealed-read budget.

Everything served is built from the rows written with the release (frozen canonical JSON), in a
fixed order, so a numbered release reads the same, byte for byte, every time, except that its
summary and manifest say so once it is withdrawn (`curation.releases.withdrawal`); `latest` is the
newest release in force.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Literal

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from curation.releases.content import canonical_json, content_digest, keyed_digest, merkle_root
from curation.releases.groups import cross_split_pairs
from curation.releases.visibility import sealed_anywhere
from schemas.audit import AuditAction, AuditEvent
from schemas.common import MAX_ROW_ID, read_model
from schemas.evals import Eval, Split
from schemas.release import (
    HMAC_SHA256,
    CrossSplitPair,
    ManifestEntry,
    Release,
    ReleaseDiff,
    ReleasedItem,
    ReleaseItem,
    ReleaseManifest,
    ReleaseSummary,
    ReleaseWithdrawal,
    SealedRead,
    VerifyReport,
)
from service.core.db import write_transaction
from service.core.problems import ProblemError
from service.evals.refusal_audit import AuditedRefusal, refusals_audited

LATEST = "latest"


class SealedBudgetExceeded(PermissionError):
    """The release's sealed content was read (or run) as often as the eval's budget allows."""

    def __init__(self, evaluation: Eval, release: Release, used: int) -> None:
        self.budget = evaluation.sealed_read_budget
        self.used = used
        super().__init__(
            f"the sealed-read budget of eval {evaluation.name!r} is {evaluation.sealed_read_budget} per release and release {release.number} has used {used}; "
            "sealed items are for final decisions only: iterate on the dev split, or wait for the next release"
        )


def resolve_release(*, session: Session, evaluation: Eval, ref: str) -> Release:
    """Release `ref` (a number, withdrawn or not, or `latest`: the newest release in force) of the
    eval, or a 404 problem."""
    query = select(Release).where(Release.eval_id == evaluation.id)
    if ref == LATEST:
        release = session.exec(query.where(col(Release.withdrawn_at).is_(None)).order_by(col(Release.number).desc()).limit(1)).first()
        if release is None:
            raise ProblemError(
                404, "Not Found", f"eval {evaluation.name!r} has no release in force (none yet, or all withdrawn); refresh it (`goldenset refresh --eval {evaluation.name}`)"
            )
        return release
    if not (ref.isascii() and ref.isdigit() and 1 <= int(ref) <= MAX_ROW_ID):
        raise ProblemError(422, "Invalid request", f"a release is a number from 1 to {MAX_ROW_ID} or 'latest', not {ref!r}")
    release = session.exec(query.where(Release.number == int(ref))).first()
    if release is None:
        raise ProblemError(404, "Not Found", f"eval {evaluation.name!r} has no release {ref}")
    return release


def summary(evaluation: Eval, release: Release) -> ReleaseSummary:
    """The release as the API lists it: period, canary, Merkle roots, counts, diff, and who
    withdrew it, when and why, once withdrawn."""
    withdrawn = None
    if release.withdrawn_at is not None:
        withdrawn = ReleaseWithdrawal(at=release.withdrawn_at, by=release.withdrawn_by or "", reason=release.withdrawn_reason or "")
    return read_model(
        ReleaseSummary,
        release,
        eval=evaluation.name,
        dev_merkle_root=release.dev_root,
        sealed_merkle_root=release.sealed_root,
        diff=ReleaseDiff.model_validate(release.diff),
        withdrawn=withdrawn,
    )


def list_releases(*, session: Session, evaluation: Eval) -> list[ReleaseSummary]:
    releases = session.exec(select(Release).where(Release.eval_id == evaluation.id).order_by(col(Release.number))).all()
    return [summary(evaluation, release) for release in releases]


def manifest(*, session: Session, evaluation: Eval, release: Release) -> ReleaseManifest:
    """The manifest: every item as (item_id, split, content_digest), by item id."""
    rows = session.exec(
        select(ReleaseItem.item_id, ReleaseItem.split, ReleaseItem.content_digest).where(ReleaseItem.release_id == release.id).order_by(col(ReleaseItem.item_id))
    ).all()
    entries = [ManifestEntry(item_id=item_id, split=split, content_digest=digest) for item_id, split, digest in rows]
    return ReleaseManifest(**summary(evaluation, release).model_dump(), items=entries)


def release_rows(*, session: Session, release: Release, split: Split, occurred_after: datetime | None = None) -> list[ReleaseItem]:
    """The frozen rows of one split that may be served, newest incident first (ties: higher id
    first). A dev split never serves an item some eval holds sealed (`curation.releases.visibility`:
    releases written before that rule could hold one)."""
    query = select(ReleaseItem).where(ReleaseItem.release_id == release.id, ReleaseItem.split == split.value)
    if occurred_after is not None:
        query = query.where(col(ReleaseItem.occurred_at) >= occurred_after)
    rows = list(session.exec(query.order_by(col(ReleaseItem.occurred_at).desc(), col(ReleaseItem.item_id).desc())).all())
    if split is Split.DEV:
        sealed = sealed_anywhere(session, [row.item_id for row in rows])
        rows = [row for row in rows if row.item_id not in sealed]
    return rows


def released_items(*, session: Session, release: Release, split: Split, occurred_after: datetime | None = None) -> list[ReleasedItem]:
    """The items of one split as released (`release_rows`), with their frozen content."""
    rows = release_rows(session=session, release=release, split=split, occurred_after=occurred_after)
    return [ReleasedItem(item_id=row.item_id, split=row.split, content_digest=row.content_digest, content=json.loads(row.content)) for row in rows]


def split_count(*, session: Session, release: Release, split: Split, occurred_after: datetime | None = None) -> int:
    """How many items of one split of the release occurred at or after `occurred_after`."""
    query = select(func.count()).select_from(ReleaseItem).where(ReleaseItem.release_id == release.id, ReleaseItem.split == split.value)
    if occurred_after is not None:
        query = query.where(col(ReleaseItem.occurred_at) >= occurred_after)
    return int(session.exec(query).one())


def export_row(item: ReleasedItem, *, canary: str, eval_name: str, release_number: int) -> dict[str, object]:
    """One item as a JSONL export row (`schemas.release.ExportRow`)."""
    content = item.content
    metadata = {"canary": canary, "eval": eval_name, "release": release_number, "item": canonical_json(content.get("metadata") or {})}
    return {**content, "split": item.split, "content_digest": item.content_digest, "metadata": metadata}


def export_lines(*, session: Session, evaluation: Eval, release: Release, split: Split, occurred_after: datetime | None = None, served: list[int] | None = None) -> Iterator[str]:
    """A JSONL export: one released item a line (`export_row`), each line canonical JSON, newest
    incident first; nothing else, so every line is an item. The release's roots and the sealed
    items' digests are in its manifest (`manifest`). `served`, when given, receives the id of
    each item whose line was yielded."""
    for item in released_items(session=session, release=release, split=split, occurred_after=occurred_after):
        yield canonical_json(export_row(item, canary=release.canary, eval_name=evaluation.name, release_number=release.number)) + "\n"
        if served is not None:
            served.append(item.item_id)


_SEALED_USES = {"read": AuditAction.RELEASE_SEALED_READ, "run": AuditAction.RELEASE_SEALED_RUN, "export": AuditAction.RELEASE_SEALED_EXPORT}
"""The action auditing one use of a release's sealed content, by its purpose."""


def consume_sealed_read(
    *, session: Session, evaluation: Eval, release: Release, actor: str, item_count: int, purpose: Literal["read", "run", "export"] = "read", token_id: int | None = None
) -> SealedRead:
    """Count one use of the release's sealed content (a read, or a sealed run) by the token
    `token_id` (None: the command line) and audit it, in the caller's unit of work. Once the
    eval's per-release budget is used up, counts nothing and raises `AuditedRefusal` holding
    SealedBudgetExceeded and its audit event: the caller runs its unit of work inside
    `service.evals.refusal_audit.refusals_audited`. Concurrent callers are serialised on the
    release (a row lock on PostgreSQL; SQLite callers use a `write_transaction`), so the budget is
    never overrun."""
    session.exec(select(Release.id).where(Release.id == release.id).with_for_update()).first()
    used = sealed_reads_used(session=session, release=release)
    if used >= evaluation.sealed_read_budget:
        refused = AuditEvent(
            actor=actor,
            action=AuditAction.RELEASE_SEALED_REFUSED,
            object_type="release",
            object_id=f"{evaluation.name}/{release.number}",
            count=0,
            details={"budget": evaluation.sealed_read_budget, "used": used, "purpose": purpose},
        )
        raise AuditedRefusal(refused, SealedBudgetExceeded(evaluation, release, used))
    assert release.id is not None
    entry = SealedRead(release_id=release.id, actor=actor, token_id=token_id, purpose=purpose, item_count=item_count)
    session.add(entry)
    session.add(
        AuditEvent(
            actor=actor,
            action=_SEALED_USES[purpose],
            object_type="release",
            object_id=f"{evaluation.name}/{release.number}",
            count=item_count,
            details={"budget": evaluation.sealed_read_budget, "used": used + 1},
        )
    )
    session.flush()
    return entry


def take_sealed_read(
    engine: Engine, *, evaluation: Eval, release: Release, actor: str, item_count: int, purpose: Literal["read", "run", "export"] = "read", token_id: int | None = None
) -> SealedRead:
    """`consume_sealed_read` in a unit of work of its own, committed before any sealed content is
    served, so the use stays counted and audited whatever happens to the answer. Raises
    SealedBudgetExceeded, its refusal audited (`refusals_audited`). The caller holds no other
    connection (a request hands its own back first)."""
    with refusals_audited(engine), write_transaction(engine) as session:
        return consume_sealed_read(
            session=session, evaluation=evaluation, release=release, actor=actor, item_count=item_count, purpose=purpose, token_id=token_id
        )


def sealed_reads_used(*, session: Session, release: Release) -> int:
    """How many sealed reads and sealed runs the release has served."""
    return int(session.exec(select(func.count()).select_from(SealedRead).where(SealedRead.release_id == release.id)).one())


def verify_release(*, session: Session, evaluation: Eval, release: Release, seal_key: bytes | None = None) -> VerifyReport:
    """Recompute every item's digest from its frozen content, the canonical form of that content,
    and both Merkle roots; report each mismatch (an empty list: the release is intact).

    Sealed items of a release with keyed digests (`sealed_digest` `hmac-sha256`) are recomputed
    with `seal_key`, the eval's seal key; without it their digests are taken as recorded (they
    still make the sealed root) and counted in `sealed_unchecked`. `cross_split_pairs`: the release's
    near-linked dev-sealed pairs by the links stored now (links recorded after the release can
    add some; the release recorded those it knew of)."""
    rows = session.exec(select(ReleaseItem).where(ReleaseItem.release_id == release.id).order_by(col(ReleaseItem.item_id))).all()
    mismatches: list[str] = []
    unchecked = 0
    keyed = release.sealed_digest == HMAC_SHA256
    by_split: dict[str, list[tuple[int, str]]] = {split.value: [] for split in Split}
    for row in rows:
        digest: str | None = content_digest(row.content)
        if keyed and row.split == Split.SEALED.value:
            digest = keyed_digest(row.content, seal_key=seal_key) if seal_key is not None else None
            unchecked += digest is None
        if digest is not None and digest != row.content_digest:
            mismatches.append(f"item {row.item_id}: content digest {digest} differs from the recorded {row.content_digest}")
        try:
            content = json.loads(row.content)
        except ValueError:
            mismatches.append(f"item {row.item_id}: frozen content is not JSON")
            continue
        if canonical_json(content) != row.content:
            mismatches.append(f"item {row.item_id}: frozen content is not in canonical form")
        if content.get("id") != row.item_id:
            mismatches.append(f"item {row.item_id}: frozen content names item {content.get('id')}")
        if row.split not in by_split:
            mismatches.append(f"item {row.item_id}: unknown split {row.split!r}")
            continue
        by_split[row.split].append((row.item_id, row.content_digest))
    for split, recorded, count in ((Split.DEV, release.dev_root, release.dev_count), (Split.SEALED, release.sealed_root, release.sealed_count)):
        root = merkle_root(by_split[split.value])
        if root != recorded:
            mismatches.append(f"{split.value} Merkle root {root} differs from the recorded {recorded}")
        if len(by_split[split.value]) != count:
            mismatches.append(f"{split.value} split holds {len(by_split[split.value])} items, the release records {count}")
    pairs = [CrossSplitPair.model_validate(pair) for pair in cross_split_pairs(session, {row.item_id: row.split for row in rows})]
    return VerifyReport(eval=evaluation.name, release=release.number, items=len(rows), mismatches=mismatches, sealed_unchecked=unchecked, cross_split_pairs=pairs)


EXPORT_CHUNK = 64 * 1024


def export_stream(engine: Engine, *, eval_name: str, release_id: int, split: Split, occurred_after: datetime | None = None, served: list[int] | None = None) -> Iterator[str]:
    """The export of a release's split (`export_lines`, which fills `served`) read in a session of
    its own, in pieces of about EXPORT_CHUNK characters: one thread hop per line would make the
    stream slow."""
    with Session(engine) as session:
        evaluation = session.exec(select(Eval).where(Eval.name == eval_name)).one()
        release = session.get(Release, release_id)
        assert release is not None
        chunk: list[str] = []
        length = 0
        for line in export_lines(session=session, evaluation=evaluation, release=release, split=split, occurred_after=occurred_after, served=served):
            chunk.append(line)
            length += len(line)
            if length >= EXPORT_CHUNK:
                yield "".join(chunk)
                chunk, length = [], 0
        if chunk:
            yield "".join(chunk)
