"""Redaction of secrets, e-mail addresses and IP addresses in incident text: the public API.

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
* Which formats count as secrets is decided in `ingest.redaction.detectors`; where e-mail and IP
  addresses stand, in `ingest.redaction.network`.
* All patterns are compiled once, at import; a `Redactor` holds no per-call state and is safe to
  share between threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ingest.redaction.detectors import SECRET_RULES
from ingest.redaction.network import email_spans, ipv4_spans, ipv6_spans
from ingest.redaction.rules import apply_spans

__all__ = [
    "EMAIL_PLACEHOLDER",
    "IPV4_PLACEHOLDER",
    "IPV6_PLACEHOLDER",
    "PLACEHOLDER_RE",
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
    """IPv4 and IPv6 addresses that identify a host, also inside host names (a port suffix is kept;
    loopback, documentation ranges and public resolvers are content and stay)."""


@dataclass(frozen=True)
class RedactionResult:
    """The redacted text and how many values of each placeholder kind were replaced.

    `counts` maps the text between ``<`` and ``>`` of a placeholder (``"EMAIL"``,
    ``"SECRET:aws-access-key"``) to the number of replacements; kinds with no replacement are
    absent, so an empty dict means the text came back unchanged.
    """

    text: str
    counts: dict[str, int]


_MAX_PASSES = 4
_MEMO_LENGTH = 256
_MEMO_ENTRIES = 8192


class Redactor:
    """Replaces secrets, e-mail addresses and IP addresses with typed placeholders.

    Holds its policy and a memory of the results for short values (a pure function of the text
    under the policy); patterns are compiled at import, so constructing one is cheap, and a single
    instance may be shared across threads (the memory is read and written an entry at a time).
    """

    def __init__(self, policy: RedactionPolicy | None = None) -> None:
        self._policy = policy if policy is not None else RedactionPolicy()
        # Short values recur across a source's records (components, statuses, names): their
        # results are remembered, up to `_MEMO_ENTRIES` of them, per redactor.
        self._memo: dict[str, RedactionResult] = {}

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
        short = len(text) <= _MEMO_LENGTH
        if short and (known := self._memo.get(text)) is not None:
            return RedactionResult(text=known.text, counts=dict(known.counts))
        counts: dict[str, int] = {}
        original = text
        # A match refused because of its neighbour (a "(?!\w)" in a detect-secrets pattern, an
        # e-mail's TLD running on) can become acceptable once the neighbour is a placeholder;
        # passing again until nothing changes is what makes the result a fixed point.
        for _ in range(_MAX_PASSES):
            replaced = sum(counts.values())
            text = self._redact_once(text, counts)
            if sum(counts.values()) == replaced:
                break
        if short:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()
            self._memo[original] = RedactionResult(text=text, counts=dict(counts))
        return RedactionResult(text=text, counts=counts)

    def _redact_once(self, text: str, counts: dict[str, int]) -> str:
        if self._policy.secrets:
            lowered = text.lower()
            spans = [
                (start, end, priority, f"SECRET:{rule.kind}")
                for priority, rule in enumerate(SECRET_RULES)
                for start, end in rule.spans(text, lowered)
            ]
            text = apply_spans(text, spans, counts, PLACEHOLDER_RE)
        if self._policy.emails and "@" in text:
            spans = [(start, end, 0, "EMAIL") for start, end in email_spans(text)]
            text = apply_spans(text, spans, counts, PLACEHOLDER_RE)
        if self._policy.ip_addresses:
            # IPv6 before IPv4 on ties so "::ffff:10.0.0.1" is one address, not a v4 inside.
            spans = [(start, end, 0, "IPV6") for start, end in ipv6_spans(text)]
            if "." in text:
                spans.extend((start, end, 1, "IPV4") for start, end in ipv4_spans(text))
            text = apply_spans(text, spans, counts, PLACEHOLDER_RE)
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
