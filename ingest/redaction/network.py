"""Network and e-mail heuristics: where e-mail, IPv4 and IPv6 addresses stand in free text.

Contracts:

* Each function yields the ``(start, end)`` spans of one family, in order and never overlapping.
* E-mail addresses are the common subset of RFC 5322: a dot-atom local part and a dotted host
  name with an alphabetic TLD.
* An IP address is yielded only if it is one (parts of at most 255, `ipaddress` accepts IPv6),
  reads as an address in its context (a dotted quad that reads as a version, ``jackson
  2.9.10.3``, ``SeaMonkey/2.53.5.1``, is not: `ingest.redaction.address_context`), and identifies
  someone's infrastructure (`identifies_nobody`: loopback, ``0.0.0.0``, documentation ranges and
  public resolvers are content and are kept).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from ingest.redaction.address_context import dashed_reads_as_address, dotted_reads_as_address, version_series

__all__ = ["email_spans", "identifies_nobody", "ipv4_spans", "ipv6_spans"]

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


# Candidates only; the parts' values and the context decide. The look-arounds keep shorter and
# longer dotted numbers (2.7.3, 1.2.3.4.5) out; letters may touch a candidate (a host name's
# "host129.206.196.21.example.com", a version's "v1.2.3.4"): the context tells which.
# The look-behinds sit after the first digit so the engine can skip to digits quickly.
_IPV4_RE = re.compile(r"\d(?<![\d.]\d)\d{0,2}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?!\d|\.\d)")
_DASHED_RE = re.compile(r"\d(?<!\d\d)\d{0,2}-\d{1,3}-\d{1,3}-\d{1,3}(?!\d|-\d)")
_DASHED_GATE = re.compile(r"\d-\d{1,3}-\d{1,3}-\d")
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
            address = ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        if identifies_nobody(address):
            continue
        yield start, end


def ipv4_spans(text: str) -> Iterator[tuple[int, int]]:
    """Yields the spans of IPv4 addresses that identify a host, in order: dotted quads that read as
    addresses in their context (not versions, see `ingest.redaction.address_context`), and dashed
    quads inside host names (``ip-10-0-1-23``); addresses that identify nobody (`identifies_nobody`)
    are left out."""
    spans = list(_dotted_spans(text))
    if "-" in text and _DASHED_GATE.search(text) is not None:
        spans.extend(_dashed_spans(text))
        spans.sort()
    yield from spans


def _octets(parts: list[str]) -> tuple[int, ...] | None:
    octets = tuple(int(part) for part in parts)
    return octets if all(octet <= 255 for octet in octets) else None


def _dotted_spans(text: str) -> Iterator[tuple[int, int]]:
    series: dict[tuple[int, int], list[int]] | None = None
    for match in _IPV4_RE.finditer(text):
        parts = match.group().split(".")
        octets = _octets(parts)
        if octets is None:
            continue
        padded = any(len(part) > 1 and part[0] == "0" for part in parts)
        start, end = match.span()
        if series is None:
            series = version_series(text)
        if not dotted_reads_as_address(text, start, end, octets, padded=padded, series=series):
            continue
        if identifies_nobody(octets):
            continue
        yield start, end


def _dashed_spans(text: str) -> Iterator[tuple[int, int]]:
    for match in _DASHED_RE.finditer(text):
        octets = _octets(match.group().split("-"))
        if octets is None or identifies_nobody(octets):
            continue
        start, end = match.span()
        if dashed_reads_as_address(text, start, end):
            yield start, end


# Addresses that identify no team's infrastructure: the same for everyone (loopback, "this
# network", the cloud metadata service, public resolvers), reserved for examples (RFC 5737,
# RFC 3849), or not an address at all (netmasks). They are content, so they are kept.
_NOBODY_V4 = tuple(
    ipaddress.IPv4Network(network)
    for network in ("0.0.0.0/8", "127.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)
_NOBODY_V6 = tuple(ipaddress.IPv6Network(network) for network in ("::/128", "::1/128", "2001:db8::/32"))
_PUBLIC_RESOLVERS = frozenset(
    ipaddress.ip_address(address)
    for address in (
        *("1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4", "9.9.9.9", "149.112.112.112", "208.67.222.222"),
        *("208.67.220.220", "4.2.2.1", "4.2.2.2", "169.254.169.254", "255.255.255.255"),
        *("2606:4700:4700::1111", "2606:4700:4700::1001", "2001:4860:4860::8888", "2001:4860:4860::8844"),
        *("2620:fe::fe", "2620:fe::9", "fd00:ec2::254"),
    )
)
_NETMASKS = frozenset((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF for length in range(8, 33))


def identifies_nobody(address: tuple[int, ...] | ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address (octets or an `ipaddress` object) identifies no one's infrastructure:
    loopback, unspecified and "this network" (0.0.0.0/8), documentation ranges, well-known public
    resolvers, the cloud metadata service (169.254.169.254), broadcast, and netmasks (255.255.255.0)."""
    if isinstance(address, tuple):
        address = ipaddress.IPv4Address(bytes(address))
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return identifies_nobody(mapped)
        return address in _PUBLIC_RESOLVERS or any(address in network for network in _NOBODY_V6)
    if int(address) in _NETMASKS:
        return True
    return address in _PUBLIC_RESOLVERS or any(address in network for network in _NOBODY_V4)
