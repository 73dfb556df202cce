"""Secret-rule machinery: compiled rules, the refiners that adjust their matches, and span replacement.

Contracts:

* A `SecretRule` yields the spans of one secret format in a text, in order and never
  overlapping; a rule with a gate yields nothing for a text whose lowercased form misses it.
* A `Refiner` maps the span of a raw regex match to the span of the secret itself, or to None
  to drop the match; refiners never look beyond the text they are given.
* `apply_spans` replaces a non-overlapping subset of the candidate spans with ``<kind>``
  placeholders, never touches a placeholder already in the text, and counts what it replaced.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = [
    "Refiner",
    "SecretRule",
    "Span",
    "after_equals",
    "apply_spans",
    "bare_bearer",
    "basic_credentials",
    "clip",
    "extend",
    "isolated",
    "private_key_block",
    "rstrip_dots",
    "trim",
]

Refiner = Callable[[str, int, int], tuple[int, int] | None]
"""Turns the span ``(text, start, end)`` of a raw regex match into the span to replace, or None to drop it."""


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One compiled secret format and the placeholder kind its matches are replaced with.

    `group` is the regex group holding the secret (0 for the whole match); `gate`, when set,
    must match the lowercased text before `pattern` is tried at all; `refiners` run in order
    on each match's span; `anchor`, when set, marks the only places where a match may start.
    """

    kind: str
    pattern: re.Pattern[str]
    group: int
    gate: re.Pattern[str] | None
    refiners: tuple[Refiner, ...]
    anchor: re.Pattern[str] | None = None

    def spans(self, text: str, lowered: str) -> Iterator[tuple[int, int]]:
        """Yields the spans to replace, in order; `lowered` is ``text.lower()`` for the gate."""
        if self.gate is not None and self.gate.search(lowered) is None:
            return
        pos = 0
        if self.anchor is not None:
            # Trying the pattern only where the anchor allows keeps it linear on inputs where a
            # plain search would restart inside the same long run over and over.
            for hit in self.anchor.finditer(text):
                if hit.start() < pos:
                    continue
                match = self.pattern.match(text, hit.start())
                span = self._locate(text, match) if match else None
                if span is not None:
                    yield span
                    pos = span[1]
            return
        while (match := self.pattern.search(text, pos)) is not None:
            span = self._locate(text, match)
            if span is None:
                pos = match.end()
                continue
            yield span
            # Resuming right after the secret, not after the match: some detect-secrets patterns
            # swallow the delimiter a neighbouring secret needs.
            pos = max(span[1], match.start() + 1)

    def _locate(self, text: str, match: re.Match[str]) -> tuple[int, int] | None:
        start, end = match.span(self.group)
        if start < 0:
            return None
        span: tuple[int, int] | None = (start, end)
        for refine in self.refiners:
            if span is None:
                return None
            span = refine(text, span[0], span[1])
        if span is None or span[0] >= span[1]:
            return None
        return span


# --- refiners -------------------------------------------------------------------------------

# Some detect-secrets patterns include the delimiter around the secret ("(?:\s|=|:|\")AKC...").
# A trailing "=" is kept: it is base64 padding, part of the secret.
_TRIM_LEADING = " \t\r\n\f\v=:\"'"
_TRIM_TRAILING = " \t\r\n\f\v\"'"


def trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Strips surrounding whitespace and quotes, and leading ``=`` or ``:`` delimiters, from the span."""
    while start < end and text[start] in _TRIM_LEADING:
        start += 1
    while end > start and text[end - 1] in _TRIM_TRAILING:
        end -= 1
    return start, end


def extend(chars: str) -> Refiner:
    """Extends the span over the run of `chars` (a regex character-class body) that follows it."""
    tail = re.compile(f"[{chars}]*")

    def refine(text: str, start: int, end: int) -> tuple[int, int] | None:
        match = tail.match(text, end)
        return start, (match.end() if match else end)

    return refine


def isolated(before: str, after: str) -> Refiner:
    """Drops a match glued to a longer run of `before` chars on its left or `after` on its right."""
    # A placeholder counts as glued too: it stands for chars that were glued in the original,
    # and treating it otherwise would redact more on a second pass (breaking idempotence).
    left = re.compile(f"[{before}>]")
    right = re.compile(f"[{after}<]")

    def refine(text: str, start: int, end: int) -> tuple[int, int] | None:
        if start > 0 and left.match(text, start - 1):
            return None
        if right.match(text, end):
            return None
        return start, end

    return refine


def clip(chars: str) -> Refiner:
    """Cuts the span at the first char outside `chars` (for patterns that run to end of line)."""
    run = re.compile(f"[{chars}]*")

    def refine(text: str, start: int, end: int) -> tuple[int, int] | None:
        match = run.match(text, start, end)
        return start, (match.end() if match else start)

    return refine


def after_equals(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Starts the span after its first ``=`` (a ``name=value`` match keeps only the value)."""
    cut = text.find("=", start, end)
    return (cut + 1, end) if cut >= 0 else (start, end)


def rstrip_dots(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Drops trailing dots (a sentence's full stop) from the span."""
    while end > start and text[end - 1] == ".":
        end -= 1
    return start, end


_KEY_BLOCK_LEAD = re.compile(r"(?:-+ ?)?\Z")
_KEY_BLOCK_END = re.compile(
    r"END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?(?: ?-+)?|Private-MAC:[ \t]*[0-9A-Fa-f]*"
)


def private_key_block(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Widens a private key's BEGIN marker to the whole block, dashes included."""
    # detect-secrets only matches the BEGIN marker; the key material follows it, so the span
    # runs to the END marker, or to the end of the text when the paste was truncated.
    lead = _KEY_BLOCK_LEAD.search(text, max(0, start - 8), start)
    if lead is not None:
        start = lead.start()
    tail = _KEY_BLOCK_END.search(text, end)
    return start, (tail.end() if tail else len(text))


def bare_bearer(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Keeps a bearer token found outside an ``Authorization`` header only if it is token-shaped."""
    # Without an Authorization header around it, "Bearer" is often just prose ("Bearer tokens
    # expire"), so only something token-shaped counts.
    token = text[start:end]
    if len(token) < 6 or not any(c.isdigit() or c in "._~+/" for c in token):
        return None
    return start, end


def basic_credentials(text: str, start: int, end: int) -> tuple[int, int] | None:
    """Keeps a basic-auth payload only if it is base64 of a printable ``user:password``."""
    # A bare "Basic xyz" is usually prose; require the payload to decode to "user:password".
    token = text[start:end]
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        credentials = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if ":" not in credentials or not credentials.isprintable():
        return None
    return start, end


# --- applying spans -------------------------------------------------------------------------

Span = tuple[int, int, int, str]
"""A candidate replacement ``(start, end, priority, kind)``; priority breaks ties between equally long overlapping spans."""


def apply_spans(text: str, spans: list[Span], counts: dict[str, int], placeholders: re.Pattern[str]) -> str:
    """Replaces non-overlapping spans (earliest, then longest, then lowest priority first) with ``<kind>``.

    `placeholders` matches the placeholders already in `text`, all of the ``<kind>`` form written
    here; a span overlapping one is skipped. Each replacement adds one to ``counts[kind]``.
    `spans` is sorted in place.
    """
    if not spans:
        return text
    spans.sort(key=lambda s: (s[0], s[0] - s[1], s[2]))
    protected: list[tuple[int, int]] = []
    if "<" in text:
        protected = [m.span() for m in placeholders.finditer(text)]
    protected_starts = [start for start, _ in protected]
    pieces: list[str] = []
    cursor = 0
    for start, end, _, kind in spans:
        if start < cursor:
            continue
        if protected:
            # The only placeholders that can overlap [start, end) start before `end`; checking
            # the last of them suffices because placeholders never overlap each other.
            index = bisect_left(protected_starts, end) - 1
            if index >= 0 and protected[index][1] > start:
                continue
        pieces.append(text[cursor:start])
        pieces.append(f"<{kind}>")
        counts[kind] = counts.get(kind, 0) + 1
        cursor = end
    if not pieces:
        return text
    pieces.append(text[cursor:])
    return "".join(pieces)
