"""Network and e-mail heuristics: where e-mail, IPv4 and IPv6 addresses stand in free text.

Contracts:

* Each function yields the ``(start, end)`` spans of one family, in order and never overlapping.
* E-mail addresses are the common subset of RFC 5322: a dot-atom local part and a dotted host
  name with an alphabetic TLD.
* An IP address is yielded only if `ipaddress` accepts it; a dotted quad that reads as a
  four-part version number (``jackson 2.9.10.3``) is not, unless it looks networked.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from itertools import pairwise

__all__ = ["email_spans", "ipv4_spans", "ipv6_spans"]

# The common subset of RFC 5322: a dot-atom local part (Unicode letters allowed) and a dotted host
# name with an alphabetic TLD. Quoted local parts and IP-literal domains are not matched.
_EMAIL_RE = re.compile(
    r"(?<![\w.%+\-])"
    r"[\w.%+\-]+"
    r"@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,63}"
    r"(?![A-Za-z0-9\-])"
)


def email_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yields the spans of e-mail addresses, in order."""
    for match in _EMAIL_RE.finditer(text):
        yield match.span()


# Candidates only; `ipaddress` decides. The look-arounds keep version strings (2.7.3),
# longer dotted numbers (1.2.3.4.5) and identifiers (v1.2.3.4) out.
# The look-behind sits after the first digit so the engine can skip to digits quickly.
_IPV4_RE = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\w|\.\d)")
_IPV6_RE = re.compile(
    r"(?<![\w.])(?<!::)(?<!\w:(?=:))"
    r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}"
    r"(?:(?:\.\d{1,3}){3})?"
    r"(?![\w:]|\.\d)"
)
# Any valid IPv6 address has a "::" or seven colons; most texts have neither.
_IPV6_GATE = re.compile(r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")


def ipv6_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yields the spans of valid IPv6 addresses (with an embedded IPv4 tail, if any), in order."""
    if _IPV6_GATE.search(text) is None:
        return
    for match in _IPV6_RE.finditer(text):
        start, end = match.span()
        # "addr fe80::1:" ends a clause with a colon that is not part of the address.
        if end - start > 2 and text[end - 1] == ":" and text[end - 2] != ":":
            end -= 1
        candidate = text[start:end]
        # Requiring a digit keeps "::" (Scala cons, C++ scope) and hex words like "face::add" out.
        if not any(c.isdigit() for c in candidate):
            continue
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield start, end


# Four-part version numbers (jackson 2.9.10.3, HDP-2.6.5.165) are valid dotted quads too; they
# are recognised by the words just before them on the same line, unless the address looks
# networked (port, CIDR, "/", "@").
_VERSION_WORDS = frozenset(
    {"v", "ver", "version", "versions", "release", "releases", "released", "patched", "through"}
    | {"since", "jdk", "jre", "-->", "->"}
)
_VERSION_STEMS = ("upgrad", "bump", "updat", "downgrad")
_VERSION_AFTER = re.compile(r"-(?:SNAPSHOT|RC\d|alpha|beta)|[ \t]*\(build\b", re.IGNORECASE)
_NETWORK_AFTER = re.compile(r"[:#]\d|/\d{1,2}\b")
_WORD_PUNCTUATION = ",;()[]{}'\"*`"


def _looks_like_version(text: str, start: int, end: int) -> bool:
    if start > 0 and text[start - 1] in "/@[":
        return False
    if _NETWORK_AFTER.match(text, end):
        return False
    if _VERSION_AFTER.match(text, end):
        return True
    before = text[max(text.rfind("\n", 0, start) + 1, start - 48) : start]
    # "hadoop-auth-3.1.1.7", "snappy-java:jar:1.1.8.2"
    if before.endswith(":jar:") or (before[-2:-1].isalpha() and before.endswith("-")):
        return True
    words = [word.strip(_WORD_PUNCTUATION) for word in before.lower().split()]
    # "jackson-databind to 2.9.10.3", "org.apache.derby:derby from 10.10.2.0"
    if len(words) >= 2 and words[-1] in ("to", "from") and any(c in words[-2] for c in "-:"):
        return True
    recent = words[-6:]
    if any(w in _VERSION_WORDS or w.startswith(_VERSION_STEMS) for w in recent):
        return True
    return any(pair == ("fixed", "in") for pair in pairwise(recent))


def ipv4_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yields the spans of valid dotted-quad IPv4 addresses that do not read as version numbers, in order."""
    for match in _IPV4_RE.finditer(text):
        try:
            ipaddress.IPv4Address(match.group())
        except ValueError:
            continue
        start, end = match.span()
        if _looks_like_version(text, start, end):
            continue
        yield start, end
