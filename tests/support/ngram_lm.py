"""A real smoothed language model small enough to train in the test setup: a character n-gram
model with Witten–Bell interpolation, whose tokens are single characters.

Trained on some texts a few times among other text, it gives those texts higher probabilities
without being able to write them out greedily, which is what a real model that saw an item a few
times does (and what the log-probability tests are for). Served by `tests.support.ngram_server`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

UNKNOWN = "\ufffd"
"""Stands for every character the training text lacked (it keeps a share of the base distribution)."""


@dataclass
class CharNgramModel:
    """P(c | h) = (C(h, c) + T(h) · P(c | h')) / (C(h) + T(h)) for every context h of up to
    `order − 1` characters (h' is h less its first character; T(h) the number of distinct characters
    seen after h), down to a uniform distribution over the vocabulary. The start of a text is
    padded, so its first character is predicted too."""

    order: int
    vocabulary: list[str]
    followers: dict[str, dict[int, int]] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict)
    _cache: dict[str, np.ndarray] = field(default_factory=dict)

    PAD = "\x02"

    @classmethod
    def train(cls, texts: Iterable[str], order: int = 5) -> CharNgramModel:
        """Count every context of up to `order − 1` characters in `texts` (a text listed three times counts three times)."""
        if order < 1:
            raise ValueError(f"order must be at least 1 (got {order})")
        texts = list(texts)
        vocabulary = sorted({char for text in texts for char in text} | {UNKNOWN})
        index = {char: position for position, char in enumerate(vocabulary)}
        counts: dict[str, Counter[int]] = defaultdict(Counter)
        for text in texts:
            padded = cls.PAD * (order - 1) + text
            for position in range(order - 1, len(padded)):
                target = index[padded[position]]
                for size in range(order):
                    counts[padded[position - size : position]][target] += 1
        model = cls(order=order, vocabulary=vocabulary, _index=index)
        model.followers = {context: dict(counter) for context, counter in counts.items()}
        return model

    def distribution(self, context: str) -> np.ndarray:
        """The next character's probabilities over `vocabulary`, after `context`."""
        padded = (self.PAD * (self.order - 1) + context)[-(self.order - 1) :] if self.order > 1 else ""
        cached = self._cache.get(padded)
        if cached is not None:
            return cached
        probabilities = np.full(len(self.vocabulary), 1.0 / len(self.vocabulary))
        for size in range(0, self.order):
            history = padded[len(padded) - size :] if size else ""
            seen = self.followers.get(history)
            if not seen:
                break
            total, distinct = sum(seen.values()), len(seen)
            counts = np.zeros(len(self.vocabulary))
            counts[list(seen)] = list(seen.values())
            probabilities = (counts + distinct * probabilities) / (total + distinct)
        if len(self._cache) < 500_000:
            self._cache[padded] = probabilities
        return probabilities

    def token_logprobs(self, text: str, top: int = 5) -> list[tuple[str, float, dict[str, float]]]:
        """Each character of `text` with its log-probability given the characters before it and the
        log-probabilities of the `top` likeliest characters at its position."""
        scored = []
        for position, char in enumerate(text):
            probabilities = self.distribution(text[:position])
            own = probabilities[self._index.get(char, self._index[UNKNOWN])]
            best = np.argsort(probabilities)[::-1][:top]
            scored.append((char, math.log(own), {self.vocabulary[index]: math.log(probabilities[index]) for index in best}))
        return scored

    def greedy(self, text: str, max_chars: int) -> tuple[str, str]:
        """The likeliest continuation of `text`, one character at a time (at most `max_chars`), and
        why it stopped (`stop` at a newline, else `length`)."""
        produced = ""
        while len(produced) < max_chars:
            char = self.vocabulary[int(np.argmax(self.distribution(text + produced)))]
            if char == "\n":
                return produced, "stop"
            produced += char
        return produced, "length"
