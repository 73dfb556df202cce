"""What an embedding model cannot read: per text, the share of its characters that the model's own
tokenizer maps to the unknown token or can only spell out piece by piece.

An English vocabulary turns most Chinese characters, many Japanese and Korean ones and emoji into
`[UNK]`, and spells Cyrillic or Hangul words out a letter at a time. Either way the model has
nothing it learned to read: two unrelated texts of that kind embed close together (short Chinese
titles at cosine 0.81-0.99), and an embedding match between them is no evidence. Measured with
`bench/unreadable_text.py` on titles written in seven kinds of text:

| text | [UNK] tokens | characters unknown | characters unknown or spelled out | distinct pairs at title cosine >= 0.70 |
|---|---|---|---|---|
| Chinese | 0.81 | 0.79 | 0.79 | 0.15 |
| Russian | 0.00 | 0.00 | 0.92 | 0.09 |
| Japanese | 0.25 | 0.28 | 0.84 | 0.05 |
| Korean | 0.06 | 0.24 | 0.70 | 0.36 |
| emoji-heavy | 0.55 | 0.36 | 0.36 | 0.03 |
| English, code | 0.00 | 0.00 | 0.00 | 0.00 |

Unknown tokens alone miss Russian and most Korean, whose distinct titles look alike too, so the
share counts both: a character is unreadable when it lies in an `[UNK]` token, or in a word of at
least `SPELLED_MIN_CHARACTERS` characters split into nearly one piece per character
(`SPELLED_PIECES`). The share is taken over the characters the model reads (the text up to its
`max_seq_length` tokens), whitespace left out. A multilingual model's tokenizer reads these
scripts in word pieces, and their share falls near zero: it is always the configured model's
tokenizer that measures.

The unreadable share of a text is measured here, by the encoder's model; curation reads it as
evidence (`curation.dedup.readability`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

# A word this long split into at least this many pieces per character is spelled out, not read.
SPELLED_MIN_CHARACTERS = 3
SPELLED_PIECES = 0.75


class ReadabilityMeter:
    """The unreadable share of texts by one model's fast tokenizer (`tokenizers.Tokenizer`)."""

    def __init__(self, tokenizer: Any, *, max_seq_length: int | None = None) -> None:
        tokenizer.no_padding()
        if max_seq_length is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(max_length=max_seq_length)
        self._tokenizer = tokenizer
        self._unknown = _unknown_id(tokenizer)

    @classmethod
    def from_model_folder(cls, path: str | Path, *, max_seq_length: int | None = None) -> ReadabilityMeter:
        """The meter of the model in `path` (its `tokenizer.json`), reading at most `max_seq_length`
        tokens of a text as the model does; FileNotFoundError when the folder has no fast tokenizer."""
        from tokenizers import Tokenizer

        file = Path(path) / "tokenizer.json"
        if not file.is_file():
            raise FileNotFoundError(f"{file} does not exist: the unreadable share is measured with the embedding model's own fast tokenizer")
        return cls(Tokenizer.from_file(str(file)), max_seq_length=max_seq_length)

    def shares(self, texts: Sequence[str]) -> list[float]:
        """Per text, the share of its non-space characters (up to where the model stops reading)
        that lie in an unknown token or a spelled-out word; 0.0 for a text with none."""
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [self._share(text, encoding) for text, encoding in zip(texts, encodings, strict=True)]

    def _share(self, text: str, encoding: Any) -> float:
        if not encoding.ids:
            return 0.0
        end = max(stop for _, stop in encoding.offsets)
        visible = sum(1 for character in text[:end] if not character.isspace())
        if not visible:
            return 0.0
        unreadable: set[int] = set()
        words: dict[int | None, list[tuple[int, int]]] = {}
        for token, (start, stop), word in zip(encoding.ids, encoding.offsets, encoding.word_ids, strict=True):
            if token == self._unknown:
                unreadable.update(range(start, stop))
            words.setdefault(word, []).append((start, stop))
        for word, pieces in words.items():
            if word is None:
                continue
            span = {position for start, stop in pieces for position in range(start, stop)}
            if len(span) >= SPELLED_MIN_CHARACTERS and len(pieces) >= SPELLED_PIECES * len(span):
                unreadable |= span
        return sum(1 for position in unreadable if position < len(text) and not text[position].isspace()) / visible


def _unknown_id(tokenizer: Any) -> int | None:
    """The id of the vocabulary's unknown token (WordPiece's `[UNK]`, SentencePiece's `<unk>`), if any."""
    vocabulary = tokenizer.get_vocab()
    named = getattr(getattr(tokenizer, "model", None), "unk_token", None)
    for name in (named, "[UNK]", "<unk>"):
        if isinstance(name, str) and name in vocabulary:
            return int(vocabulary[name])
    return None
