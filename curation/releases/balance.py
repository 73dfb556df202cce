"""Balanced picking: which of a list of candidates fill a release's places so that its composition
(`curation.releases.composition`) comes as close as it can to target shares.

Greedy over cells: candidates with the same strata in every dimension form a cell, and only the
first of a cell (in the caller's order of preference) can be picked next. Each place goes to the
cell whose strata are furthest below their targets, summed over the dimensions with their
`composition.WEIGHTS`: for a selection growing to n + 1 items, a stratum's shortfall is
`target share x (n + 1) - items already in it`.
Ties go to the cell whose first candidate the caller prefers. A source whose quota is reached
takes no more places. Pure and deterministic: the same candidates in the same order give the same
picks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

from curation.releases.composition import DIMENSIONS, WEIGHTS, Shares, Strata

_TIE = 1e-9


def pick_in_order(
    candidates: Sequence[tuple[int, Strata]], *, places: int, chosen: Mapping[str, Counter[str]], taken: MutableMapping[str, int], quotas: Mapping[str, int]
) -> list[int]:
    """The first `places` of `candidates` (item id, strata) whose source's quota has room, in their
    order; `chosen` (counts by dimension) and `taken` (items by source) are updated."""
    picked: list[int] = []
    for item_id, strata in candidates:
        if len(picked) >= places:
            break
        quota = quotas.get(strata.source)
        if quota is not None and taken.get(strata.source, 0) >= quota:
            continue
        picked.append(item_id)
        count_in(strata, chosen, taken)
    return picked


def pick_balanced(
    candidates: Sequence[tuple[int, Strata]],
    *,
    places: int,
    target: Shares,
    chosen: Mapping[str, Counter[str]],
    taken: MutableMapping[str, int],
    quotas: Mapping[str, int],
) -> list[int]:
    """Up to `places` of `candidates` (item id, strata; most preferred first), picked so that the
    selection, with the items `chosen` already holds (counts by dimension), follows `target`
    (see the module docstring). `chosen` and `taken` (items by source) are updated."""
    if places <= 0 or not candidates:
        return []
    if places >= len(candidates) and all(
        source not in quotas or taken.get(source, 0) + number <= quotas[source] for source, number in Counter(strata.source for _, strata in candidates).items()
    ):
        return pick_in_order(candidates, places=places, chosen=chosen, taken=taken, quotas=quotas)  # room for all: no choice to make
    cells: dict[Strata, list[tuple[int, int]]] = {}
    for rank, (item_id, strata) in enumerate(candidates):
        cells.setdefault(strata, []).append((rank, item_id))
    keys = list(cells)
    vocabulary = [sorted({key[position] for key in keys} | set(target.get(dimension, {})) | set(chosen[dimension])) for position, dimension in enumerate(DIMENSIONS)]
    index = [{value: number for number, value in enumerate(values)} for values in vocabulary]
    where = np.array([[index[position][key[position]] for position in range(len(DIMENSIONS))] for key in keys], dtype=np.int64)
    aims = [np.array([target.get(dimension, {}).get(value, 0.0) for value in vocabulary[position]]) for position, dimension in enumerate(DIMENSIONS)]
    have = [np.array([float(chosen[dimension][value]) for value in vocabulary[position]]) for position, dimension in enumerate(DIMENSIONS)]
    total = sum(chosen[DIMENSIONS[0]].values())
    heads = np.zeros(len(keys), dtype=np.int64)
    sizes = np.array([len(cells[key]) for key in keys], dtype=np.int64)
    head_rank = np.array([cells[key][0][0] for key in keys], dtype=np.float64)
    open_cells = np.ones(len(keys), dtype=bool)
    for number, key in enumerate(keys):
        quota = quotas.get(key.source)
        if quota is not None and taken.get(key.source, 0) >= quota:
            open_cells[number] = False
    picked: list[int] = []
    while len(picked) < places and open_cells.any():
        score = sum(WEIGHTS[dimension] * (aims[position][where[:, position]] * (total + 1) - have[position][where[:, position]]) for position, dimension in enumerate(DIMENSIONS))
        score = np.where(open_cells, score, -np.inf)
        best = score.max()
        cell = int(np.argmin(np.where(score >= best - _TIE, head_rank, np.inf)))
        key = keys[cell]
        _, item_id = cells[key][heads[cell]]
        picked.append(item_id)
        count_in(key, chosen, taken)
        total += 1
        for position in range(len(DIMENSIONS)):
            have[position][where[cell, position]] += 1
        heads[cell] += 1
        if heads[cell] >= sizes[cell]:
            open_cells[cell] = False
        else:
            head_rank[cell] = cells[key][heads[cell]][0]
        quota = quotas.get(key.source)
        if quota is not None and taken.get(key.source, 0) >= quota:
            open_cells &= np.array([other.source != key.source for other in keys])
    return picked


def count_in(strata: Strata, chosen: Mapping[str, Counter[str]], taken: MutableMapping[str, int]) -> None:
    """Count an item of `strata` into a selection's `chosen` (by dimension) and `taken` (by source)."""
    for dimension, value in zip(DIMENSIONS, strata, strict=True):
        chosen[dimension][value] += 1
    taken[strata.source] = taken.get(strata.source, 0) + 1
