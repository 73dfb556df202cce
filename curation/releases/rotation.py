"""Rotation: which items a new release of an eval holds, given its current members and the items
eligible to join. Pure: the caller reads the database and writes the outcome.

Rules, in order:
1. A current member retires when it was marked exposed (`exposed`), falls outside the window
   (`aged_out`: older than the maximum age at the period's start, or before the eval's earliest
   date), or its curation status no longer admits it (`rejected`, `duplicate`, `contaminated`,
   `withdrawn`).
2. A current member waiting for curation or review again (its content changed) is withheld: left
   out of this release, still a member, back once it is admitted again.
3. The linking core: of the dev items of the new release, at least `linking_share` (rounded up)
   are carried from the dev split of the release before (`previous_dev`). Members of that split
   that survived rules 1 and 2 are reserved a place, as few as the share needs beyond those the
   other rules keep anyway, the most representative first (the balance of rule 5 over them;
   within a stratum, newest incident first). Sealed members are never reserved, and an item's
   split never changes. When too few survived, the release carries fewer: retirement wins, and
   the plan says how many are missing (`LinkingReport.short`) and why the others left.
4. The remaining members and the never-released admitted items inside the window compete for the
   other places of `target_size`, newest incident first (ties: higher item id first), at most a
   source's quota from each source (the core counts). Members that lose their place retire as
   `displaced`.
5. Balance: with `reference` (the release before's shares, `curation.releases.composition`), the
   places rule 4 gives to newcomers go instead to whichever never-released items, or members rule
   4 would displace, bring the release closest to those shares by source, category, length band
   and age band (`curation.releases.balance`; the target moves towards the pool as
   `composition.target` says), newest first within a stratum. So the balance never displaces a
   member rule 4 keeps (a retired item is lost for good), and a never-released item it passes over
   stays eligible for a later release. Without `reference`, rule 4 alone decides.
A retired item is never a candidate again: the caller passes only items that were never members.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from curation.releases.balance import count_in, pick_balanced, pick_in_order
from curation.releases.composition import DIMENSIONS, Shares, Strata, shares, strata_of, target
from schemas.evals import RetireReason, Split
from schemas.item import ItemStatus

_STATUS_RETIREMENT = {
    ItemStatus.REJECTED.value: RetireReason.REJECTED,
    ItemStatus.DUPLICATE.value: RetireReason.DUPLICATE,
    ItemStatus.CONTAMINATED.value: RetireReason.CONTAMINATED,
    ItemStatus.RETIRED.value: RetireReason.WITHDRAWN,
    ItemStatus.REFERENCE.value: RetireReason.WITHDRAWN,
}
WITHHELD = "withheld"
"""How `LinkingReport.left` counts members of the previous dev split withheld from this release."""


@dataclass(frozen=True)
class Candidate:
    """What rotation needs to know of an item: `split` is a member's recorded split, or the split a
    never-released item would get (`curation.releases.visibility`); `tags` and `length` (of its
    input, in characters) place it in its strata (`curation.releases.composition`)."""

    item_id: int
    source: str
    occurred_at: datetime
    status: str
    exposed: bool = False
    split: str = Split.DEV.value
    tags: tuple[str, ...] = ()
    length: int = 0


@dataclass(frozen=True)
class RotationPolicy:
    """The window is [`window_start`, `window_end`); `window_start` None means no lower bound.
    `admitted` are the item statuses that may enter (approved; plus unique under auto-approval).
    `linking_share` of the new dev split comes from `previous_dev`, the item ids of the dev split
    of the release before (rule 3); `reference`, that release's shares by dimension, turns on the
    balance (rule 4)."""

    window_start: datetime | None
    window_end: datetime
    target_size: int
    admitted: frozenset[str]
    source_quotas: Mapping[str, int] = field(default_factory=dict)
    linking_share: float = 0.0
    previous_dev: frozenset[int] = frozenset()
    reference: Shares | None = None

    def in_window(self, occurred_at: datetime) -> bool:
        return (self.window_start is None or occurred_at >= self.window_start) and occurred_at < self.window_end

    def strata(self, candidate: Candidate) -> Strata:
        """The strata of `candidate` in the release this policy plans (its period starts at `window_end`)."""
        return strata_of(source=candidate.source, tags=candidate.tags, length=candidate.length, occurred_at=candidate.occurred_at, at=self.window_end)


@dataclass
class LinkingReport:
    """The linking core of a plan: `dev` items in the new dev split, of which `carried` were in the
    previous dev split and `wanted` (the share of `dev`, rounded up) had to be; `reserved` of them
    held places only as the core; `left` counts the previous dev split's members that could not
    stay by rules 1 and 2, by reason (`withheld` for rule 2)."""

    dev: int = 0
    carried: int = 0
    wanted: int = 0
    reserved: int = 0
    left: dict[str, int] = field(default_factory=dict)

    @property
    def short(self) -> int:
        """How many carried items the core is short of its share: retirement won over them."""
        return max(0, self.wanted - self.carried)


@dataclass
class RotationPlan:
    """`members`: item ids of the new release (kept and added), newest incident first; `added`:
    those new to the eval; `retired`: member id -> reason; `withheld`: members left out of this
    release only; `linking`: the linking core; `target`: the shares the balance aimed at (None:
    newest first)."""

    members: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    retired: dict[int, RetireReason] = field(default_factory=dict)
    withheld: list[int] = field(default_factory=list)
    linking: LinkingReport = field(default_factory=LinkingReport)
    target: Shares | None = None


def _order(candidate: Candidate) -> tuple[float, int]:
    return (-candidate.occurred_at.timestamp(), -candidate.item_id)


def _retirement(policy: RotationPolicy, member: Candidate) -> RetireReason | None:
    """Why a current member must leave by rule 1, or None."""
    if member.exposed:
        return RetireReason.EXPOSED
    if not policy.in_window(member.occurred_at):
        return RetireReason.AGED_OUT
    return _STATUS_RETIREMENT.get(member.status)


def plan_rotation(policy: RotationPolicy, current: Iterable[Candidate], fresh: Iterable[Candidate]) -> RotationPlan:
    """The next release's membership from the current members and never-released items (`fresh`;
    any of them outside the window, exposed or not admitted is ignored), by the module's rules."""
    plan = RotationPlan()
    staying: list[Candidate] = []
    for member in current:
        reason = _retirement(policy, member)
        if reason is not None:
            plan.retired[member.item_id] = reason
        elif member.status not in policy.admitted:
            plan.withheld.append(member.item_id)
        else:
            staying.append(member)
    members = {candidate.item_id for candidate in staying} | set(plan.retired) | set(plan.withheld)
    entering: list[Candidate] = []
    for candidate in fresh:
        if candidate.item_id in members:
            raise ValueError(f"item {candidate.item_id} is both a member and a fresh candidate")
        if not candidate.exposed and candidate.status in policy.admitted and policy.in_window(candidate.occurred_at):
            entering.append(candidate)
    strata = {candidate.item_id: policy.strata(candidate) for candidate in (*staying, *entering)}
    if policy.reference:
        plan.target = target(policy.reference, shares(strata.values()))
    core_pool = sorted((member for member in staying if member.item_id in policy.previous_dev and member.split == Split.DEV.value), key=_order)
    by_id = {candidate.item_id: candidate for candidate in (*staying, *entering)}
    reserve = 0
    while True:
        reserved, filled = _select(policy, plan.target, strata, core_pool, staying, entering, reserve)
        chosen = [by_id[item_id] for item_id in (*reserved, *filled)]
        dev = sum(candidate.split == Split.DEV.value for candidate in chosen)
        carried = sum(candidate.item_id in policy.previous_dev and candidate.split == Split.DEV.value for candidate in chosen)
        wanted = math.ceil(policy.linking_share * dev - 1e-9)
        if carried >= wanted or reserve >= len(core_pool) or len(reserved) < reserve:
            break
        reserve = min(len(core_pool), reserve + wanted - carried)
    chosen.sort(key=_order)
    plan.members = [candidate.item_id for candidate in chosen]
    plan.added = [candidate.item_id for candidate in chosen if candidate.item_id not in members]
    kept = set(plan.members)
    for member in sorted(staying, key=_order):
        if member.item_id not in kept:
            plan.retired[member.item_id] = RetireReason.DISPLACED
    left = Counter(reason.value for item_id, reason in plan.retired.items() if item_id in policy.previous_dev and reason is not RetireReason.DISPLACED)
    left[WITHHELD] += sum(item_id in policy.previous_dev for item_id in plan.withheld)
    plan.linking = LinkingReport(dev=dev, carried=carried, wanted=wanted, reserved=len(reserved), left={reason: number for reason, number in sorted(left.items()) if number})
    plan.withheld.sort()
    return plan


def _select(
    policy: RotationPolicy,
    aimed: Shares | None,
    strata: Mapping[int, Strata],
    core_pool: Sequence[Candidate],
    staying: Sequence[Candidate],
    entering: Sequence[Candidate],
    reserve: int,
) -> tuple[list[int], list[int]]:
    """The places of a release: `reserve` for the core from `core_pool` (newest first, balanced
    towards `aimed` when given), then the others newest first among the rest of `staying` and
    `entering` (rule 4); with `aimed`, the places that gave to newcomers go to those the balance
    picks among the never-released items and the members rule 4 displaced (rule 5). Returns the
    reserved ids and the others."""
    chosen: dict[str, Counter[str]] = {dimension: Counter() for dimension in DIMENSIONS}
    taken: dict[str, int] = {}

    def entries(candidates: Iterable[Candidate]) -> list[tuple[int, Strata]]:
        return [(candidate.item_id, strata[candidate.item_id]) for candidate in candidates]

    quotas = policy.source_quotas
    if aimed is None:
        reserved = pick_in_order(entries(core_pool), places=reserve, chosen=chosen, taken=taken, quotas=quotas)
    else:
        reserved = pick_balanced(entries(core_pool), places=reserve, target=aimed, chosen=chosen, taken=taken, quotas=quotas)
    held = set(reserved)
    rest = sorted((candidate for candidate in (*staying, *entering) if candidate.item_id not in held), key=_order)
    if aimed is None:
        return reserved, pick_in_order(entries(rest), places=policy.target_size - len(reserved), chosen=chosen, taken=taken, quotas=quotas)
    trial = pick_in_order(entries(rest), places=policy.target_size - len(reserved), chosen={dimension: Counter() for dimension in DIMENSIONS}, taken=dict(taken), quotas=quotas)
    members = {candidate.item_id for candidate in staying}
    kept = [item_id for item_id in trial if item_id in members]
    for item_id in kept:
        count_in(strata[item_id], chosen, taken)
    held.update(kept)
    contested = [candidate for candidate in rest if candidate.item_id not in held]
    return reserved, kept + pick_balanced(entries(contested), places=len(trial) - len(kept), target=aimed, chosen=chosen, taken=taken, quotas=quotas)
