"""The completion test's margin: how much more a completion resembles its own item's remainder than
the remainders of other items like it.

A clean model's greedy text follows the phrasing it finds common, and how much it writes at all
depends on the kind of item. Where older and newer items are phrased differently, or the model
stops early on items of one kind, plain similarity to the true remainder moves between the bands
with nothing memorised. On the power bench a clean 12M-parameter model that never saw a KEV record
was flagged by plain Levenshtein similarity in 15% of draws over repeated temporal splits: it
wrote almost nothing after the short prefixes of newer items. A completion that reproduces *its*
item is closer to that item's remainder than to the remainders of other items; one that writes a
band's common phrasing, or nothing, is as close to all of them. So each item's similarity is
taken minus its completion's mean similarity to the remainders of `DECOYS` other items of its own
band (the same side of the cutoff) with the nearest remainder lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein

DECOYS = 8
"""Other items of the band whose remainders a completion is compared with."""


def nearest_by_length(lengths: Sequence[int], *, count: int = DECOYS) -> list[list[int]]:
    """For each position, the positions of the `count` others with the nearest lengths (fewer where
    the band holds fewer; ties go to the earlier position), found by walking out from each position
    in length order."""
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    size = len(order)
    found: list[list[int]] = [[] for _ in range(size)]
    for rank, position in enumerate(order):
        low, high = rank - 1, rank + 1
        while len(found[position]) < min(count, size - 1):
            below = lengths[order[low]] if low >= 0 else None
            above = lengths[order[high]] if high < size else None
            take_low = above is None or (below is not None and lengths[position] - below <= above - lengths[position])
            if take_low:
                found[position].append(int(order[low]))
                low -= 1
            else:
                found[position].append(int(order[high]))
                high += 1
    return found


def levenshtein_margins(answers: Sequence[str], remainders: Sequence[str], own: Sequence[float], *, count: int = DECOYS) -> list[float]:
    """For the items of one band: each item's Levenshtein similarity to its own remainder (`own`,
    as `curation.evidence.probing.similarity` scored it) minus the mean normalised Levenshtein
    similarity of its completion (`answers`, as scored: whitespace collapsed, an echoed prefix
    removed) to the remainders (`remainders`, whitespace collapsed) of the `count` other items of
    the band with the nearest remainder lengths. In [-1, 1]; an item alone in its band keeps its
    own similarity (nothing to compare it with)."""
    if not (len(answers) == len(remainders) == len(own)):
        raise ValueError("answers, remainders and own similarities must have one entry per item")
    decoys = nearest_by_length([len(remainder) for remainder in remainders], count=count)
    margins = []
    for index, others in enumerate(decoys):
        baseline = float(np.mean([Levenshtein.normalized_similarity(answers[index], remainders[other]) for other in others])) if others else 0.0
        margins.append(float(own[index]) - baseline)
    return margins


def margins_by_band(answers: Sequence[str], remainders: Sequence[str], own: Sequence[float], in_band: Sequence[bool], *, count: int = DECOYS) -> list[float]:
    """`levenshtein_margins` within each of two bands (the items where `in_band` is true, and the
    rest), in the order given."""
    margins = [0.0] * len(answers)
    for side in (True, False):
        members = [index for index, flag in enumerate(in_band) if flag is side]
        found = levenshtein_margins([answers[i] for i in members], [remainders[i] for i in members], [own[i] for i in members], count=count)
        for index, margin in zip(members, found, strict=True):
            margins[index] = margin
    return margins
