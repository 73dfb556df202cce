"""Lexical similarity for re-ranking a short list: character n-gram TF-IDF cosine, with document
frequencies taken from the list itself (no corpus-wide index to keep).

`pair_similarity` is the same measure for one pair, computed without a vectorizer from n-gram
counts kept per text (`character_grams`), so a text weighed against several others is read once:
about a quarter of the cost of `lexical_similarity` on a pair, equal to it to 1e-9
(tests/dedup/unit/test_lexical.py)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer

LEXICAL_CHARACTERS = 2000
_SPACES = re.compile(r"\s\s+")
_SMALLEST, _LARGEST = 3, 5
# Smoothed inverse document frequency over two documents (ln((1 + 2) / (1 + df)) + 1):
# a gram in only one of the two weighs this much more than one in both.
_IDF_ONE_SIDED = math.log(3 / 2) + 1


def lexical_similarity(query: str, candidates: Sequence[str]) -> NDArray[np.float64]:
    """Cosine of `query` to each candidate over character 3-5-grams (TF-IDF, sublinear tf),
    comparing the first `LEXICAL_CHARACTERS` of each text. Returns zeros when there is nothing to compare."""
    if not candidates or not query.strip():
        return np.zeros(len(candidates))
    documents = [query[:LEXICAL_CHARACTERS], *(text[:LEXICAL_CHARACTERS] for text in candidates)]
    try:
        matrix = TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(3, 5), lowercase=True).fit_transform(documents)
    except ValueError:  # nothing but whitespace or punctuation
        return np.zeros(len(candidates))
    return np.asarray((matrix[1:] @ matrix[0].T).toarray()).ravel()


@lru_cache(maxsize=8192)
def character_grams(text: str) -> Counter[str]:
    """The character 3-5-grams of the first `LEXICAL_CHARACTERS` of `text`, lowercased, each word
    padded with a space on either side (scikit-learn's `char_wb` analyser), with their counts."""
    grams: Counter[str] = Counter()
    for word in _SPACES.sub(" ", text[:LEXICAL_CHARACTERS].lower()).split():
        padded = f" {word} "
        for size in range(_SMALLEST, _LARGEST + 1):
            if len(padded) <= size:
                grams[padded] += 1  # a short word counts once, whole
                break
            grams.update(padded[start : start + size] for start in range(len(padded) - size + 1))
    return grams


def pair_similarity(a: str, b: str) -> float:
    """`lexical_similarity(a, [b])[0]`: the cosine of two texts' sublinear TF-IDF vectors of
    character 3-5-grams, document frequencies over the two; 0.0 when either has none."""
    grams_a, grams_b = character_grams(a), character_grams(b)
    if not grams_a or not grams_b:
        return 0.0

    def norm(grams: Counter[str], other: Counter[str]) -> float:
        return math.sqrt(sum(((1 + math.log(count)) * (1.0 if gram in other else _IDF_ONE_SIDED)) ** 2 for gram, count in grams.items()))

    smaller, larger = sorted((grams_a, grams_b), key=len)
    dot = sum((1 + math.log(count)) * (1 + math.log(larger[gram])) for gram, count in smaller.items() if gram in larger)
    return dot / (norm(grams_a, grams_b) * norm(grams_b, grams_a)) if dot else 0.0
