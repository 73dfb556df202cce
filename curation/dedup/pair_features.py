"""The evidence on one candidate pair, as numbers a same-incident judge (`curation.dedup.judge`)
weighs: what curation knows of two records when it decides whether they are one incident.

Everything here is pure: the embedding cosines and the unreadable shares come in with the pair
(curation has them stored beside each item's vectors), so computing the features of a pair costs
a fraction of a millisecond to a few milliseconds (the character n-gram similarity of two bodies
is the dearest part), never an encoding.

Identifier differences are features here, not vetoes: the title rules of
`curation.dedup.identifiers` name what two titles disagree on (another version, CVE, module,
host, template target or scope), and the judge learns how much each kind of disagreement counts
on labelled pairs of several pools, instead of refusing every pair that has one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from curation.dedup.boilerplate import CommonLines
from curation.dedup.embeddings import body_text, title_text
from curation.dedup.fingerprints import MinHashRecipe, normalised_tokens, shingles
from curation.dedup.identifiers import distinction, title_identifiers
from curation.dedup.lexical import pair_similarity
from curation.dedup.text_kind import TextKind, text_kind
from ingest.normalisation import normalise_text

FEATURES_VERSION = "f1"
"""Names this set of features and how each is computed; a judge's model file records the version it was fitted on."""

FEATURES: tuple[str, ...] = (
    "body_cosine",
    "title_cosine",
    "jaccard",
    "body_characters",
    "title_characters",
    "same_normalised_text",
    "conflict_version",
    "conflict_cve",
    "conflict_name",
    "conflict_host",
    "distinct_target",
    "distinct_template",
    "distinct_scope",
    "boilerplate_share",
    "length_ratio",
    "shorter_tokens_log",
    "machine",
    "titled",
    "time_gap_log_days",
    "unreadable_body",
    "unreadable_title",
    "fields_same",
)
"""The order of `pair_features`' values in a feature vector (`feature_vector`)."""

# Kinds of `curation.dedup.identifiers` grouped by what a disagreement on them means.
_CONFLICT_KINDS: dict[str, tuple[str, ...]] = {
    "conflict_version": ("number",),
    "conflict_cve": ("CVE",),
    "conflict_name": ("issue key", "module", "file", "code name", "configuration key"),
    "conflict_host": ("host",),
}


@dataclass(frozen=True)
class PairText:
    """One side of a pair as curation holds it: its title (may be empty), its input text, the
    incident date (None: unknown) and its mapped fields (component, product, reporter ...; only
    fields both sides carry are compared)."""

    title: str
    input: str
    occurred_at: datetime | None = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PairScores:
    """What curation has measured of the pair already: the cosines of the two body texts and of
    the two title texts (`curation.dedup.embeddings.body_text`, `title_text`) by the configured
    model, and each side's unreadable shares of body and title (`curation.dedup.readability`;
    None: not measured)."""

    body_cosine: float
    title_cosine: float
    unreadable_a: tuple[float | None, float | None] = (None, None)
    unreadable_b: tuple[float | None, float | None] = (None, None)


def pair_features(
    a: PairText,
    b: PairText,
    scores: PairScores,
    *,
    common: CommonLines | None = None,
    recipe: MinHashRecipe | None = None,
) -> dict[str, float]:
    """The features of the pair (`a`, `b`), by name, in `FEATURES` order. Pure and symmetric in
    `a` and `b`. `common`: the lines common to the pair's source(s) (`curation.dedup.boilerplate`);
    `recipe`: the MinHash recipe whose shingles the word Jaccard is taken over (default recipe).

    - `body_cosine`, `title_cosine`: as given.
    - `jaccard`: exact Jaccard of the recipe's word shingles of the two inputs (what the stored
      MinHash sketches estimate).
    - `body_characters`, `title_characters`: character 3-5-gram TF-IDF cosine (`curation.dedup.lexical`).
    - `same_normalised_text`: 1 when the normalised inputs are equal (an exact copy for curation).
    - `conflict_*`: 1 when each title names an identifier of that kind the other does not (versions
      and other numbers; CVEs; issue keys, modules, code and configuration names; hosts).
    - `distinct_target`, `distinct_template`, `distinct_scope`: 1 when `identifiers.distinction`
      tells the titles apart for that reason (pinned to different targets; one template filled for
      different targets; different scope or tags). Titles are compared only when both sides have one.
    - `boilerplate_share`: the larger share of either input made of its source's common lines.
    - `length_ratio`: shorter over longer input, in characters; `shorter_tokens_log`: log1p of
      the shorter input's token count.
    - `machine`: 1 when either side is a short machine-written message (`curation.dedup.text_kind`);
      `titled`: 1 when both sides have a title.
    - `time_gap_log_days`: log1p of the days between the incident dates (NaN when either is unknown).
    - `unreadable_body`, `unreadable_title`: the larger unreadable share of the pair's body and
      title texts (0 when not measured).
    - `fields_same`: the share of mapped fields both sides carry that are equal (NaN when none).
    """
    recipe = recipe or MinHashRecipe()
    common = common or CommonLines()
    normal_a, normal_b = normalise_text(a.input), normalise_text(b.input)
    tokens_a, tokens_b = normalised_tokens(normal_a), normalised_tokens(normal_b)
    shingles_a, shingles_b = shingles(a.input, recipe), shingles(b.input, recipe)
    union = len(shingles_a | shingles_b)
    jaccard = len(shingles_a & shingles_b) / union if union else 0.0
    body_a, body_b = body_text(a.title, a.input), body_text(b.title, b.input)
    head_a, head_b = title_text(a.title, a.input), title_text(b.title, b.input)
    titled = bool(a.title.strip() and b.title.strip())
    kinds = {text_kind(a.input, normal_a, len(tokens_a), short_tokens=recipe.short_tokens), text_kind(b.input, normal_b, len(tokens_b), short_tokens=recipe.short_tokens)}
    values: dict[str, float] = {
        "body_cosine": float(scores.body_cosine),
        "title_cosine": float(scores.title_cosine),
        "jaccard": jaccard,
        "body_characters": _characters(body_a, body_b),
        "title_characters": _characters(head_a, head_b),
        "same_normalised_text": float(bool(normal_a) and normal_a == normal_b),
    }
    values.update(_title_differences(a.title, b.title) if titled else dict.fromkeys((*_CONFLICT_KINDS, "distinct_target", "distinct_template", "distinct_scope"), 0.0))
    shares = [common.distinctive(text)[1] for text in (a.input, b.input)]
    lengths = sorted((len(a.input.strip()), len(b.input.strip())))
    values.update(
        {
            "boilerplate_share": max(shares),
            "length_ratio": lengths[0] / lengths[1] if lengths[1] else 1.0,
            "shorter_tokens_log": math.log1p(min(len(tokens_a), len(tokens_b))),
            "machine": float(TextKind.MACHINE in kinds),
            "titled": float(titled),
            "time_gap_log_days": _time_gap(a.occurred_at, b.occurred_at),
            "unreadable_body": _larger(scores.unreadable_a[0], scores.unreadable_b[0]),
            "unreadable_title": _larger(scores.unreadable_a[1], scores.unreadable_b[1]),
            "fields_same": _fields_same(a.fields, b.fields),
        }
    )
    return {name: values[name] for name in FEATURES}


def feature_vector(features: Mapping[str, float]) -> list[float]:
    """`features` as a list in `FEATURES` order; KeyError naming a missing feature."""
    return [float(features[name]) for name in FEATURES]


def _characters(a: str, b: str) -> float:
    return pair_similarity(a, b) if a.strip() and b.strip() else 0.0


def _title_differences(a: str, b: str) -> dict[str, float]:
    ids_a, ids_b = title_identifiers(a), title_identifiers(b)
    found: dict[str, float] = {}
    for name, kinds in _CONFLICT_KINDS.items():
        conflict = False
        for kind in kinds:
            only_a = ids_a.get(kind, frozenset()) - ids_b.get(kind, frozenset())
            only_b = ids_b.get(kind, frozenset()) - ids_a.get(kind, frozenset())
            conflict = conflict or bool(only_a and only_b)
        found[name] = float(conflict)
    why = distinction(a, b) or ""
    found["distinct_target"] = float(why.startswith("different target") or (why.startswith("different ") and not why.startswith("different scope")))
    found["distinct_template"] = float(why.startswith("one template"))
    found["distinct_scope"] = float(why.startswith("different scope"))
    return found


def _time_gap(a: datetime | None, b: datetime | None) -> float:
    if a is None or b is None:
        return math.nan
    if (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    return math.log1p(abs((a - b).total_seconds()) / 86_400)


def _larger(a: float | None, b: float | None) -> float:
    known = [share for share in (a, b) if share is not None]
    return max(known) if known else 0.0


def _fields_same(a: Mapping[str, str], b: Mapping[str, str]) -> float:
    shared = [name for name in a if name in b and str(a[name]).strip() and str(b[name]).strip()]
    if not shared:
        return math.nan
    return sum(str(a[name]).strip().lower() == str(b[name]).strip().lower() for name in shared) / len(shared)
