"""Near-verbatim sketches: MinHash over word shingles of the normalised text, computed in bulk
and stored as LeanMinHash bytes (little-endian) beside the recipe that made them.

A recipe (`MinHashRecipe.key`) names everything that makes two sketches comparable: the
normalisation version, the shingling, the number of permutations, the seed and datasketch's
hashing scheme (whose default changed in datasketch 2.0). Sketches of different recipes are never
compared: the index refuses to mix them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHash
from numpy.typing import NDArray

from ingest.normalisation import NORMALISATION_VERSION, normalise_text

BYTE_ORDER = "<"
# datasketch's serialised layout of an affine-scheme LeanMinHash: seed (int64), the negated number
# of hash values (int32), a scheme code (uint8), then the values (uint32 or uint64).
_HEADER = 13
_SCHEME_CODES = {"affine32": (1, "<u4"), "affine64": (2, "<u8")}
_TOKEN = re.compile(r"<\w+>|\w+")


@dataclass(frozen=True)
class MinHashRecipe:
    """How sketches are made, from the tokens of the normalised text (words and placeholders,
    punctuation dropped). A text of at most `short_tokens` tokens is sketched over its single
    tokens and token pairs: in a one-line message, one changed word would remove most of its
    3-grams, while its pairs still tell the word order. A longer text is sketched over
    `shingle_words`-grams (the whole text is one shingle when it has fewer tokens)."""

    shingle_words: int = 3
    short_tokens: int = 30
    num_perm: int = 128
    seed: int = 1
    scheme: str = "affine32"
    normalisation: str = NORMALISATION_VERSION

    def __post_init__(self) -> None:
        if self.shingle_words < 1:
            raise ValueError(f"shingle_words must be at least 1, got {self.shingle_words}")
        if self.short_tokens < 0:
            raise ValueError(f"short_tokens must be 0 (no short texts) or more, got {self.short_tokens}")
        if not 16 <= self.num_perm <= 1024:
            raise ValueError(f"num_perm must be between 16 and 1024, got {self.num_perm}: more permutations estimate Jaccard better but cost more")
        if self.scheme not in ("affine32", "affine64"):
            raise ValueError(f"scheme must be 'affine32' or 'affine64', got {self.scheme!r}")

    @property
    def key(self) -> str:
        return f"{self.normalisation};tok;short{self.short_tokens}u12;word{self.shingle_words};p{self.num_perm};s{self.seed};{self.scheme}"


def tokens(text: str) -> list[str]:
    """The tokens of the normalised `text`: words and masking placeholders, without punctuation."""
    return normalised_tokens(normalise_text(text))


def normalised_tokens(normalised: str) -> list[str]:
    """`tokens` of a text already normalised."""
    return _TOKEN.findall(normalised)


def shingles(text: str, recipe: MinHashRecipe) -> set[bytes]:
    """The shingles `recipe` makes of `text`, as bytes (see `MinHashRecipe`)."""
    words = tokens(text)
    if not words:
        return set()
    if len(words) <= recipe.short_tokens:
        grams = set(words) | {f"{first} {second}" for first, second in pairwise(words)}
    elif len(words) <= recipe.shingle_words:
        grams = {" ".join(words)}
    else:
        size = recipe.shingle_words
        grams = {" ".join(words[index : index + size]) for index in range(len(words) - size + 1)}
    return {gram.encode("utf-8") for gram in grams}


def sketch_texts(texts: Iterable[str], recipe: MinHashRecipe) -> list[LeanMinHash]:
    """One LeanMinHash per text, computed with datasketch's bulk API."""
    shingle_sets = [sorted(shingles(text, recipe)) for text in texts]
    sketches = MinHash.bulk(shingle_sets, num_perm=recipe.num_perm, seed=recipe.seed, scheme=recipe.scheme)
    return [LeanMinHash(sketch) for sketch in sketches]


def to_bytes(sketch: LeanMinHash) -> bytes:
    buffer = bytearray(sketch.bytesize(byteorder=BYTE_ORDER))
    sketch.serialize(buffer, byteorder=BYTE_ORDER)
    return bytes(buffer)


def from_bytes(data: bytes, recipe: MinHashRecipe) -> LeanMinHash:
    """Deserialise a stored sketch, refusing one whose seed, size or scheme differ from `recipe`."""
    sketch = LeanMinHash.deserialize(data, byteorder=BYTE_ORDER)
    if (sketch.seed, len(sketch), sketch.scheme) != (recipe.seed, recipe.num_perm, recipe.scheme):
        raise ValueError(f"stored sketch (seed {sketch.seed}, {len(sketch)} permutations, {sketch.scheme}) does not match recipe {recipe.key}")
    return sketch


def sketch_from_values(hashvalues: NDArray[np.unsignedinteger[Any]], recipe: MinHashRecipe) -> LeanMinHash:
    """A LeanMinHash of `recipe` holding the given hash values."""
    return LeanMinHash(seed=recipe.seed, hashvalues=hashvalues, scheme=recipe.scheme)


def values_dtype(recipe: MinHashRecipe) -> np.dtype[np.unsignedinteger[Any]]:
    """The dtype datasketch holds a sketch's hash values in (uint32 for affine32, uint64 for affine64)."""
    return np.dtype(_SCHEME_CODES[recipe.scheme][1]).newbyteorder("=")


def values_from_bytes(blobs: Sequence[bytes], recipe: MinHashRecipe) -> NDArray[np.unsignedinteger[Any]]:
    """The hash values of many stored sketches at once, one row each, in `values_dtype(recipe)`
    (what `from_bytes` reads one at a time, without building an object per sketch). Raises
    ValueError, naming the first bad row, when a sketch's seed, size or scheme differ from `recipe`."""
    code, value_type = _SCHEME_CODES[recipe.scheme]
    width = _HEADER + recipe.num_perm * np.dtype(value_type).itemsize
    if not blobs:
        return np.zeros((0, recipe.num_perm), dtype=values_dtype(recipe))
    for position, blob in enumerate(blobs):
        if len(blob) != width:
            from_bytes(blob, recipe)  # raises with the stored sketch's recipe
            raise ValueError(f"stored sketch {position} has {len(blob)} bytes, expected {width} for recipe {recipe.key}")
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), width)
    seeds = raw[:, :8].copy().view("<i8")[:, 0]
    sizes = raw[:, 8:12].copy().view("<i4")[:, 0]
    good = (seeds == recipe.seed) & (sizes == -recipe.num_perm) & (raw[:, 12] == code)
    if not good.all():
        bad = int(np.argmin(good))
        from_bytes(blobs[bad], recipe)
        raise ValueError(f"stored sketch {bad} does not match recipe {recipe.key}")
    return raw[:, _HEADER:].copy().view(value_type).astype(values_dtype(recipe))
