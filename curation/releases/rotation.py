"""Rotation: which items a new release of an eval holds, given its current members and the items
eligible to join. Pure: the caller reads the database and writes the outcome.

Rules, in order:
1. A current member retires when it was marked exposed (`exposed`), falls outside the window
   (`aged_out`: older than the maximum age at the period's start, or before the eval's earliest
   date), or its curation status no longer admits it (`rejected`, `duplicate`, `contaminated`,
   `withdrawn`).
2. A current member waiting for curation or review again (its content changed) is withheld: left
   out of this release, still a member, back once it is admitted again.
3. The remaining members and the never-released admitted items inside the window compete newest
   incident first (ties: higher item id first) for `target_size` places, at most a source's quota
   from each source. Members that lose their place retire as `displaced`.
A retired item is never a candidate again: the caller passes only items that were never members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from schemas.evals import RetireReason
from schemas.item import ItemStatus

_STATUS_RETIREMENT = {
    ItemStatus.REJECTED.value: RetireReason.REJECTED,
    ItemStatus.DUPLICATE.value: RetireReason.DUPLICATE,
    ItemStatus.CONTAMINATED.value: RetireReason.CONTAMINATED,
    ItemStatus.RETIRED.value: RetireReason.WITHDRAWN,
    ItemStatus.REFERENCE.value: RetireReason.WITHDRAWN,
}


@dataclass(frozen=True)
class Candidate:
    """What rotation needs to know of an item."""

    item_id: int
    source: str
    occurred_at: datetime
    status: str
    exposed: bool = False


@dataclass(frozen=True)
class RotationPolicy:
    """The window is [`window_start`, `window_end`); `window_start` None means no lower bound.
    `admitted` are the item statuses that may enter (approved; plus unique under auto-approval)."""

    window_start: datetime | None
    window_end: datetime
    target_size: int
    admitted: frozenset[str]
    source_quotas: Mapping[str, int] = field(default_factory=dict)

    def in_window(self, occurred_at: datetime) -> bool:
        return (self.window_start is None or occurred_at >= self.window_start) and occurred_at < self.window_end


@dataclass
class RotationPlan:
    """`members`: item ids of the new release (kept and added); `added`: those new to the eval;
    `retired`: member id -> reason; `withheld`: members left out of this release only."""

    members: list[int] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    retired: dict[int, RetireReason] = field(default_factory=dict)
    withheld: list[int] = field(default_factory=list)


def _order(candidate: Candidate) -> tuple[float, int]:
    return (-candidate.occurred_at.timestamp(), -candidate.item_id)


def plan_rotation(policy: RotationPolicy, current: Iterable[Candidate], fresh: Iterable[Candidate]) -> RotationPlan:
    """The next release's membership from the current members and never-released items (`fresh`;
    any of them outside the window, exposed or not admitted is ignored)."""
    plan = RotationPlan()
    competing: list[tuple[Candidate, bool]] = []
    for member in current:
        if member.exposed:
            plan.retired[member.item_id] = RetireReason.EXPOSED
        elif not policy.in_window(member.occurred_at):
            plan.retired[member.item_id] = RetireReason.AGED_OUT
        elif member.status in _STATUS_RETIREMENT:
            plan.retired[member.item_id] = _STATUS_RETIREMENT[member.status]
        elif member.status not in policy.admitted:
            plan.withheld.append(member.item_id)
        else:
            competing.append((member, True))
    members = {candidate.item_id for candidate, _ in competing} | set(plan.retired) | set(plan.withheld)
    for candidate in fresh:
        if candidate.item_id in members:
            raise ValueError(f"item {candidate.item_id} is both a member and a fresh candidate")
        if not candidate.exposed and candidate.status in policy.admitted and policy.in_window(candidate.occurred_at):
            competing.append((candidate, False))
    competing.sort(key=lambda entry: _order(entry[0]))
    taken: dict[str, int] = {}
    for candidate, is_member in competing:
        quota = policy.source_quotas.get(candidate.source)
        if len(plan.members) < policy.target_size and (quota is None or taken.get(candidate.source, 0) < quota):
            taken[candidate.source] = taken.get(candidate.source, 0) + 1
            plan.members.append(candidate.item_id)
            if not is_member:
                plan.added.append(candidate.item_id)
        elif is_member:
            plan.retired[candidate.item_id] = RetireReason.DISPLACED
    plan.withheld.sort()
    return plan
