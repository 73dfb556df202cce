"""Which items' content must be withheld outside the budgeted sealed paths.

An item is treated as sealed when it is in the sealed split of any eval, or when it is not yet a
member of an eval that takes its source but would enter that eval's sealed slice if released
(`curation.releases.sealing.is_sealed` under the eval's key and current fraction): its text must not reach
a dev reader before its first release either. An eval whose seal key cannot be read (the secret
key changed) makes every item of its sources sealed: the check fails closed.

Sealed content is served only by sealed release reads and sealed runs, which need the `sealed`
scope and count against the release's budget; every other read shows such items without content.
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


def sealed_item_ids(*, session: Session, item_ids: Collection[int], seal_key_of: SealKeyOf) -> set[int]:
    """The subset of `item_ids` that are (or would be, once released) in a sealed split."""
    wanted = sorted(set(item_ids))
    if not wanted:
        return set()
    memberships = session.exec(select(EvalItem.eval_id, EvalItem.item_id, EvalItem.split).where(col(EvalItem.item_id).in_(wanted))).all()
    sealed = {item_id for _, item_id, split in memberships if split == Split.SEALED.value}
    members = {(eval_id, item_id) for eval_id, item_id, _ in memberships}
    evals = session.exec(select(Eval)).all()
    if not evals:
        return sealed
    sources = dict(session.exec(select(Item.id, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_(wanted))).all())
    for evaluation in evals:
        taken = set(evaluation.sources)
        candidates = [item_id for item_id in wanted if sources.get(item_id) in taken and (evaluation.id, item_id) not in members and item_id not in sealed]
        if not candidates:
            continue
        try:
            key = seal_key_of(evaluation)
        except ValueError:
            sealed.update(candidates)
            continue
        sealed.update(item_id for item_id in candidates if is_sealed(key, item_id, evaluation.sealed_fraction))
    return sealed
