"""Which items are sealed: one rule for every eval, for the release writer and for every reader.

An item's split is decided once for the whole service, the first time any eval releases it, and
every eval that later releases it follows that decision. Items that may be one incident told
twice (a *near group*, `curation.releases.groups`) are decided together:

- an item with a recorded split (a membership in any eval) keeps it: sealed when any eval holds
  it sealed, dev otherwise; so an item served as dev never becomes sealed elsewhere, and an item
  sealed anywhere is never served as dev by another eval;
- an item never released whose group holds released items follows them: sealed when any eval
  holds one of them sealed, dev otherwise. A retelling that dedup missed therefore lands on the
  side of the item it retells, in every later release;
- an item whose group was never released is sealed when any eval taking the source of any member
  of the group would seal the group's anchor (its smallest item id) under that eval's own key and
  fraction (`curation.releases.sealing.is_sealed`). The whole group is sealed or none of it.
  Two evals over one source therefore seal the union of what each would seal alone (for two
  evals at 20%, about 36% of the groups they share), the price of never letting one eval's dev
  split carry the other's sealed items. An eval whose seal key cannot be read makes every
  unreleased group touching its sources sealed: the check fails closed.

Releases are immutable, so a link that joins items already released on different sides leaves
them there; the release writer and `goldenset verify` report such pairs (`cross_split_pairs`).

A page's check reads the groups, the members' memberships and their sources from per-process
copies (`curation.releases.group_cache`, `curation.releases.membership_cache`), each checked
against its table's row count in the caller's session; where a copy cannot answer for that
session, the tables are read.

Sealed content is served only by sealed release reads and sealed runs, which need the `sealed`
scope and count against the release's budget; every other read shows such items without content,
and no dev split, dev run or probe ever carries one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from sqlmodel import Session, col, select

from curation.releases import membership_cache
from curation.releases.groups import anchor, near_groups
from curation.releases.sealing import is_sealed
from schemas.evals import Eval, EvalItem, Split
from schemas.item import Item
from schemas.source import Source

_BATCH = 500

SealKeyOf = Callable[[Eval], bytes]
"""An eval's seal key in the clear (the service decrypts it); raises ValueError when it cannot be read."""


def recorded_splits(session: Session, item_ids: Collection[int]) -> dict[int, str]:
    """The split each of `item_ids` was released in, for those any eval ever took (`sealed` when
    any eval holds it sealed)."""
    wanted = sorted(set(item_ids))
    if not wanted:
        return {}
    splits: dict[int, str] = {}
    for item_id, split in session.exec(select(EvalItem.item_id, EvalItem.split).where(col(EvalItem.item_id).in_(wanted))).all():
        if splits.get(item_id) != Split.SEALED.value:
            splits[item_id] = split
    return splits


def sealed_anywhere(session: Session, item_ids: Collection[int]) -> set[int]:
    """The subset of `item_ids` some eval holds in its sealed split."""
    return {item_id for item_id, split in recorded_splits(session, item_ids).items() if split == Split.SEALED.value}


def _held(session: Session, item_ids: Collection[int]) -> dict[int, dict[int, str]]:
    """For each of `item_ids` any eval took: eval id -> recorded split."""
    held: dict[int, dict[int, str]] = {}
    wanted = sorted(set(item_ids))
    for start in range(0, len(wanted), _BATCH):
        query = select(EvalItem.item_id, EvalItem.eval_id, EvalItem.split).where(col(EvalItem.item_id).in_(wanted[start : start + _BATCH]))
        for item_id, eval_id, split in session.exec(query).all():
            held.setdefault(item_id, {})[eval_id] = split
    return held


def _sources(session: Session, item_ids: Collection[int]) -> dict[int, str]:
    wanted = sorted(set(item_ids))
    sources: dict[int, str] = {}
    for start in range(0, len(wanted), _BATCH):
        query = select(Item.id, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(wanted[start : start + _BATCH]))
        sources.update((item_id, name) for item_id, name in session.exec(query).all() if item_id is not None)
    return sources


def sealing_evals(*, session: Session, item_ids: Collection[int], seal_key_of: SealKeyOf) -> dict[int, set[int]]:
    """For each of `item_ids` that is sealed, or will be once released (the module's rule), the
    ids of the evals that seal it: for an item or group already released, the evals holding a
    member sealed; for a group never released, each eval over a member's source whose key seals
    the group's anchor, or whose key cannot be read. Items no eval seals are left out."""
    wanted = sorted(set(item_ids))
    if not wanted:
        return {}
    groups = near_groups(session, wanted)
    members = set().union(*(groups[item_id] for item_id in wanted))
    cache = membership_cache.cache_for(session)
    copied = None if cache is None else cache.held(session, members)
    held = copied if copied is not None else _held(session, members)

    def sealers_of(released: Iterable[int]) -> set[int]:
        return {eval_id for item_id in released for eval_id, split in held[item_id].items() if split == Split.SEALED.value}

    result: dict[int, set[int]] = {}
    unreleased: dict[frozenset[int], list[int]] = {}
    group_sealers: dict[frozenset[int], set[int] | None] = {}  # None: no member released
    for item_id in wanted:
        group = groups[item_id]
        if item_id in held:
            sealers: set[int] | None = sealers_of([item_id])
        else:
            if group not in group_sealers:
                released = [member for member in group if member in held]
                group_sealers[group] = sealers_of(released) if released else None
            sealers = group_sealers[group]
        if sealers is None:
            unreleased.setdefault(group, []).append(item_id)
        elif sealers:
            result[item_id] = sealers
    if not unreleased:
        return result
    asked_sources = set().union(*unreleased)
    sources = cache.source_names(session, asked_sources) if cache is not None else _sources(session, asked_sources)
    evaluations = session.exec(select(Eval).order_by(col(Eval.id))).all()
    keys: dict[int, bytes | None] = {}
    for group, asked in unreleased.items():
        names = {sources[member] for member in group if member in sources}
        sealing: set[int] = set()
        for evaluation in evaluations:
            assert evaluation.id is not None
            if not names.intersection(evaluation.sources):
                continue
            if evaluation.id not in keys:
                try:
                    keys[evaluation.id] = seal_key_of(evaluation)
                except ValueError:
                    keys[evaluation.id] = None
            key = keys[evaluation.id]
            if key is None or is_sealed(key, anchor(group), evaluation.sealed_fraction):
                sealing.add(evaluation.id)
        if sealing:
            result.update((item_id, sealing) for item_id in asked)
    return result


def sealed_item_ids(*, session: Session, item_ids: Collection[int], seal_key_of: SealKeyOf) -> set[int]:
    """The subset of `item_ids` that are sealed, or will be once released (the module's rule)."""
    return set(sealing_evals(session=session, item_ids=item_ids, seal_key_of=seal_key_of))
