"""The item lifecycle (`schemas.lifecycle`): every move a person or a source makes is allowed from
exactly the statuses the table names, to exactly its targets, and writes exactly one audit event
naming both statuses; any other move is refused. Walked over every action and every status."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from schemas.item import Item, ItemStatus
from schemas.lifecycle import CURATION_MOVES, MOVES, IllegalMove, ItemAction, is_move, move, unmoved


def _item(status: ItemStatus) -> Item:
    return Item(id=7, source_id=1, external_id="x", title="t", input="i", content_hash="h", record_digest="d", occurred_at=datetime(2024, 1, 1, tzinfo=UTC), status=status.value)


@pytest.mark.parametrize("action", list(ItemAction))
def test_every_move_writes_one_event_and_every_other_is_refused(action: ItemAction) -> None:
    allowed = MOVES[action]
    assert allowed.sources and allowed.targets and allowed.meaning
    for before, after in itertools.product(ItemStatus, ItemStatus):
        item = _item(before)
        if before in allowed.sources and after in allowed.targets:
            event = move(item, action, after, actor="someone", details={"note": "why"})
            assert item.status == after.value and item.updated_at is not None
            assert (event.action, event.actor, event.object_type, event.object_id) == (action.value, "someone", "item", "7")
            assert event.details == {"note": "why", "status_before": before.value, "status": after.value}
            assert is_move(event) == (before != after)
        else:
            with pytest.raises(IllegalMove, match=action.value):
                move(item, action, after, actor="someone")
            assert item.status == before.value  # refused: nothing changed


def test_no_move_leaves_or_enters_a_reference_or_retired_item_and_curation_only_decides() -> None:
    for allowed in MOVES.values():
        assert not {ItemStatus.REFERENCE, ItemStatus.RETIRED} & (allowed.sources | allowed.targets)
    assert set(CURATION_MOVES[ItemStatus.CANDIDATE]) == {ItemStatus.UNIQUE, ItemStatus.DUPLICATE, ItemStatus.CONTAMINATED}
    assert all(ItemStatus.APPROVED not in targets and ItemStatus.REJECTED not in targets for targets in CURATION_MOVES.values())


def test_an_action_that_leaves_the_status_is_recorded_as_no_move() -> None:
    item = _item(ItemStatus.APPROVED)
    event = unmoved(item, ItemAction.EDIT, actor="someone", details={"fields": ["tags"]})
    assert item.status == "approved" and item.updated_at is not None
    assert event.details == {"fields": ["tags"], "status_before": "approved", "status": "approved"} and not is_move(event)
