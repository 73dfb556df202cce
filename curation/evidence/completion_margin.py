"""The completion test's margin: how much more a completion resembles its own item's remainder than
the remainders of other items like it.

A clean model's greedy text follows the phrasing it finds common, and how much it writes at all
depends on the kind of item. Where older and newer items are phrased differently, or the model
stops early on items of one kind, plain similarity to the true remainder moves between the bands
with nothing memorised. On the power bench a clean 12M-parameter model that never saw a KEV record
was flagged by plain Levenshtein similarity in 14% of draws over repeated temporal splits: it
wrote almost nothing after the short prefixes of newer items. A completion that reproduces *its*
item is closer to that item's remainder than to the remainders of other items; one that writes a
band's common phrasing, or nothing, is as close to all of them. So each item's similarity is
taken minus its completion's mean similarity to the remainders of `DECOYS` other items of its own
band (the same side of the cutoff) with the nearest remainder lengths.

A model also copies from what it was shown: KEV's descriptions repeat the vendor and product named
in their first half, and a model that writes them again is closer to its own remainder than to the
others' without having seen anything (a clean 12M-parameter model was still flagged in 10% of
draws that way). So the words of the item's own prefix are left out of the completion and of every
remainder it is compared with: only what the prefix did not give counts. (Leaving each other
remainder's own prefix words out of it too was measured on the same bench and let more clean
draws through: 6.8% against 3.6%.)
"""

from __future__ import annotations

import string
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


def prefix_words(prefix: str) -> frozenset[str]:
    """The words of `prefix`, lower-cased and without surrounding punctuation."""
    return frozenset(word for word in (token.strip(string.punctuation).lower() for token in prefix.split()) if word)


def without_words(text: str, words: frozenset[str]) -> str:
    """`text` without the whitespace-separated tokens whose word (as `prefix_words` reads it) is in `words`."""
    return " ".join(token for token in text.split() if token.strip(string.punctuation).lower() not in words)


def _similarity(answer: str, remainder: str) -> float:
    """Normalised Levenshtein similarity; 0 where either side is empty (nothing reproduced, or nothing to reproduce)."""
    return float(Levenshtein.normalized_similarity(answer, remainder)) if answer and remainder else 0.0


def levenshtein_margins(answers: Sequence[str], remainders: Sequence[str], prefixes: Sequence[str], *, count: int = DECOYS) -> list[float]:
    """For the items of one band: each completion's Levenshtein similarity to its own remainder
    minus its mean similarity to the remainders of the `count` other items of the band with the
    nearest remainder lengths, every text without the words of the item's own prefix
    (`prefix_words`). `answers` are the completions as scored (whitespace collapsed, an echoed
    prefix removed), `remainders` the true remainders (whitespace collapsed), `prefixes` what each
    model was shown. In [-1, 1]; 0 for an item whose remainder holds only words of its prefix (there
    is nothing it could reproduce without having been shown it); an item alone in its band keeps its
    own similarity (nothing to compare it with)."""
    if not (len(answers) == len(remainders) == len(prefixes)):
        raise ValueError("answers, remainders and prefixes must have one entry per item")
    decoys = nearest_by_length([len(remainder) for remainder in remainders], count=count)
    margins = []
    for index, others in enumerate(decoys):
        shown = prefix_words(prefixes[index])
        answer, own = without_words(answers[index], shown), without_words(remainders[index], shown)
        if not own:
            margins.append(0.0)
            continue
        baseline = float(np.mean([_similarity(answer, without_words(remainders[other], shown)) for other in others])) if others else 0.0
        margins.append(_similarity(answer, own) - baseline)
    return margins


def margins_by_band(answers: Sequence[str], remainders: Sequence[str], prefixes: Sequence[str], in_band: Sequence[bool], *, count: int = DECOYS) -> list[float]:
    """`levenshtein_margins` within each of two bands (the items where `in_band` is true, and the
    rest), in the order given."""
    margins = [0.0] * len(answers)
    for side in (True, False):
        members = [index for index, flag in enumerate(in_band) if flag is side]
        found = levenshtein_margins([answers[i] for i in members], [remainders[i] for i in members], [prefixes[i] for i in members], count=count)
        for index, margin in zip(members, found, strict=True):
            margins[index] = margin
    return margins
