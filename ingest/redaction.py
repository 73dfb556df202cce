"""Redaction of secrets, e-mail addresses and IP addresses in incident text.

Every redacted value is replaced by a fixed, typed placeholder: ``<EMAIL>``, ``<IPV4>``,
``<IPV6>`` or ``<SECRET:kind>`` where ``kind`` is a lowercase slug such as ``aws-access-key``.
Counts are keyed by the text between ``<`` and ``>`` (``"EMAIL"``, ``"SECRET:jwt"``, ...).

Contracts:

* Families run in a fixed order: secrets, then e-mail addresses, then IP addresses, so that a
  password inside a URL or a token is replaced whole before the narrower patterns see it.
* Existing placeholders are never touched, and redaction is idempotent:
  ``redact(redact(x).text).text == redact(x).text`` (the text is passed over again until
  nothing changes, at most a few times).
* A family switched off in the `RedactionPolicy` is not looked for at all.
* Secret formats come from detect-secrets' regex plugins (see `SECRET_PLUGINS`); entropy- and
  keyword-based plugins are deliberately not used because they fire on commit hashes, block ids
  and ordinary prose. The few formats detect-secrets lacks (bearer and basic ``Authorization``
  headers, Google API keys, GitHub fine-grained tokens, ...) are defined here.
* All patterns are compiled once, at import; a `Redactor` holds no per-call state and is safe to
  share between threads.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from pydantic import BaseModel, ConfigDict

__all__ = [
    "EMAIL_PLACEHOLDER",
    "IPV4_PLACEHOLDER",
    "IPV6_PLACEHOLDER",
    "PLACEHOLDER_RE",
    "SECRET_PLUGINS",
    "RedactionPolicy",
    "RedactionResult",
    "Redactor",
    "secret_placeholder",
]

EMAIL_PLACEHOLDER = "<EMAIL>"
IPV4_PLACEHOLDER = "<IPV4>"
IPV6_PLACEHOLDER = "<IPV6>"

PLACEHOLDER_RE = re.compile(r"<(?:EMAIL|IPV4|IPV6|SECRET:[a-z0-9]+(?:-[a-z0-9]+)*)>")
"""Matches any placeholder this module emits; such spans are never redacted again."""


def secret_placeholder(kind: str) -> str:
    """Returns the placeholder for a secret of `kind` (a lowercase slug), e.g. ``<SECRET:jwt>``."""
    return f"<SECRET:{kind}>"


class RedactionPolicy(BaseModel):
    """Which families of sensitive values to redact; every family is on by default."""

    model_config = ConfigDict(extra="forbid")

    secrets: bool = True
    """API keys and tokens of well-known formats, private key blocks, passwords in URLs,
    bearer/basic ``Authorization`` credentials."""
    emails: bool = True
    ip_addresses: bool = True
    """IPv4 and IPv6 addresses (a port suffix is kept)."""


@dataclass(frozen=True)
class RedactionResult:
    """The redacted text and how many values of each placeholder kind were replaced.

    `counts` maps the text between ``<`` and ``>`` of a placeholder (``"EMAIL"``,
    ``"SECRET:aws-access-key"``) to the number of replacements; kinds with no replacement are
    absent, so an empty dict means the text came back unchanged.
    """

    text: str
    counts: dict[str, int]


# A refiner turns the span of a raw regex match into the span to replace, or None to drop it.
_Refiner = Callable[[str, int, int], tuple[int, int] | None]


@dataclass(frozen=True, slots=True)
class _SecretRule:
    kind: str
    pattern: re.Pattern[str]
    group: int
    gate: re.Pattern[str] | None
    refiners: tuple[_Refiner, ...]
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


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start] in _TRIM_LEADING:
        start += 1
    while end > start and text[end - 1] in _TRIM_TRAILING:
        end -= 1
    return start, end


def _extend(chars: str) -> _Refiner:
    tail = re.compile(f"[{chars}]*")

    def refine(text: str, start: int, end: int) -> tuple[int, int] | None:
        match = tail.match(text, end)
        return start, (match.end() if match else end)

    return refine


def _isolated(before: str, after: str) -> _Refiner:
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


def _clip(chars: str) -> _Refiner:
    """Cuts the span at the first char outside `chars` (for patterns that run to end of line)."""
    run = re.compile(f"[{chars}]*")

    def refine(text: str, start: int, end: int) -> tuple[int, int] | None:
        match = run.match(text, start, end)
        return start, (match.end() if match else start)

    return refine


def _after_equals(text: str, start: int, end: int) -> tuple[int, int] | None:
    cut = text.find("=", start, end)
    return (cut + 1, end) if cut >= 0 else (start, end)


def _rstrip_dots(text: str, start: int, end: int) -> tuple[int, int] | None:
    while end > start and text[end - 1] == ".":
        end -= 1
    return start, end


_KEY_BLOCK_LEAD = re.compile(r"(?:-+ ?)?\Z")
_KEY_BLOCK_END = re.compile(
    r"END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?(?: ?-+)?|Private-MAC:[ \t]*[0-9A-Fa-f]*"
)


def _private_key_block(text: str, start: int, end: int) -> tuple[int, int] | None:
    # detect-secrets only matches the BEGIN marker; the key material follows it, so the span
    # runs to the END marker, or to the end of the text when the paste was truncated.
    lead = _KEY_BLOCK_LEAD.search(text, max(0, start - 8), start)
    if lead is not None:
        start = lead.start()
    tail = _KEY_BLOCK_END.search(text, end)
    return start, (tail.end() if tail else len(text))


def _bare_bearer(text: str, start: int, end: int) -> tuple[int, int] | None:
    # Without an Authorization header around it, "Bearer" is often just prose ("Bearer tokens
    # expire"), so only something token-shaped counts.
    token = text[start:end]
    if len(token) < 6 or not any(c.isdigit() or c in "._~+/" for c in token):
        return None
    return start, end


def _basic_credentials(text: str, start: int, end: int) -> tuple[int, int] | None:
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


# --- rules ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plugin:
    detector: type[RegexBasedDetector]
    kind: str
    secret_in_group: bool = False
    """The secret is group 1 of patterns that have groups (the rest of the match is context)."""
    kind_overrides: tuple[tuple[str, str], ...] = ()
    """(substring of a pattern's source, kind) for patterns of the plugin that deserve a
    distinct slug."""
    gates: tuple[tuple[str, str], ...] = ()
    """(substring of a pattern's source, cheap regex over the lowercased text) that a text must
    match before the slow pattern is run on it at all."""
    refiners: tuple[_Refiner, ...] = ()
    anchor: str | None = None
    """Regex whose (non-overlapping) matches are the only places where a match may start."""


_TOKEN = "A-Za-z0-9_\\-"

SECRET_PLUGINS: tuple[_Plugin, ...] = (
    _Plugin(PrivateKeyDetector, "private-key", refiners=(_private_key_block,)),
    _Plugin(
        AWSKeyDetector,
        "aws-access-key",
        secret_in_group=True,
        kind_overrides=(("aws.{0,20}", "aws-secret-key"),),
        gates=(("aws.{0,20}", "aws"),),
        refiners=(_extend("0-9A-Z"),),
    ),
    _Plugin(GitHubTokenDetector, "github-token", refiners=(_extend("A-Za-z0-9_"),)),
    # The patterns end in "(?!\w)" but may start anywhere: without a left boundary they would
    # match the tail of any long identifier.
    _Plugin(GitLabTokenDetector, "gitlab-token", refiners=(_isolated(_TOKEN, ""),)),
    _Plugin(
        SlackDetector,
        "slack-token",
        kind_overrides=(("hooks", "slack-webhook"),),
        gates=(("xox", "xox"), ("hooks", "hooks\\.slack\\.com")),
    ),
    _Plugin(
        StripeDetector, "stripe-key", gates=(("", "k_live_"),), refiners=(_extend("0-9a-zA-Z"),)
    ),
    # Every OpenAI key carries the "T3BlbkFJ" marker; gating on it also spares the pattern's
    # backtracking over ordinary "task-", "disk-" words.
    _Plugin(
        OpenAIDetector,
        "openai-key",
        gates=(("", "t3blbkfj"),),
        refiners=(_extend("A-Za-z0-9"),),
    ),
    # The anchor is the JWT's first segment, as the pattern defines it: a failed try rules out
    # every later "eyJ" of the same run, which a plain search would try again (quadratic on
    # long base64 blobs).
    _Plugin(
        JwtTokenDetector,
        "jwt",
        anchor="eyJ[A-Za-z0-9_=-]*",
        refiners=(_extend("A-Za-z0-9_\\-.+/="), _rstrip_dots),
    ),
    _Plugin(BasicAuthDetector, "password-in-url", secret_in_group=True),
    _Plugin(TwilioKeyDetector, "twilio-key", refiners=(_isolated("A-Za-z0-9", "A-Za-z0-9"),)),
    _Plugin(SendGridDetector, "sendgrid-key", refiners=(_extend(_TOKEN),)),
    _Plugin(
        NpmDetector,
        "npm-token",
        secret_in_group=True,
        gates=(("", "_authtoken"),),
        # ".npmrc" lines start with "//" (or a URL scheme's "://"); anchoring there keeps ".+"
        # from rescanning a long line once per "//" in it.
        anchor="(?<![^\\s\"':])//",
        refiners=(_clip("^\\s\"'`"),),
    ),
    _Plugin(PypiTokenDetector, "pypi-token"),
    _Plugin(AzureStorageKeyDetector, "azure-storage-key", refiners=(_after_equals,)),
    _Plugin(
        DiscordBotTokenDetector,
        "discord-bot-token",
        gates=(("", "\\.[a-z\\d_-]{6}\\.[a-z\\d_-]{27}"),),
        refiners=(_isolated(_TOKEN, _TOKEN),),
    ),
    _Plugin(
        TelegramBotTokenDetector,
        "telegram-bot-token",
        gates=(("", ":[0-9a-z_-]{35}"),),
        refiners=(_isolated("0-9", _TOKEN),),
    ),
    _Plugin(
        MailchimpDetector,
        "mailchimp-key",
        gates=(("", "-us[0-9]"),),
        refiners=(_isolated("0-9a-z", "0-9"),),
    ),
    _Plugin(SquareOAuthDetector, "square-oauth-secret"),
    _Plugin(
        ArtifactoryDetector,
        "artifactory-token",
        gates=(("AKC", "akc[a-z0-9]{10}"), ("AP", "ap[\\da-f][a-z0-9]{8}")),
    ),
    _Plugin(
        CloudantDetector,
        "cloudant-key",
        secret_in_group=True,
        gates=(
            ("cloudant\\.com", "cloudant\\.com"),
            ("", "cl(?:oudant|ou)?[_-]?(?:api)?(?:key|pwd?|pass|token)"),
        ),
    ),
    _Plugin(
        IbmCloudIamDetector,
        "ibm-cloud-iam-key",
        secret_in_group=True,
        gates=(("", "(?:key|pwd|pass|token)[\"'\\] =:>]+[a-z0-9_-]{44}"),),
    ),
    _Plugin(
        IbmCosHmacDetector,
        "ibm-cos-hmac-key",
        secret_in_group=True,
        gates=(("", "secret[-_]?(?:access)?[-_]?key"),),
    ),
    _Plugin(
        SoftlayerDetector,
        "softlayer-key",
        secret_in_group=True,
        gates=(
            ("api.softlayer", "softlayer"),
            ("", "(?:softlayer|sl)[_-]?(?:api)?[_-]?(?:key|pwd|pass|token)"),
        ),
    ),
)
"""The detect-secrets regex plugins used, each with the slug of its placeholder."""

_AUTH_HEADER = r"""authorization["']?\s*[:=]\s*["']?\s*"""
_TOKEN68 = r"[A-Za-z0-9\-._~+/]+=*"


@dataclass(frozen=True, slots=True)
class _OwnRule:
    kind: str
    source: str
    group: int = 0
    gate: str | None = None
    refiners: tuple[_Refiner, ...] = ()


# Credentials named by their context. They come first so that, on an identical span, the
# context wins: "Bearer eyJ..." becomes "Bearer <SECRET:bearer-token>", not a jwt.
_CONTEXT_RULES: tuple[_OwnRule, ...] = (
    _OwnRule(
        "bearer-token",
        rf"(?i:{_AUTH_HEADER}bearer)[ \t]+({_TOKEN68})",
        group=1,
        gate="authorization",
        refiners=(_rstrip_dots,),
    ),
    _OwnRule(
        "bearer-token",
        rf"Bearer(?<!\wBearer)[ \t]+({_TOKEN68})",
        group=1,
        refiners=(_rstrip_dots, _bare_bearer),
    ),
    _OwnRule(
        "basic-auth",
        rf"(?i:{_AUTH_HEADER}basic)[ \t]+([A-Za-z0-9+/]+=*)",
        group=1,
        gate="authorization",
    ),
    _OwnRule(
        "basic-auth",
        r"Basic(?<!\wBasic)[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
        group=1,
        refiners=(_basic_credentials,),
    ),
)

# Formats detect-secrets does not cover. Patterns start with a literal where possible (the
# boundary look-behind comes after it) so the regex engine can skip ahead quickly.
_FORMAT_RULES: tuple[_OwnRule, ...] = (
    _OwnRule("private-key", r"BEGIN ENCRYPTED PRIVATE KEY", refiners=(_private_key_block,)),
    _OwnRule("private-key", r"PuTTY-User-Key-File-3", refiners=(_private_key_block,)),
    _OwnRule(
        "aws-secret-key",
        r"(?i:aws_?secret_?(?:access_?)?key)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        group=1,
        gate="aws_?secret",
    ),
    _OwnRule("gcp-api-key", r"AIza(?<![0-9A-Za-z_\-]AIza)[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-<])"),
    _OwnRule("github-token", r"github_pat_[A-Za-z0-9_]{22,}"),
    _OwnRule("npm-token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
)


def _plugin_rules(plugin: _Plugin) -> Iterator[_SecretRule]:
    patterns: Iterable[re.Pattern[str]] = plugin.detector().denylist
    for pattern in patterns:
        if not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str):
            raise TypeError(f"{plugin.detector.__name__}.denylist holds a non-str pattern")
        source = pattern.pattern
        kind = next((k for needle, k in plugin.kind_overrides if needle in source), plugin.kind)
        gate = next((re.compile(g) for needle, g in plugin.gates if needle in source), None)
        group = 1 if plugin.secret_in_group and pattern.groups else 0
        refiners = plugin.refiners if group else (_trim, *plugin.refiners)
        anchor = re.compile(plugin.anchor) if plugin.anchor else None
        yield _SecretRule(kind, pattern, group, gate, refiners, anchor)


def _own_rule(rule: _OwnRule) -> _SecretRule:
    return _SecretRule(
        rule.kind,
        re.compile(rule.source),
        rule.group,
        re.compile(rule.gate) if rule.gate else None,
        rule.refiners if rule.group else (_trim, *rule.refiners),
    )


def _build_secret_rules() -> tuple[_SecretRule, ...]:
    """All secret rules, in tie-breaking priority order (earlier wins on identical spans)."""
    return (
        *(_own_rule(rule) for rule in _CONTEXT_RULES),
        *(rule for plugin in SECRET_PLUGINS for rule in _plugin_rules(plugin)),
        *(_own_rule(rule) for rule in _FORMAT_RULES),
    )


_SECRET_RULES = _build_secret_rules()

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


def _ipv6_spans(text: str) -> Iterator[tuple[int, int]]:
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


def _ipv4_spans(text: str) -> Iterator[tuple[int, int]]:
    for match in _IPV4_RE.finditer(text):
        try:
            ipaddress.IPv4Address(match.group())
        except ValueError:
            continue
        start, end = match.span()
        if _looks_like_version(text, start, end):
            continue
        yield start, end


# (start, end, priority, kind); priority breaks ties between equally long overlapping spans.
_Span = tuple[int, int, int, str]


def _apply(text: str, spans: list[_Span], counts: dict[str, int]) -> str:
    """Replaces non-overlapping spans (earliest, then longest, then lowest priority first)."""
    if not spans:
        return text
    spans.sort(key=lambda s: (s[0], s[0] - s[1], s[2]))
    protected: list[tuple[int, int]] = []
    if "<" in text:
        protected = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
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


_MAX_PASSES = 4


class Redactor:
    """Replaces secrets, e-mail addresses and IP addresses with typed placeholders.

    Stateless apart from its policy; patterns are compiled at import, so constructing one is
    cheap and a single instance may be shared across threads.
    """

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        self._policy = policy if policy is not None else RedactionPolicy()

    @property
    def policy(self) -> RedactionPolicy:
        """The policy this redactor applies."""
        return self._policy

    def redact(self, text: str) -> RedactionResult:
        """Redacts `text` according to the policy.

        Secrets are replaced first, then e-mail addresses, then IP addresses; placeholders
        already present are left alone. The result is a fixed point, so redacting it again
        changes nothing (short of adversarial input needing more than a few passes).
        """
        counts: dict[str, int] = {}
        # A match refused because of its neighbour (a "(?!\w)" in a detect-secrets pattern, an
        # e-mail's TLD running on) can become acceptable once the neighbour is a placeholder;
        # passing again until nothing changes is what makes the result a fixed point.
        for _ in range(_MAX_PASSES):
            replaced = sum(counts.values())
            text = self._redact_once(text, counts)
            if sum(counts.values()) == replaced:
                break
        return RedactionResult(text=text, counts=counts)

    def _redact_once(self, text: str, counts: dict[str, int]) -> str:
        if self._policy.secrets:
            lowered = text.lower()
            spans = [
                (start, end, priority, f"SECRET:{rule.kind}")
                for priority, rule in enumerate(_SECRET_RULES)
                for start, end in rule.spans(text, lowered)
            ]
            text = _apply(text, spans, counts)
        if self._policy.emails and "@" in text:
            spans = [(m.start(), m.end(), 0, "EMAIL") for m in _EMAIL_RE.finditer(text)]
            text = _apply(text, spans, counts)
        if self._policy.ip_addresses:
            # IPv6 before IPv4 on ties so "::ffff:10.0.0.1" is one address, not a v4 inside.
            spans = [(start, end, 0, "IPV6") for start, end in _ipv6_spans(text)]
            if "." in text:
                spans.extend((start, end, 1, "IPV4") for start, end in _ipv4_spans(text))
            text = _apply(text, spans, counts)
        return text

    def redact_value(self, value: object) -> tuple[object, dict[str, int]]:
        """Recursively redacts every str inside dicts, lists and tuples (dict keys left as is).

        Containers are copied, never mutated; other types are returned unchanged. Returns the
        redacted value and the summed counts.
        """
        counts: dict[str, int] = {}
        return self._redact_value(value, counts), counts

    def _redact_value(self, value: object, counts: dict[str, int]) -> object:
        if isinstance(value, str):
            result = self.redact(value)
            for kind, count in result.counts.items():
                counts[kind] = counts.get(kind, 0) + count
            return result.text
        if isinstance(value, dict):
            return {key: self._redact_value(item, counts) for key, item in value.items()}
        if isinstance(value, list):
            return [self._redact_value(item, counts) for item in value]
        if isinstance(value, tuple):
            return tuple(self._redact_value(item, counts) for item in value)
        return value
