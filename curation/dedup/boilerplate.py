"""Text a whole source shares: the lines of a report template ("**Browser / Version**: ...",
"Steps to Reproduce:"), a test harness's stack frames, a mail footer. Two reports alike only in
those are two reports from one form, not one incident, so the fresh rule
(`curation.dedup.rules`) compares what is left once they are taken out.

A line is common to a source when, normalised (`ingest.normalisation.normalise_line`, so numbers
and ids are masked), it occurs in at least `MIN_ITEMS` of the source's items and in at least
`MIN_SHARE` of them. Counted over the source's most recent `SAMPLE` items; a source of fewer than
`MIN_SOURCE` items has no common lines (too little to tell a template from a coincidence).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ingest.normalisation import normalise_line

MIN_ITEMS = 5
MIN_SHARE = 0.002
MIN_SOURCE = 20
SAMPLE = 5000


def text_lines(text: str) -> list[str]:
    """The normalised, non-empty lines of `text`, in order."""
    return [line for line in (normalise_line(raw) for raw in text.splitlines()) if line]


@dataclass(frozen=True)
class CommonLines:
    """The normalised lines common to a source (see the module docstring)."""

    lines: frozenset[str] = frozenset()

    def distinctive(self, text: str) -> tuple[str, float]:
        """`text` without its common lines (the raw lines kept, in order), and the share of its
        normalised characters taken out (0 when nothing was)."""
        if not self.lines:
            return text, 0.0
        kept: list[str] = []
        total = removed = 0
        for raw in text.splitlines():
            line = normalise_line(raw)
            total += len(line)
            if line in self.lines:
                removed += len(line)
            else:
                kept.append(raw)
        return "\n".join(kept), (removed / total if total else 0.0)

    def __or__(self, other: CommonLines) -> CommonLines:
        return CommonLines(self.lines | other.lines)


def common_lines(texts: Iterable[str]) -> CommonLines:
    """The lines common to the items whose texts are `texts` (one source's; see the module docstring)."""
    counts: Counter[str] = Counter()
    items = 0
    for text in texts:
        items += 1
        counts.update(set(text_lines(text)))
    if items < MIN_SOURCE:
        return CommonLines()
    floor = max(MIN_ITEMS, MIN_SHARE * items)
    return CommonLines(frozenset(line for line, count in counts.items() if count >= floor))
