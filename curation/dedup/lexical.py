"""Lexical similarity for re-ranking a short list: character n-gram TF-IDF cosine, with document
frequencies taken from the list itself (no corpus-wide index to keep)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer

LEXICAL_CHARACTERS = 2000


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
