"""Writing a release: the one place that decides what a new release of an eval holds and writes it.

`write_release` plans the rotation (`curation.releases.rotation`: the linking core carried from the
dev split of the release before, the rest balanced against that release's composition, both read
by `curation.releases.linking`), assigns each newcomer its split by the service-wide rule of
`curation.releases.visibility` (a split once recorded in any eval is kept; a near group,
`curation.releases.groups`, goes to one side: the side its released members hold, or otherwise
the side any eval over a member's source seals its anchor to; seal keys are handed in by the
caller), records the near pairs that still straddle the split (only those earlier releases
forced), freezes every member's content as canonical JSON with its digest
(`curation.releases.content`: a sealed member's digest is keyed with the eval's seal key),
computes both Merkle roots, records the release's composition and linking core, and writes the
release, its items, the membership changes and the audit event in the caller's session. It
flushes and never commits: the caller holds the eval's refresh lock and commits the whole release
in one transaction, so a refresh stopped at any point leaves no trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import ColumnElement, func
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from curation.releases.composition import Strata, strata_of
from curation.releases.content import canonical_json, content_digest, keyed_digest, merkle_root, released_content
from curation.releases.groups import cross_split_pairs
from curation.releases.linking import Basis, composition_record, linking_record, previous_basis
from curation.releases.periods import Period
from curation.releases.rotation import Candidate, RotationPlan, RotationPolicy, plan_rotation
from curation.releases.visibility import SealKeyOf, sealed_item_ids
from schemas.audit import AuditAction, AuditEvent
from schemas.dedup_questions import DedupQuestion, QuestionState
from schemas.evals import ApprovalPolicy, Eval, EvalItem, Split
from schemas.item import Item, ItemStatus
from schemas.release import HMAC_SHA256, Release, ReleaseItem
from schemas.source import Source


class PeriodOutOfOrder(ValueError):
    """The period starts before that of the eval's newest release: releases are written in order."""


def release_of_period(session: Session, *, evaluation: Eval, period: Period) -> Release | None:
    """The eval's release for `period`, if it has one."""
    return session.exec(select(Release).where(Release.eval_id == evaluation.id, Release.period_start == period.start)).first()


def latest_release(session: Session, *, evaluation: Eval) -> Release | None:
    """The eval's newest release in force (withdrawn releases do not count), if any."""
    query = select(Release).where(Release.eval_id == evaluation.id, col(Release.withdrawn_at).is_(None))
    return session.exec(query.order_by(col(Release.number).desc()).limit(1)).first()


def last_number(session: Session, *, evaluation: Eval) -> int:
    """The highest release number the eval has used, withdrawn releases included (0 if none)."""
    number = session.exec(select(func.max(Release.number)).where(Release.eval_id == evaluation.id)).one()
    return int(number) if number is not None else 0


def rotation_policy(evaluation: Eval, period: Period) -> RotationPolicy:
    """The eval's rotation rules for a period: the window ends at the period's start."""
    starts = [start for start in (evaluation.earliest_occurred_at, period.start - timedelta(days=evaluation.max_age_days) if evaluation.max_age_days else None) if start]
    admitted = {ItemStatus.APPROVED.value}
    if evaluation.approval_policy == ApprovalPolicy.AUTO.value:
        admitted.add(ItemStatus.UNIQUE.value)
    return RotationPolicy(
        window_start=max(starts) if starts else None,
        window_end=period.start,
        target_size=evaluation.target_size,
        admitted=frozenset(admitted),
        source_quotas=dict(evaluation.source_quotas),
        linking_share=evaluation.linking_share,
    )


class Sourced(NamedTuple):
    """An item with the name of its source."""

    item: Item
    source: str


@dataclass(frozen=True)
class Pool:
    """What a release chooses from: the eval's members in force (`memberships`, by item id), their
    items (`current`) and the items it may take fresh (`fresh`), each by id with its source."""

    memberships: dict[int, EvalItem]
    current: dict[int, Sourced]
    fresh: dict[int, Sourced]

    def sourced(self, item_id: int) -> Sourced:
        """The item `item_id` of either kind, with its source."""
        return self.current[item_id] if item_id in self.current else self.fresh[item_id]


@dataclass(frozen=True)
class Contents:
    """What a release holds: each member's split (`splits`, by item id), the members that joined
    with a withdrawn release only and now count as added (`rejoined`), and every member's frozen
    row (`frozen`, by item id, not yet tied to the release)."""

    splits: dict[int, str]
    rejoined: list[int]
    frozen: list[ReleaseItem]

    def digests(self, split: Split) -> list[tuple[int, str]]:
        """(item id, content digest) of the members of `split`, by item id: its Merkle leaves."""
        return [(entry.item_id, entry.content_digest) for entry in self.frozen if entry.split == split.value]


def _candidate(sourced: Sourced, split: str) -> Candidate:
    item = sourced.item
    assert item.id is not None
    return Candidate(
        item_id=item.id,
        source=sourced.source,
        occurred_at=item.occurred_at,
        status=item.status,
        exposed=item.exposed_at is not None,
        split=split,
        tags=tuple(item.tags),
        length=len(item.input),
    )


def plan_release(session: Session, *, evaluation: Eval, period: Period, seal_key_of: SealKeyOf) -> tuple[Pool, RotationPlan, Basis]:
    """Gather the pool of the eval's release of `period` (`gather_pool`) and plan its rotation
    against the release before (`curation.releases.linking.previous_basis`). A never-released
    item's split is asked (`sealed_item_ids`) only when the linking core needs to count the new
    dev split."""
    basis = previous_basis(session, evaluation=evaluation)
    policy = replace(rotation_policy(evaluation, period), previous_dev=basis.dev, reference=basis.reference)
    pool = gather_pool(session, evaluation=evaluation, policy=policy)
    sealed = sealed_item_ids(session=session, item_ids=list(pool.fresh), seal_key_of=seal_key_of) if policy.linking_share and basis.dev else set()
    current = [_candidate(pool.current[item_id], pool.memberships[item_id].split) for item_id in sorted(pool.current)]
    fresh = [_candidate(pool.fresh[item_id], (Split.SEALED if item_id in sealed else Split.DEV).value) for item_id in sorted(pool.fresh)]
    return pool, plan_rotation(policy, current, fresh), basis


def _frozen(sourced: Sourced, split: str, seal_key: bytes) -> ReleaseItem:
    item = sourced.item
    assert item.id is not None
    text = canonical_json(
        released_content(
            item_id=item.id,
            source=sourced.source,
            external_id=item.external_id,
            occurred_at=item.occurred_at,
            title=item.title,
            input=item.input,
            reference=item.reference,
            metadata=item.meta,
            tags=item.tags,
        )
    )
    digest = keyed_digest(text, seal_key=seal_key) if split == Split.SEALED.value else content_digest(text)
    return ReleaseItem(release_id=0, item_id=item.id, split=split, occurred_at=item.occurred_at, content_digest=digest, content=text)


def write_release(
    session: Session,
    *,
    evaluation: Eval,
    period: Period,
    seal_key_of: SealKeyOf,
    actor: str,
    now: datetime,
    audit_details: Mapping[str, object] | None = None,
) -> Release:
    """Write the release of `period`, made at `now` (numbered after every number the eval used, withdrawn
    releases included) in `session`, flushed and not committed, and return it. The caller checks
    first that the period has no release yet (`release_of_period`), that every seal key is
    readable (an unreadable one seals every newcomer of its sources), and serialises refreshes,
    so that two evals deciding one item's split see each other's decision. Raises
    `PeriodOutOfOrder` when the period starts before that of the newest release in force.

    Members that joined with a withdrawn release only (`curation.releases.withdrawal`) keep their
    recorded split; a release that takes them lists them as `added` and becomes their first
    release. `audit_details` are added to the `release.create` audit event.

    The steps: check the order of periods, gather the pool and plan the rotation (`plan_release`),
    decide and freeze the contents (`decide_contents`), then write the release row with its
    composition and linking core, and its items (`_add_release`), the membership changes
    (`_record_memberships`) and the audit event (`_audit_release`)."""
    assert evaluation.id is not None
    _check_order(session, evaluation=evaluation, period=period)
    number = last_number(session, evaluation=evaluation) + 1
    pool, plan, basis = plan_release(session, evaluation=evaluation, period=period, seal_key_of=seal_key_of)
    held = decide_contents(session, evaluation=evaluation, pool=pool, plan=plan, seal_key_of=seal_key_of)
    strata = {item_id: _strata(pool.sourced(item_id), period) for item_id in plan.members}
    records = {
        "composition": composition_record(strata, held.splits, basis=basis, balanced=plan.target is not None),
        "linking": linking_record(plan.linking, held.splits, share=evaluation.linking_share, basis=basis),
    }
    release = _add_release(session, evaluation=evaluation, period=period, number=number, now=now, plan=plan, held=held, records=records)
    _record_memberships(session, evaluation=evaluation, number=number, now=now, plan=plan, pool=pool, held=held)
    _audit_release(session, evaluation=evaluation, release=release, period=period, plan=plan, held=held, actor=actor, now=now, audit_details=audit_details)
    session.flush()
    return release


def _check_order(session: Session, *, evaluation: Eval, period: Period) -> None:
    """Raise `PeriodOutOfOrder` when `period` starts before that of the eval's newest release in force."""
    latest = latest_release(session, evaluation=evaluation)
    if latest is not None and latest.period_start > period.start:
        raise PeriodOutOfOrder(
            f"the period starting {period.start.isoformat()} is before that of release {latest.number} ({latest.period_start.isoformat()}); releases are written in order"
        )


def gather_pool(session: Session, *, evaluation: Eval, policy: RotationPolicy) -> Pool:
    """The eval's members in force with their items, and the items a release of `policy` may take
    fresh (`admissible`: never in the eval before)."""
    memberships = {
        membership.item_id: membership for membership in session.exec(select(EvalItem).where(EvalItem.eval_id == evaluation.id, col(EvalItem.retired_release).is_(None))).all()
    }
    current: dict[int, Sourced] = {}
    if memberships:
        query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(list(memberships)))
        current = {item.id: Sourced(item, source) for item, source in session.exec(query).all() if item.id is not None}
    ever = select(EvalItem.item_id).where(EvalItem.eval_id == evaluation.id)
    fresh_query = select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(*admissible(evaluation, policy, excluding=ever))
    fresh = {item.id: Sourced(item, source) for item, source in session.exec(fresh_query).all() if item.id is not None}
    return Pool(memberships=memberships, current=current, fresh=fresh)


def decide_contents(session: Session, *, evaluation: Eval, pool: Pool, plan: RotationPlan, seal_key_of: SealKeyOf) -> Contents:
    """What the planned release holds: a kept member's recorded split, a newcomer's by the
    service-wide rule (`curation.releases.visibility.sealed_item_ids`), the members that rejoin
    after a withdrawn release, and every member frozen (a sealed one's digest keyed with the eval's
    seal key)."""
    memberships = pool.memberships
    splits = {item_id: memberships[item_id].split for item_id in plan.members if item_id in memberships}
    sealed = sealed_item_ids(session=session, item_ids=plan.added, seal_key_of=seal_key_of)
    splits.update({item_id: (Split.SEALED if item_id in sealed else Split.DEV).value for item_id in plan.added})
    withdrawn_numbers = set(session.exec(select(Release.number).where(Release.eval_id == evaluation.id, col(Release.withdrawn_at).is_not(None))).all())
    rejoined = [item_id for item_id in plan.members if item_id in memberships and memberships[item_id].first_release in withdrawn_numbers]
    seal_key = seal_key_of(evaluation)
    frozen = [_frozen(pool.sourced(item_id), splits[item_id], seal_key) for item_id in sorted(plan.members)]
    return Contents(splits=splits, rejoined=rejoined, frozen=frozen)


def _strata(sourced: Sourced, period: Period) -> Strata:
    item = sourced.item
    return strata_of(source=sourced.source, tags=item.tags, length=len(item.input), occurred_at=item.occurred_at, at=period.start)


def _add_release(
    session: Session, *, evaluation: Eval, period: Period, number: int, now: datetime, plan: RotationPlan, held: Contents, records: Mapping[str, dict[str, object]]
) -> Release:
    """Add the release row (Merkle roots and counts of both splits, the near pairs straddling the
    split, the diff, the composition and linking core `records`) and its frozen items; flushed, so
    the release has its id."""
    assert evaluation.id is not None
    dev, sealed = held.digests(Split.DEV), held.digests(Split.SEALED)
    release = Release(
        eval_id=evaluation.id,
        number=number,
        period_start=period.start,
        period_end=period.end,
        created_at=now,
        canary=evaluation.canary,
        dev_root=merkle_root(dev),
        sealed_root=merkle_root(sealed),
        dev_count=len(dev),
        sealed_count=len(sealed),
        sealed_digest=HMAC_SHA256,
        cross_split_pairs=cross_split_pairs(session, held.splits),
        diff={
            "added": sorted(plan.added + held.rejoined),
            "retired": [{"item_id": item_id, "reason": reason.value} for item_id, reason in sorted(plan.retired.items())],
            "withheld": plan.withheld,
        },
        composition=records["composition"],
        linking=records["linking"],
    )
    session.add(release)
    session.flush()
    assert release.id is not None
    for entry in held.frozen:
        entry.release_id = release.id
    session.add_all(held.frozen)
    return release


def _record_memberships(session: Session, *, evaluation: Eval, number: int, now: datetime, plan: RotationPlan, pool: Pool, held: Contents) -> None:
    """The membership changes of release `number`: newcomers join with their split, rejoined
    members take it as their first release, retired members leave with their reason."""
    assert evaluation.id is not None
    session.add_all(EvalItem(eval_id=evaluation.id, item_id=item_id, split=held.splits[item_id], first_release=number) for item_id in plan.added)
    for item_id in held.rejoined:
        pool.memberships[item_id].first_release = number
        session.add(pool.memberships[item_id])
    for item_id, reason in plan.retired.items():
        membership = pool.memberships[item_id]
        membership.retired_release = number
        membership.retired_at = now
        membership.retired_reason = reason.value
        session.add(membership)


def _audit_release(
    session: Session,
    *,
    evaluation: Eval,
    release: Release,
    period: Period,
    plan: RotationPlan,
    held: Contents,
    actor: str,
    now: datetime,
    audit_details: Mapping[str, object] | None,
) -> None:
    """The `release.create` audit event: the release, its period and counts (the linking core's
    too), and `audit_details`."""
    linking = release.linking or {}
    details = {
        "release": release.number,
        "period_start": period.start.isoformat(),
        "added": len(plan.added) + len(held.rejoined),
        "retired": len(plan.retired),
        "withheld": len(plan.withheld),
        "cross_split_pairs": len(release.cross_split_pairs or []),
        "linking_carried": linking.get("carried", 0),
        "linking_could_not_keep": linking.get("could_not_keep", 0),
    }
    details.update(audit_details or {})
    session.add(AuditEvent(actor=actor, action=AuditAction.RELEASE_CREATE, object_type="eval", object_id=evaluation.name, count=len(held.frozen), details=details, at=now))


def admissible(evaluation: Eval, policy: RotationPolicy, *, excluding: SelectOfScalar[int]) -> list[ColumnElement[bool]]:
    """The conditions on `Item` (joined with its `Source`) of an item a release of `policy` may
    take fresh: from the eval's sources, admitted by its approval policy, never exposed, inside
    the window, holding no open dedup question (`curation.dedup.questions`: it waits for a
    curator's answer), and not among the ids `excluding` selects."""
    asked = select(DedupQuestion.item_id).where(DedupQuestion.state == QuestionState.OPEN.value)
    conditions = [
        col(Source.name).in_(evaluation.sources),
        col(Item.status).in_(sorted(policy.admitted)),
        col(Item.exposed_at).is_(None),
        col(Item.occurred_at) < policy.window_end,
        col(Item.id).not_in(excluding),
        col(Item.id).not_in(asked),
    ]
    if policy.window_start is not None:
        conditions.append(col(Item.occurred_at) >= policy.window_start)
    return conditions
