"""Which items are sealed: one rule for every eval, for the release writer and for every reader.

An item's split is decided once for the whole service, the first time any eval releases it, and
every eval that later releases it follows that decision:

- an item with a recorded split (a membership in any eval) keeps it: sealed when any eval holds
  it sealed, dev otherwise; so an item served as dev never becomes sealed elsewhere, and an item
  sealed anywhere is never served as dev by another eval;
- an item never released is sealed when any eval taking its source would seal it under that
  eval's own key and fraction (`curation.releases.sealing.is_sealed`). Two evals over one source
  therefore seal the union of what each would seal alone (for two evals at 20%, about 36% of the
  items they share), the price of never letting one eval's dev split carry the other's sealed
  items. An eval whose seal key cannot be read makes every unreleased item of its sources sealed:
  the check fails closed.

Sealed content is served only by sealed release reads and sealed runs, which need the `sealed`
scope and count against the release's budget; every other read shows such items without content,
and no dev split, dev run or probe ever carries one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sqlmodel import Session, col, select

from curation.releases.sealing import is_sealed
from schemas.evals import Eval, EvalItem, Split
from schemas.item import Item
from schemas.source import Source

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


def sealed_item_ids(*, session: Session, item_ids: Collection[int], seal_key_of: SealKeyOf) -> set[int]:
    """The subset of `item_ids` that are sealed, or will be once released (the module's rule)."""
    wanted = sorted(set(item_ids))
    recorded = recorded_splits(session, wanted)
    sealed = {item_id for item_id, split in recorded.items() if split == Split.SEALED.value}
    unreleased = [item_id for item_id in wanted if item_id not in recorded]
    if not unreleased:
        return sealed
    sources = dict(session.exec(select(Item.id, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(unreleased))).all())
    for evaluation in session.exec(select(Eval)).all():
        taken = set(evaluation.sources)
        candidates = [item_id for item_id in unreleased if sources.get(item_id) in taken and item_id not in sealed]
        if not candidates:
            continue
        try:
            key = seal_key_of(evaluation)
        except ValueError:
            sealed.update(candidates)
            continue
        sealed.update(item_id for item_id in candidates if is_sealed(key, item_id, evaluation.sealed_fraction))
    return sealed
