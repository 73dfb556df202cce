"""Telling an IPv4 address from a version number (or another dotted number) by what surrounds it.

``2.53.5.1`` and ``10.17.1.0`` are valid dotted quads and, in their texts, versions; ``10.1.2.3``
is an address. Nothing in the digits decides it reliably, the context does. Contracts:

* `dotted_reads_as_address` and `dashed_reads_as_address` are pure functions of the text and the
  span; they look at most a line's worth of characters either side (`_REACH`), so a long text
  costs time linear in its number of candidates.
* The cues, strongest first (the first that applies decides):

  1. Inside a host name (``host129.206.196.21.maximumasp.com``): an address, leading zeros and all.
  2. Networked (a port, a CIDR suffix, ``#53``, ``user@``, ``scheme://``, ``ip-``/``ip=``/``ip``
     just before, ``name/`` as Java prints a resolved host): an address.
  3. Version-shaped (letters glued on, ``Product/`` or a user agent around it, ``-SNAPSHOT`` or
     ``(build`` after, a comparator or ``:jar:`` before, a file path): a version.
  4. A private or shared range (192.168/16, 172.16/12, 100.64/10, 169.254/16): an address, as
     nobody versions software like that.
  5. A ``-letters`` suffix (``8.54.0.21-CA``) or an artifact name glued before it
     (``hadoop-auth-3.1.1.7``): a version.
  6. The nearest of the six words before that says which (``version``, ``upgrade ... to``,
     ``firmware``, an artifact such as ``jackson-databind``, against ``server``, ``rhost``,
     ``connection``).
  7. A sibling in the same text that shares its first two parts and is not a quad (``2.53.12`` near
     ``2.53.5.1``): a version.
  8. Small numbers (first part below 10, second below 100, the rest below 32), as versions are and
     addresses seldom are: a version. Anything else: an address.
"""

from __future__ import annotations

import re
from bisect import bisect_left

__all__ = ["dashed_reads_as_address", "dotted_reads_as_address", "version_series"]

_REACH = 240
"""How far, in characters, cues are looked for on either side of a candidate."""
_WORDS_REACH = 96
"""How far back the six words before a candidate are looked for."""

_PRIVATE_PREFIXES = ((192, 168, 16), (172, 16, 12), (100, 64, 10), (169, 254, 16))
"""(first octet, second octet, prefix length) of the ranges no version number falls in."""

_VERSION_WORDS = frozenset(
    {"v", "ver", "version", "versions", "versioned", "release", "releases", "released", "build", "builds"}
    | {"firmware", "patch", "patched", "through", "since", "before", "prior", "until", "jdk", "jre", "sdk"}
    | {"rev", "revision", "edition", "update", "updated", "updates", "upgrade", "upgraded", "bump", "bumped"}
)
_COMPARATORS = frozenset({"-->", "->", "=>", "<", "<=", ">", ">=", "==", "~>", "^", "~"})
_VERSION_STEMS = ("upgrad", "downgrad", "updat", "bump")
_NETWORK_WORDS = frozenset(
    {"ip", "ips", "inet", "addr", "address", "addresses", "host", "hosts", "hostname", "rhost"}
    | {"server", "servers", "nameserver", "dns", "gateway", "router", "subnet", "network", "peer", "peers"}
    | {"remote", "client", "clients", "src", "dst", "dest", "destination", "connect", "connected"}
    | {"connecting", "connection", "ping", "nslookup", "dig", "traceroute", "ssh", "telnet", "listen"}
    | {"listening", "bind", "bound", "endpoint", "proxy", "vip", "nat", "firewall", "route", "socket"}
)
_PREPOSITIONS = frozenset({"to", "from", "in", "of", "for", "on"})
_FILE_EXTENSIONS = frozenset(
    {"jar", "war", "ear", "pom", "zip", "tar", "gz", "tgz", "bz", "xz", "whl", "rpm", "deb", "msi", "exe"}
    | {"dll", "so", "dylib", "png", "jpg", "jpeg", "gif", "svg", "pdf", "txt", "log", "md", "xml", "json"}
    | {"yaml", "yml", "html", "htm", "js", "py", "java", "class", "sh", "bat", "ps", "cfg", "conf", "ini"}
    | {"csv", "dat", "bin", "img", "iso", "dmg", "pkg", "apk", "ipa", "sig", "asc", "sha", "md5", "final"}
)

_HOST_TAIL = re.compile(r"(?:\.[a-z][a-z0-9-]*)+(?![\w.-])")
"""The rest of a host name after an embedded address: lowercase labels ending at a boundary."""
_HOST_LABEL_BEFORE = re.compile(r"[A-Za-z0-9-]*\Z")
_NETWORK_AFTER = re.compile(r":\d|/\d{1,2}(?!\d|\.\d)|#\d")
_VERSION_AFTER = re.compile(r"-(?:SNAPSHOT|RC\d|alpha|beta|M\d)|[ \t]*\(build\b|\.[A-Za-z]|[A-Za-z_]", re.IGNORECASE)
_SUFFIX_AFTER = re.compile(r"-[A-Za-z]")
# Both end with the candidate: matched against the last `_WORDS_REACH` characters only.
_PRODUCT_BEFORE = re.compile(r"(?<![\w.-])[A-Z][a-z]+(?:[A-Z][a-z]*)*/\Z")
_PATH_BEFORE = re.compile(r"/[\w.-]+/\Z")
_USER_AGENT = re.compile(r"Mozilla/\d|AppleWebKit/|Gecko/|\(Windows NT |\(X11;|\(Macintosh;")
_ARTIFACT = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z][a-z0-9]*)+|[a-z][\w.-]*:[a-z][\w.-]*", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z0-9]*")
_PLACEHOLDER = re.compile(r"<[A-Z0-9]+(?::[a-z0-9-]+)?>")
_SERIES = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})((?:\.\w+)+)")


def _in_range(octets: tuple[int, ...], first: int, second: int, length: int) -> bool:
    if octets[0] != first:
        return False
    mask = 0xFF & (0xFF << (16 - length))
    return (octets[1] & mask) == second


def _line_before(text: str, start: int) -> str:
    return text[max(text.rfind("\n", max(0, start - _REACH), start) + 1, start - _REACH) : start]


def _in_host_name(text: str, start: int, end: int) -> bool:
    """The address is one or more labels of a dotted host name (``dsl-059.45.101.203.example.net``)."""
    # A host name is at most 253 characters: bounding the match keeps long dotted runs linear.
    limit = min(len(text), end + 253)
    tail = _HOST_TAIL.match(text, end, limit)
    if tail is None or (tail.end() == limit and limit < len(text)):
        return False
    last = tail.group().rsplit(".", 1)[-1]
    if last in _FILE_EXTENSIONS or not last.isalpha() or len(last) < 2:
        return False
    # Labels glued before it must be host-name characters: "host129.206..." yes, "V1.5.1.5" (after "_") no.
    head = _HOST_LABEL_BEFORE.search(text, max(0, start - 63), start)
    return head is not None and (head.start() == 0 or text[head.start() - 1] not in "_~")


def _product_or_path(before: str) -> bool:
    tail = max(0, len(before) - _WORDS_REACH)
    return _PRODUCT_BEFORE.search(before, tail) is not None or _PATH_BEFORE.search(before, tail) is not None


def _networked(text: str, start: int, end: int, before: str) -> bool:
    if _NETWORK_AFTER.match(text, end):
        return True
    if before.endswith(("@", "://", "ip-", "IP-")):
        return True
    if before.endswith("/") and not _product_or_path(before):
        return True  # "nn1/10.0.0.12", "ip=/172.25.41.195": Java's host/address
    words = _WORD.findall(before[-16:].lower())
    return bool(words) and words[-1] in ("ip", "inet", "mip") and not before[-1:].isalnum()


def _version_shaped(text: str, start: int, end: int, before: str) -> bool:
    if before[-1:].isalnum() or before[-1:] == "_":
        return True  # "v1.2.3.4", "ddcMD1.1.17", "Vigor300B_V1.5.1.5"
    if _VERSION_AFTER.match(text, end):
        return True
    if before.endswith("/") and _product_or_path(before):
        return True  # "SeaMonkey/2.53.5.1", "/usr/ddp/3.1.4.0"
    if before.endswith((":jar:", ".jar:", "~~", "[,", "(,")):
        return True
    agent = _USER_AGENT.search(before)
    return agent is not None and '"' not in before[agent.end() :]


def _private(octets: tuple[int, ...]) -> bool:
    return any(_in_range(octets, *prefix) for prefix in _PRIVATE_PREFIXES)


def _nearest_word_says(before: str) -> bool | None:
    """True if the nearest telling word before is a network word, False if a version word (or an
    artifact name), None if none of the last six words tells."""
    # The token glued to the candidate ("rhost=", "(") counts as the nearest word; a placeholder
    # left by redaction ("<EMAIL>") is no word at all.
    tokens = _PLACEHOLDER.sub(" ", before[-_WORDS_REACH:]).split()[-6:]
    if not tokens:
        return None
    # "Upgrade Huawei OBS client to 3.22.3.1": the verb governs the nouns between it and "to".
    if tokens[-1].lower() == "to" and any(w.startswith(_VERSION_STEMS) for t in tokens for w in _WORD.findall(t.lower())):
        return False
    for distance, token in enumerate(reversed(tokens), start=1):
        if token in _COMPARATORS:
            return False
        parts = _WORD.findall(token.lower())
        if any(p in _VERSION_WORDS or p.startswith(_VERSION_STEMS) for p in parts):
            return False
        if any(p in _NETWORK_WORDS for p in parts):
            return True
        bare = token.strip(",;()[]{}'\"*`<>=~")
        # "jackson-databind 2.9.10.3", "org.apache.derby:derby to 10.17.1.0", "hadoop-auth-3.1.1.7"
        artifact = _ARTIFACT.fullmatch(bare.rstrip("-")) is not None and not bare.startswith("ip-")
        if artifact and (distance == 1 or (distance == 2 and tokens[-1].lower() in _PREPOSITIONS)):
            return False
        if distance == 2 and (tokens[-2].lower(), tokens[-1].lower()) == ("fixed", "in"):
            return False
    return None


def version_series(text: str) -> dict[tuple[int, int], list[int]]:
    """Where the dotted numbers of `text` that are not quads stand (``2.53.12``, ``2.53.x``,
    ``2.53.5.1.2``), by their first two parts: the evidence `dotted_reads_as_address` takes as
    `series`. Computed once per text, in one pass."""
    series: dict[tuple[int, int], list[int]] = {}
    for match in _SERIES.finditer(text):
        if match.end() == len(text):
            continue  # a number cut off by the end of the text ("10.222.25") is no evidence
        rest = match.group(3).split(".")[1:]
        if len(rest) != 2 or not all(part.isdigit() for part in rest):
            series.setdefault((int(match.group(1)), int(match.group(2))), []).append(match.start())
    return series


def _in_series(start: int, octets: tuple[int, ...], series: dict[tuple[int, int], list[int]]) -> bool:
    positions = series.get((octets[0], octets[1]))
    if not positions:
        return False
    index = bisect_left(positions, start - _REACH)
    return index < len(positions) and positions[index] <= start + _REACH


def _small(octets: tuple[int, ...]) -> bool:
    return octets[0] < 10 and octets[1] < 100 and octets[2] < 32 and octets[3] < 32


def dotted_reads_as_address(
    text: str, start: int, end: int, octets: tuple[int, ...], *, padded: bool, series: dict[tuple[int, int], list[int]]
) -> bool:
    """Whether the dotted quad ``text[start:end]`` (its parts `octets`, all <= 255; `padded` if
    any has a leading zero) is an address in this context rather than a version or another
    number; `series` is `version_series` of the text."""
    if _in_host_name(text, start, end):
        return True
    if padded:
        return False
    before = _line_before(text, start)
    if _networked(text, start, end, before):
        return True
    if _version_shaped(text, start, end, before):
        return False
    if _private(octets):
        return True
    if _SUFFIX_AFTER.match(text, end):
        return False  # "8.54.0.21-CA", "2.263.4.2-rolling"
    if before.endswith("-") and before[-2:-1].isalpha():
        return False  # "HDP-2.6.5.165", "hadoop-auth-3.1.1.7": an artifact's version
    said = _nearest_word_says(before)
    if said is not None:
        return said
    if _in_series(start, octets, series):
        return False  # "worse than 2.53.5.1" near "2.53.12"
    return not _small(octets)


_DASHED_TOKEN_BEFORE = re.compile(r"[A-Za-z0-9]*-\Z")


def dashed_reads_as_address(text: str, start: int, end: int) -> bool:
    """Whether the dashed quad ``text[start:end]`` (``ip-10-0-1-23``, ``82-68-222-195.dsl.example``)
    is an address: only inside a host name or after ``ip-``, never in a slug that names versions."""
    before = _line_before(text, start)
    if before.endswith("-"):
        label = _DASHED_TOKEN_BEFORE.search(before)
        if label is None or not any(c.isalpha() for c in label.group()):
            return False  # "2020-12-25-08-32-32": part of a longer run of numbers
    slug = _PLACEHOLDER.sub(" ", re.split(r"[\s/]", before)[-1]).lower()
    if any(word in _VERSION_WORDS or word.startswith(_VERSION_STEMS) for word in _WORD.findall(slug)):
        return False  # "Versions-before-9-4-0-1"
    if _in_host_name(text, start, end) or before.lower().endswith("ip-"):
        return True
    # "nn2-192-168-1-100/192.168.1.100:9000": a host name Java prints before its address
    return before.endswith("-") and (text.startswith("/", end) or _NETWORK_AFTER.match(text, end) is not None)
