"""Dedup rulings that cannot open the sealed slice.

A ruling (`duplicate-of`, `not-duplicate`, an answer to a dedup question) changes which items
are told as one incident, and so the near groups that decide an item's side of the split
(`curation.releases.visibility`): ruling a sealed-bound item the same as an item released in a
dev split moves it to the dev side, where any reader sees its text. So a ruling is taken only
from a person who may read every item it can link: the items it names and the items their
`duplicate_of` chains lead to (a `same` answer links the later item to the earlier one's
representative). None of them may be withheld from the caller by `service.items.shaping` (a
sealed-bound item needs the `sealed` scope and an open sealed review window on every eval that
seals it), so nobody rules on text they cannot read.

That is enough for a ruling to show the caller nothing new. Rulings only add links, and a link
joins the groups of its two ends. A member withheld before stays withheld unless its group
changed: either its group holds a sealed released member (then it stays sealed whatever joins
it), or its group was never released, and then every member shares one verdict, so the end of the
link in that group, which is named or a representative, was withheld too and the ruling refused.

A refusal is `sealed_item` (403), raised before the ruling runs. The local command line reads
everything and is not guarded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TypeVar

from sqlmodel import Session

from curation.dedup.answers import duplicate_chain
from curation.refusals import Refused
from service.evals.definitions import seal_keys
from service.items.shaping import hidden_from_reader, remembered_keys

T = TypeVar("T")


class SealedRulingRefused(Refused):
    """A ruling would be taken blind on a sealed-bound item, or would show the caller one."""


def _refusal(item_ids: Collection[int]) -> SealedRulingRefused:
    listed = ", ".join(str(item_id) for item_id in sorted(item_ids))
    what = f"item {listed} is" if len(item_ids) == 1 else f"items {listed} are"
    detail = f"{what} in (or bound for) an eval's sealed slice and withheld from you: a ruling on them, taken without reading them, could move them to the dev side"
    remedy = "; with the 'sealed' scope, open a sealed review window on each eval that seals them (POST /v1/evals/{name}/sealed-review) and rule again"
    return SealedRulingRefused("sealed_item", detail + remedy, 403)


def guarded_ruling(*, session: Session, item_ids: Collection[int], secret_key: str, revealed: Collection[int], rule: Callable[[], T]) -> T:
    """Run `rule()` (a ruling on `item_ids`, in `session`, not committed) when the caller, who holds
    open sealed review windows on the evals `revealed`, may read every item the ruling can link
    (see the module); raises SealedRulingRefused (403 `sealed_item`) before it runs otherwise.
    Returns what `rule()` returns."""
    # A ruling links an item to one of these (a `same` answer to the earlier item's representative),
    # so their groups are every group the ruling can join.
    linked = {linked_id for item_id in item_ids for linked_id in duplicate_chain(session, item_id)}
    if blind := hidden_from_reader(session, linked, remembered_keys(seal_keys(secret_key=secret_key)), revealed):
        raise _refusal(blind)
    return rule()
