"""Text normalisation for fingerprints. Stored text stays exactly as ingested; only hashes,
sketches and embeddings see this.

The recipe masks what differs between two reports of the same incident without changing what
it is about: markup, links, timestamps, UUIDs, IP addresses, hex ids, hostnames with numeric
suffixes and numbers become typed placeholders, then case and whitespace are folded. Two log
lines that differ only in those are the same text here. `NORMALISATION_VERSION` names the recipe;
it is stored with every fingerprint, so a changed recipe is detected instead of silently mixing
incomparable hashes.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

NORMALISATION_VERSION = "n3"

# Order matters: larger structures first, so their digits are not masked piecemeal as numbers.
# Each mask has a hint: substrings one of which any match contains, or a simpler pattern any match
# contains (none: no hint), so a text without it skips the mask's costlier scan.
_CLOCK = re.compile(r"\d:\d\d:\d\d")
_MASKS: list[tuple[re.Pattern[str], str, tuple[str, ...] | re.Pattern[str]]] = [
    (re.compile(r"\{(?:code|noformat|quote|panel|color)(?::[^}]*)?\}", re.IGNORECASE), " ", ("{",)),  # Jira wiki markup
    (re.compile(r"</?[a-z][a-z0-9]*(?:\s[^<>]{0,200})?/?>"), " ", ("<",)),  # HTML tags (redaction's <EMAIL>, <IPV4> are upper case)
    (re.compile(r"<IPV[46]>"), " <ip> ", ("<IPV",)),
    (re.compile(r"```|`|\*\*|__|~~"), " ", ("`", "**", "__", "~~")),  # Markdown emphasis and code fences
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"')\]]+", re.IGNORECASE), " <url> ", ("://",)),
    # File and URL paths of two or more segments (a request path, a cache file): which one varies.
    (re.compile(r"(?<![\w.:/])/(?:[\w.-]+/)+[\w.-]*"), " <path> ", ("/",)),
    (re.compile(r"\b[a-z]:\\(?:[^\\\s]+\\)+[^\\\s]*", re.IGNORECASE), " <path> ", (":\\",)),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", re.IGNORECASE), " <ts> ", re.compile(r"\d-\d\d[T ]\d", re.IGNORECASE)),
    # syslog and ctime stamps, with the weekday and year when present: "Sun Jun 19 04:08:53 2005"
    (
        re.compile(
            r"\b(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d{1,2}\s+\d{1,2}:\d{2}:\d{2}(?:\s+\d{4}\b)?",
            re.IGNORECASE,
        ),
        " <ts> ",
        _CLOCK,
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), " <ts> ", _CLOCK),
    (re.compile(r"\b\d{4}[-/.]\d{2}[-/.]\d{2}\b|\b\d{2}[-/.]\d{2}[-/.]\d{4}\b"), " <date> ", re.compile(r"\d[-/.]\d\d[-/.]\d")),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE), " <uuid> ", ("-",)),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b"), " <ip> ", re.compile(r"\d\.\d{1,3}\.\d")),
    (re.compile(r"\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){2,7}\b", re.IGNORECASE), " <ip> ", re.compile(r":[0-9a-f]{0,4}:", re.IGNORECASE)),
    (re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE), " <hex> ", ("0x", "0X")),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE), " <hex> ", ()),
    # Host names generated from an address or a serial: 61-220-159-99.hinet-ip.hinet.net, n219076184117.netvigator.com
    # (its first label holds the digits, so a digit runs on to a dot and a letter)
    (re.compile(r"\b(?=(?:[a-z-]*\d){4})[a-z0-9-]+(?:\.[a-z][a-z0-9-]*){2,}\b", re.IGNORECASE), " <host> ", re.compile(r"\d[a-z0-9-]*\.[a-z]", re.IGNORECASE)),
    (re.compile(r"\b([a-z][a-z-]*?)[-_]?\d+((?:\.[a-z][a-z0-9-]*)+)\b", re.IGNORECASE), r" \1<n>\2 ", re.compile(r"\d\.[a-z]", re.IGNORECASE)),  # host-12.example.com
    (re.compile(r"\b([a-z]+[-_]?)-?\d+\b", re.IGNORECASE), r"\1<n>", ()),  # node12, worker-3, blk_-123
    (re.compile(r"[-+]?\d+(?:[.,]\d+)*"), " <n> ", ()),
]
_WHITESPACE = re.compile(r"\s+")


@functools.lru_cache(maxsize=4096)
def normalise_text(text: str) -> str:
    """The text fingerprints are computed from: NFKC, markup removed, volatile tokens masked,
    case-folded, whitespace collapsed. Pure and deterministic for a given `NORMALISATION_VERSION`;
    the last few thousand answers are remembered (curation's rules ask for one item's texts many
    times)."""
    return _normalise(text)


@functools.lru_cache(maxsize=65_536)
def normalise_line(line: str) -> str:
    """`normalise_text` of one line of a text, remembered apart from whole texts: a source's
    template lines recur in most of its items, and would push whole texts out of the other's memory."""
    return _normalise(line)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    for pattern, replacement, hint in _MASKS:
        if _may_match(hint, text):
            text = pattern.sub(replacement, text)
    return _WHITESPACE.sub(" ", text.casefold()).strip()


def _may_match(hint: tuple[str, ...] | re.Pattern[str], text: str) -> bool:
    """False only when `text` lacks what every match of the hint's mask contains."""
    if isinstance(hint, re.Pattern):
        return hint.search(text) is not None
    return not hint or any(needle in text for needle in hint)


def item_text(title: str, input_text: str, reference: str) -> str:
    """The text an item's exact fingerprint covers: title, input and reference, one per line."""
    return "\n".join(part for part in (title, input_text, reference) if part)


def dedup_text(title: str, input_text: str) -> str:
    """The text near-duplicates and paraphrases are judged on: what the model is asked (the title
    and the input), not the answer, which often differs in wording between two reports."""
    if title and input_text.startswith(title):
        return input_text
    return "\n".join(part for part in (title, input_text) if part)


def content_hash(title: str, input_text: str, reference: str) -> str:
    """sha256 (hex) of the normalised item text: equal for items that differ only in volatile tokens."""
    return hashlib.sha256(normalise_text(item_text(title, input_text, reference)).encode("utf-8")).hexdigest()
