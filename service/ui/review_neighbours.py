"""The nearest earlier items of an item under review (`service.ui.review`), from stored vectors
(`curation.dedup.similarity.similar_to_stored`): no page runs the embedding model. Each is shown
beside the item with the differing words marked (`service.ui.worddiff.side_by_side`), when its
body cosine reaches `NEIGHBOUR_FLOOR`; the nearest ones under it are only counted. Sealed-bound
items are never shown as neighbours.

Rankings are remembered per dedup index, and the next items of the queue are ranked ahead in the
background, so walking the queue finds them ready.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from fastapi import Request
from markupsafe import Markup
from sqlmodel import Session, col, select

from curation.dedup.deduplicator import Deduplicator
from curation.dedup.similarity import NotIndexed, Similar, similar_to_stored
from schemas.item import Item
from schemas.review import ReviewQueueEntry
from schemas.source import Source
from service.items.shaping import ShownItem, shape_items
from service.ui.worddiff import side_by_side

NEIGHBOURS = 3
NEIGHBOUR_POOL = 30
"""Candidates by vector ranked for the page's neighbours (the lexical comparison dominates the cost)."""
NEIGHBOUR_FLOOR = 0.5
"""The lowest body cosine at which an earlier item is shown beside the one under review. Below it
two reports share a topic, not an incident, and a word diff of them is noise. Measured with
all-MiniLM-L6-v2 on GitBugs Hadoop: 94% of 107 pairs labelled one incident score 0.5 or more
(5th percentile 0.47), while 400 random pairs of reports score a median 0.21 and only 4% reach
0.5. The floor sits well under dedup's recall-first guard (0.72), so the duplicates dedup let
through, which a reviewer is here to catch, are still shown."""
REMEMBERED = 4096
_REMEMBERED: OrderedDict[tuple[int, int], tuple[Deduplicator, list[Similar]]] = OrderedDict()
_REMEMBERED_LOCK = threading.Lock()
_PREPARING = threading.Lock()
PREPARED = 3
"""Items after the one shown whose neighbours are ranked ahead, in the background."""
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Neighbour:
    """A nearest earlier item and the two texts side by side, the differing words marked."""

    item: ShownItem
    source: str
    score: float
    cosine: float
    theirs: Markup
    ours: Markup
    title_theirs: Markup
    title_ours: Markup


@dataclass(frozen=True)
class Neighbours:
    """The earlier items shown beside an item under review (`shown`), how many of its nearest ones
    were left out under `NEIGHBOUR_FLOOR` (`below_floor`), and why none are shown (None when some are)."""

    shown: list[Neighbour]
    below_floor: int = 0
    why_none: str | None = None


def neighbours_of(request: Request, session: Session, entry: ReviewQueueEntry, secret_key: str) -> Neighbours:
    """The entry's nearest earlier items that this person may see and that reach `NEIGHBOUR_FLOOR`,
    from stored vectors; how many nearest ones fell under the floor; or why none are shown."""
    item = session.get(Item, entry.id)
    if item is None:
        return Neighbours([])
    deduplicator = request.app.state.dedup_reader.without_waiting(request.app.state.engine)
    if deduplicator is None:
        return Neighbours([], why_none="The dedup index is loading: reload in a moment to see this item's nearest earlier items.")
    try:
        ranked = _ranked(session, deduplicator, item)
    except NotIndexed as exc:
        return Neighbours([], why_none=str(exc))
    rows = session.exec(select(Item, Source.name).join(Source, col(Source.id) == col(Item.source_id)).where(col(Item.id).in_([similar.item_id for similar in ranked]))).all()
    found = {other.id: other for other in shape_items(session=session, rows=list(rows), secret_key=secret_key) if not other.withheld}
    nearest = [similar for similar in ranked if similar.item_id in found][:NEIGHBOURS]
    close = [similar for similar in nearest if similar.cosine >= NEIGHBOUR_FLOOR]
    neighbours = []
    for similar in close:
        other = found[similar.item_id]
        theirs, ours = side_by_side(other.input, entry.input)
        title_theirs, title_ours = side_by_side(other.title, entry.title)
        neighbours.append(Neighbour(other, other.source, similar.score, similar.cosine, theirs, ours, title_theirs, title_ours))
    below = len(nearest) - len(close)
    return Neighbours(neighbours, below, None if neighbours else f"No earlier item is close to this one (a body cosine of {NEIGHBOUR_FLOOR:.2f} or more).")


def _ranked(session: Session, deduplicator: Deduplicator, item: Item) -> list[Similar]:
    """The item's nearest earlier items in this index, remembered per index (Skip, Back and reloads
    cost nothing; a new index, built once curation moved on, starts afresh)."""
    assert item.id is not None
    key = (id(deduplicator), item.id)
    with _REMEMBERED_LOCK:
        found = _REMEMBERED.get(key)
        if found is not None and found[0] is deduplicator:
            _REMEMBERED.move_to_end(key)
            return found[1]
    ranked = similar_to_stored(session, lambda: deduplicator, item, k=NEIGHBOURS + 2, pool_size=NEIGHBOUR_POOL)
    with _REMEMBERED_LOCK:
        _REMEMBERED[key] = (deduplicator, ranked)
        while len(_REMEMBERED) > REMEMBERED:
            _REMEMBERED.popitem(last=False)
    return ranked


def prepare_next(request: Request, item_ids: list[int]) -> None:
    """Rank the neighbours of the next items of the queue in the background, so that walking on
    finds them ready. Skipped while an earlier preparation is still running."""
    deduplicator = request.app.state.dedup_reader.without_waiting(request.app.state.engine)
    if deduplicator is None or not item_ids or not _PREPARING.acquire(blocking=False):
        return
    engine = request.app.state.engine

    def prepare() -> None:
        try:
            with Session(engine) as session:
                for item in session.exec(select(Item).where(col(Item.id).in_(item_ids))).all():
                    with contextlib.suppress(NotIndexed):
                        _ranked(session, deduplicator, item)
        except Exception:  # only a head start: the page ranks them itself when it needs them
            logger.exception("preparing the neighbours of the next items failed")
        finally:
            _PREPARING.release()

    threading.Thread(target=prepare, name="review-neighbours", daemon=True).start()
