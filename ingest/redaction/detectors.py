"""The secret-detector table: which formats count as secrets, and the compiled rules that find them.

Contracts:

* Secret formats come from detect-secrets' regex plugins (see `SECRET_PLUGINS`); entropy- and
  keyword-based plugins are deliberately not used because they fire on commit hashes, block ids
  and ordinary prose. The few formats detect-secrets lacks (bearer and basic ``Authorization``
  headers, Google API keys, GitHub fine-grained tokens, ...) are defined here.
* Every rule's kind is a lowercase slug such as ``aws-access-key``, the ``kind`` of its
  ``<SECRET:kind>`` placeholder.
* `SECRET_RULES` is compiled once, at import, in tie-breaking priority order: credentials named
  by their context first, then the detect-secrets plugins, then this project's own formats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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

from ingest.redaction.rules import (
    Refiner,
    SecretRule,
    after_equals,
    bare_bearer,
    basic_credentials,
    clip,
    extend,
    isolated,
    private_key_block,
    rstrip_dots,
    trim,
)

__all__ = ["SECRET_PLUGINS", "SECRET_RULES"]


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
    refiners: tuple[Refiner, ...] = ()
    anchor: str | None = None
    """Regex whose (non-overlapping) matches are the only places where a match may start."""


_TOKEN = "A-Za-z0-9_\\-"

SECRET_PLUGINS: tuple[_Plugin, ...] = (
    _Plugin(PrivateKeyDetector, "private-key", refiners=(private_key_block,)),
    _Plugin(
        AWSKeyDetector,
        "aws-access-key",
        secret_in_group=True,
        kind_overrides=(("aws.{0,20}", "aws-secret-key"),),
        gates=(("aws.{0,20}", "aws"),),
        refiners=(extend("0-9A-Z"),),
    ),
    _Plugin(GitHubTokenDetector, "github-token", refiners=(extend("A-Za-z0-9_"),)),
    # The patterns end in "(?!\w)" but may start anywhere: without a left boundary they would
    # match the tail of any long identifier.
    _Plugin(GitLabTokenDetector, "gitlab-token", refiners=(isolated(_TOKEN, ""),)),
    _Plugin(
        SlackDetector,
        "slack-token",
        kind_overrides=(("hooks", "slack-webhook"),),
        gates=(("xox", "xox"), ("hooks", "hooks\\.slack\\.com")),
    ),
    _Plugin(
        StripeDetector, "stripe-key", gates=(("", "k_live_"),), refiners=(extend("0-9a-zA-Z"),)
    ),
    # Every OpenAI key carries the "T3BlbkFJ" marker; gating on it also spares the pattern's
    # backtracking over ordinary "task-", "disk-" words.
    _Plugin(
        OpenAIDetector,
        "openai-key",
        gates=(("", "t3blbkfj"),),
        refiners=(extend("A-Za-z0-9"),),
    ),
    # The anchor is the JWT's first segment, as the pattern defines it: a failed try rules out
    # every later "eyJ" of the same run, which a plain search would try again (quadratic on
    # long base64 blobs).
    _Plugin(
        JwtTokenDetector,
        "jwt",
        anchor="eyJ[A-Za-z0-9_=-]*",
        refiners=(extend("A-Za-z0-9_\\-.+/="), rstrip_dots),
    ),
    _Plugin(BasicAuthDetector, "password-in-url", secret_in_group=True),
    _Plugin(TwilioKeyDetector, "twilio-key", refiners=(isolated("A-Za-z0-9", "A-Za-z0-9"),)),
    _Plugin(SendGridDetector, "sendgrid-key", refiners=(extend(_TOKEN),)),
    _Plugin(
        NpmDetector,
        "npm-token",
        secret_in_group=True,
        gates=(("", "_authtoken"),),
        # ".npmrc" lines start with "//" (or a URL scheme's "://"); anchoring there keeps ".+"
        # from rescanning a long line once per "//" in it.
        anchor="(?<![^\\s\"':])//",
        refiners=(clip("^\\s\"'`"),),
    ),
    _Plugin(PypiTokenDetector, "pypi-token"),
    _Plugin(AzureStorageKeyDetector, "azure-storage-key", refiners=(after_equals,)),
    _Plugin(
        DiscordBotTokenDetector,
        "discord-bot-token",
        gates=(("", "\\.[a-z\\d_-]{6}\\.[a-z\\d_-]{27}"),),
        refiners=(isolated(_TOKEN, _TOKEN),),
    ),
    _Plugin(
        TelegramBotTokenDetector,
        "telegram-bot-token",
        gates=(("", ":[0-9a-z_-]{35}"),),
        refiners=(isolated("0-9", _TOKEN),),
    ),
    _Plugin(
        MailchimpDetector,
        "mailchimp-key",
        gates=(("", "-us[0-9]"),),
        refiners=(isolated("0-9a-z", "0-9"),),
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
    refiners: tuple[Refiner, ...] = ()


# Credentials named by their context. They come first so that, on an identical span, the
# context wins: "Bearer eyJ..." becomes "Bearer <SECRET:bearer-token>", not a jwt.
_CONTEXT_RULES: tuple[_OwnRule, ...] = (
    _OwnRule(
        "bearer-token",
        rf"(?i:{_AUTH_HEADER}bearer)[ \t]+({_TOKEN68})",
        group=1,
        gate="authorization",
        refiners=(rstrip_dots,),
    ),
    _OwnRule(
        "bearer-token",
        rf"Bearer(?<!\wBearer)[ \t]+({_TOKEN68})",
        group=1,
        refiners=(rstrip_dots, bare_bearer),
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
        refiners=(basic_credentials,),
    ),
)

# Formats detect-secrets does not cover. Patterns start with a literal where possible (the
# boundary look-behind comes after it) so the regex engine can skip ahead quickly.
_FORMAT_RULES: tuple[_OwnRule, ...] = (
    _OwnRule("private-key", r"BEGIN ENCRYPTED PRIVATE KEY", refiners=(private_key_block,)),
    _OwnRule("private-key", r"PuTTY-User-Key-File-3", refiners=(private_key_block,)),
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


def _plugin_rules(plugin: _Plugin) -> Iterator[SecretRule]:
    patterns: Iterable[re.Pattern[str]] = plugin.detector().denylist
    for pattern in patterns:
        if not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str):
            raise TypeError(f"{plugin.detector.__name__}.denylist holds a non-str pattern")
        source = pattern.pattern
        kind = next((k for needle, k in plugin.kind_overrides if needle in source), plugin.kind)
        gate = next((re.compile(g) for needle, g in plugin.gates if needle in source), None)
        group = 1 if plugin.secret_in_group and pattern.groups else 0
        refiners = plugin.refiners if group else (trim, *plugin.refiners)
        anchor = re.compile(plugin.anchor) if plugin.anchor else None
        yield SecretRule(kind, pattern, group, gate, refiners, anchor)


def _own_rule(rule: _OwnRule) -> SecretRule:
    return SecretRule(
        rule.kind,
        re.compile(rule.source),
        rule.group,
        re.compile(rule.gate) if rule.gate else None,
        rule.refiners if rule.group else (trim, *rule.refiners),
    )


def _build_secret_rules() -> tuple[SecretRule, ...]:
    """All secret rules, in tie-breaking priority order (earlier wins on identical spans)."""
    return (
        *(_own_rule(rule) for rule in _CONTEXT_RULES),
        *(rule for plugin in SECRET_PLUGINS for rule in _plugin_rules(plugin)),
        *(_own_rule(rule) for rule in _FORMAT_RULES),
    )


SECRET_RULES = _build_secret_rules()
"""Every secret rule, compiled; on identical spans an earlier rule wins."""
