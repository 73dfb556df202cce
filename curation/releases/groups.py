"""Near groups: the items a split must keep together.

Two items are *linked* when dedup saw them close at a recall-first level, whatever it decided
(`schemas.dedup.NearLink`: an exact or near-verbatim copy, a paraphrase at the guard threshold,
a match the title rules or identities vetoed, a duplicate, a person's duplicate ruling). A *group*
is a connected component of links. The sealed slice is assigned per group
(`curation.releases.visibility`), so a duplicate the rules missed lands on the side of the item it
retells: a miss costs nothing to the split.

A group's *anchor* is its smallest item id: the id the seal key is taken over while no member is
released. Item ids grow with ingest, so a newcomer joining a group never changes its anchor; only
a link that joins two groups does, and then only for the group whose anchor is the larger.

Groups are read from a per-process copy of every group (`curation.releases.group_cache`),
checked against the table's row count on every use; where the copy cannot answer for the
caller's session, they are found from the items asked about, following links breadth first, a
few batched queries per step (links are indexed both ways).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from curation.releases.group_cache import cached_groups, components
from schemas.dedup import NearLink
from schemas.evals import EvalItem, Split

# Ids per IN list: well under SQLite's and PostgreSQL's limits on bound parameters.
_BATCH = 500


@dataclass(frozen=True)
class Link:
    """A stored near link, either way round."""

    a: int
    b: int
    stage: str
    score: float | None


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), _BATCH):
        yield ids[start : start + _BATCH]


def links_touching(session: Session, item_ids: Collection[int]) -> list[Link]:
    """Every stored link with an end among `item_ids`."""
    found: dict[tuple[int, int], Link] = {}
    for chunk in _chunks(sorted(set(item_ids))):
        query = select(NearLink.item_id, NearLink.other_id, NearLink.stage, NearLink.score).where(or_(col(NearLink.item_id).in_(chunk), col(NearLink.other_id).in_(chunk)))
        for a, b, stage, score in session.exec(query).all():
            found.setdefault((a, b), Link(a, b, stage, score))
    return list(found.values())


def near_groups(session: Session, item_ids: Collection[int]) -> dict[int, frozenset[int]]:
    """The group of each of `item_ids` (a set holding the item itself; an item with no link is
    alone), and of every member of those groups."""
    cached = cached_groups(session, item_ids)
    return cached if cached is not None else traced_groups(session, item_ids)


def traced_groups(session: Session, item_ids: Collection[int]) -> dict[int, frozenset[int]]:
    """As `near_groups`, found by following links from `item_ids`, whatever the copy holds."""
    frontier = set(item_ids)
    seen = set(frontier)
    pairs: list[tuple[int, int]] = []
    while frontier:
        reached: set[int] = set()
        for link in links_touching(session, frontier):
            pairs.append((link.a, link.b))
            reached.update((link.a, link.b))
        frontier = reached - seen
        seen |= frontier
    return components(pairs, seen)


def anchor(group: Collection[int]) -> int:
    """The id the seal key is taken over for a group none of whose members was released."""
    return min(group)


def linked_pairs(session: Session, item_ids: Collection[int]) -> list[Link]:
    """The stored links with an end among `item_ids`, each once, by item ids."""
    return sorted(links_touching(session, item_ids), key=lambda link: (min(link.a, link.b), max(link.a, link.b)))


def cross_split_pairs(session: Session, splits: Mapping[int, str]) -> list[dict[str, Any]]:
    """The linked pairs on either side of the split, for a release whose members have `splits`
    (item id -> `dev` or `sealed`): pairs of two members, and pairs of a member with an item
    another release recorded (sealed when any eval holds it sealed). Each as `{dev, sealed,
    stage, score}` (`schemas.release.CrossSplitPair`), by item ids."""
    links = linked_pairs(session, splits)
    outside = {end for link in links for end in (link.a, link.b) if end not in splits}
    recorded: dict[int, str] = {}
    for chunk in _chunks(sorted(outside)):
        for item_id, split in session.exec(select(EvalItem.item_id, EvalItem.split).where(col(EvalItem.item_id).in_(chunk))).all():
            if recorded.get(item_id) != Split.SEALED.value:
                recorded[item_id] = split
    pairs = []
    for link in links:
        sides = {end: splits.get(end, recorded.get(end)) for end in (link.a, link.b)}
        dev = [end for end, split in sides.items() if split == Split.DEV.value]
        sealed = [end for end, split in sides.items() if split == Split.SEALED.value]
        if dev and sealed:
            pairs.append({"dev": dev[0], "sealed": sealed[0], "stage": link.stage, "score": link.score})
    return pairs
