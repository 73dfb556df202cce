"""Composition: what a release is made of, by what is known of each item before any result
exists. Each item falls in one stratum of each of four dimensions:

- `source`: the name of its source;
- `tag`: its category, the first of its tags as the source listed them (`(none)` without tags);
- `length`: the band of its input's length in characters (`LENGTH_BANDS`);
- `age`: the band of its age in days at the start of the release's period (`AGE_BANDS`).

Rotation balances what a release adds against the shares of the release before it
(`curation.releases.rotation`), and each release records its own shares (`summary`), so that
consecutive releases can be compared stratum by stratum.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

NO_TAG = "(none)"
OTHER = "(other)"
DIMENSIONS = ("source", "tag", "length", "age")
LENGTH_BANDS: tuple[tuple[int | None, str], ...] = ((200, "<200"), (500, "200-499"), (2000, "500-1999"), (None, "2000+"))
"""(upper bound in characters, exclusive, or None; name), shortest first."""
AGE_BANDS: tuple[tuple[int | None, str], ...] = ((30, "<30d"), (90, "30-89d"), (180, "90-179d"), (365, "180-364d"), (None, "365d+"))
"""(upper bound in days, exclusive, or None; name), youngest first."""
FOLLOWS_POOL = ("source", "tag", "length")
"""The dimensions whose balance target moves towards what the pool offers (`target`); the age
profile is held as the release before had it."""
DRIFT = 0.1
"""How far, each release, the target of a `FOLLOWS_POOL` dimension moves from the previous
release's shares towards the pool's: a new source or a growing category gains places over a few
releases instead of never (a tenth of the way: half the gap closes in about seven releases), and
no release differs much from the one before."""
WEIGHTS = {"source": 1.0, "tag": 1.0, "length": 1.0, "age": 0.25}
"""How much a stratum's shortfall counts in the balance (`curation.releases.balance`), by dimension.
Where the newest items cannot hold both the age profile and the categories (what arrives drifts),
the age profile gives way: what an incident is about moves its difficulty more than its age."""
LISTED_TAGS = 12
"""Categories a recorded composition names; the rest are counted under `(other)`."""

Shares = Mapping[str, Mapping[str, float]]
"""Dimension -> stratum -> share of the items (each dimension's shares sum to 1)."""


class Strata(NamedTuple):
    """The strata of one item, one per dimension (in `DIMENSIONS` order)."""

    source: str
    tag: str
    length: str
    age: str


def length_band(characters: int) -> str:
    """The length band of a text of `characters` characters."""
    for bound, name in LENGTH_BANDS:
        if bound is None or characters < bound:
            return name
    raise AssertionError("the last band has no bound")


def age_band(occurred_at: datetime, at: datetime) -> str:
    """The age band of an incident of `occurred_at` seen at `at` (a later incident counts as 0 days old)."""
    days = max(0.0, (at - occurred_at).total_seconds() / 86_400)
    for bound, name in AGE_BANDS:
        if bound is None or days < bound:
            return name
    raise AssertionError("the last band has no bound")


def strata_of(*, source: str, tags: Sequence[str], length: int, occurred_at: datetime, at: datetime) -> Strata:
    """The strata of an item of `source` with `tags` and an input of `length` characters, in a
    release whose period starts `at`."""
    return Strata(source=source, tag=tags[0] if tags else NO_TAG, length=length_band(length), age=age_band(occurred_at, at))


def released_strata(content: str, at: datetime) -> Strata:
    """The strata of an item from its content as a release froze it (`curation.releases.content`)."""
    value = json.loads(content)
    tags = [str(tag) for tag in value.get("tags") or []]
    return strata_of(source=str(value["source"]), tags=tags, length=len(str(value.get("input", ""))), occurred_at=datetime.fromisoformat(value["occurred_at"]), at=at)


def counts(strata: Iterable[Strata]) -> dict[str, Counter[str]]:
    """How many of `strata` fall in each stratum, by dimension."""
    found: dict[str, Counter[str]] = {dimension: Counter() for dimension in DIMENSIONS}
    for entry in strata:
        for dimension, value in zip(DIMENSIONS, entry, strict=True):
            found[dimension][value] += 1
    return found


def shares(strata: Iterable[Strata]) -> dict[str, dict[str, float]]:
    """The share of `strata` in each stratum, by dimension (empty dimensions when there are none)."""
    found = counts(strata)
    return {dimension: {value: number / total for value, number in tally.items()} if (total := sum(tally.values())) else {} for dimension, tally in found.items()}


def target(previous: Shares, pool: Shares) -> dict[str, dict[str, float]]:
    """The shares a release aims at: the previous release's, moved by `DRIFT` towards the pool's
    in the `FOLLOWS_POOL` dimensions (a dimension the previous release has no shares in takes the
    pool's)."""
    aimed: dict[str, dict[str, float]] = {}
    for dimension in DIMENSIONS:
        before, offered = previous.get(dimension) or {}, pool.get(dimension) or {}
        if not before:
            aimed[dimension] = dict(offered)
        elif dimension in FOLLOWS_POOL and offered:
            aimed[dimension] = {value: (1 - DRIFT) * before.get(value, 0.0) + DRIFT * offered.get(value, 0.0) for value in sorted(set(before) | set(offered))}
        else:
            aimed[dimension] = dict(before)
    return aimed


def _entries(tally: Counter[str], total: int, order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    values = [value for value in order if tally[value]] if order is not None else sorted(tally, key=lambda value: (-tally[value], value))
    return [{"value": value, "count": tally[value], "share": round(tally[value] / total, 4)} for value in values]


def summary(strata: Sequence[Strata], *, named_tags: Collection[str]) -> dict[str, Any]:
    """A release's composition as it records it (`schemas.release.ReleaseComposition`): its item
    count and, by dimension, each stratum's count and share (lengths and ages in band order,
    sources and categories most common first). Only categories among `named_tags` are named, at
    most `LISTED_TAGS` of them; the others count under `(other)`. The writer names the categories
    its dev items carry, so a category only sealed items carry is never shown."""
    total = len(strata)
    found = counts(strata)
    tags = Counter[str]()
    nameable = sorted((value for value in found["tag"] if value in named_tags), key=lambda value: (-found["tag"][value], value))[:LISTED_TAGS]
    for value, number in found["tag"].items():
        tags[value if value in nameable else OTHER] += number
    if not total:
        return {"items": 0, **{dimension: [] for dimension in DIMENSIONS}}
    return {
        "items": total,
        "source": _entries(found["source"], total),
        "tag": _entries(tags, total, [*nameable, OTHER]),
        "length": _entries(found["length"], total, [name for _, name in LENGTH_BANDS]),
        "age": _entries(found["age"], total, [name for _, name in AGE_BANDS]),
    }
