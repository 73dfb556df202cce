"""The dedup decision rules: when a text is a duplicate of an indexed item, and which rule said so.

The two errors are not alike for an eval set. A false merge silently throws away a scarce fresh
incident; a missed paraphrase of an item already exposed, released or in a public reference
corpus lets contamination back in. So the rules differ by what the text is matched against:

- `exact`: the same normalised text, and titles that name nothing different (normalisation masks
  numbers, so "Upgrade to Jetty 9.4.44" and "... 9.4.39" share a hash but not a task).
- `guard` (recall first): a guarded item (a public reference item, or one exposed to an endpoint
  that may train on it, or released in an eval) near-verbatim (`minhash_threshold`) or as a
  paraphrase (`guard_embedding_threshold`, `guard_short_embedding_threshold` for short texts).
- `fresh` (precision first): any other item, near-verbatim, or as a paraphrase with both the body
  (`fresh_embedding_threshold`; `fresh_short_embedding_threshold` for a short text without a
  title, such as a headline) and the title (`fresh_title_threshold`) close. Text the whole
  source shares (a report template, a test harness's stack frames: `curation.dedup.boilerplate`)
  is no evidence: when it is a large part of either text, what is left of the two must still be
  as close.
- `machine`: a short machine-written message (a log line, an alert) matches only exact and
  near-verbatim copies: two such lines that differ in one word are usually different events.

Where either text of a pair is one the model cannot read (`unreadable_share` of a field unknown
or spelled out, `curation.dedup.readability`), that field's embedding is no evidence: exact and
MinHash still decide, and an embedding neighbour matches only when the field's texts are alike
in character n-grams (`unreadable_characters_threshold`, stage `characters`); the details name
the unreadable fields, and an embedding match refused for it is listed among the vetoed.

Every rule also needs the two titles to name nothing different
(`curation.dedup.identifiers.distinction`: another version, CVE, module, test, host, template
target or scope); a short text without a title (a log line, a headline) is all content and is
judged whole. A text is matched only against a cluster's representative, never through one
of its duplicates (no chaining), except for an exact copy; pairs a person ruled apart are never
matched. The verdict names the item matched, the rule, the score and its margin over the
threshold that applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from curation.dedup.ann_graph import AnnConfig
from curation.dedup.embeddings import Vectors
from curation.dedup.index import SimilarityIndex
from curation.dedup.near_links import NearLinkTo, near_links
from curation.dedup.readability import Unreadable
from curation.dedup.rule_evidence import VETOES_SHOWN, Facts, ItemText, Match, Reading, embedding_match, minhash_matches, title_veto
from curation.dedup.sketch_table import identity_digest
from curation.dedup.text_kind import TextKind
from schemas.dedup import DedupStage
from schemas.item import Item, ItemStatus

RULES_VERSION = "r2"
# A fresh match is checked without its source's common lines when they are this share of either text.
"""Names this set of rules; a decision records it, and `goldenset curate --redecide` applies a newer one."""


@dataclass(frozen=True)
class DedupConfig:
    """Decision thresholds, chosen on ../shared/data (see the figures in
    docs/dedup-figures.md and bench/dedup_quality.py).

    `minhash_threshold`: estimated Jaccard of the recipe's shingles at or above which two texts
    are near-verbatim copies. `guard_embedding_threshold` (`guard_short_embedding_threshold` for
    texts of at most the recipe's `short_tokens` tokens): body cosine at or above which a text is a
    paraphrase of a guarded item (best F1 near 0.72 on Hadoop bug reports and 0.75 on news
    headlines). `fresh_embedding_threshold` (`fresh_short_embedding_threshold` for short texts
    without a title) and `fresh_title_threshold`: body and title cosines a paraphrase of a fresh item needs, both
    (on the labelled nearest neighbours of Hadoop reports, pairs below 0.85 were almost all
    related but distinct; short headlines that say one thing in other words sit near 0.75).
    `unreadable_share`: the share of a body or title text (`curation.dedup.readability`) above
    which the model's embedding of it is no evidence (English and code score at most 0.24 for a
    Hadoop title and 0.42 for a body that is mostly a hashed URL; every distinct pair of Chinese,
    Russian, Japanese, Korean, emoji-heavy or mixed titles at title cosine >= 0.70 had a side above
    0.3: `bench/unreadable_text.py`). `unreadable_characters_threshold`: the character n-gram
    similarity (`curation.dedup.lexical`) such a field needs instead (distinct titles of those
    kinds reach 0.54; an edit of a few characters keeps 0.75 or more).
    `neighbours`: embedding neighbours examined per candidate. `ann`: when and where the index
    searches a large pool approximately (`curation.dedup.ann_graph.AnnConfig`).
    `confirm_threshold`, `ask_threshold`: the judge's P below which a paraphrase merge, and from
    which a unique item's near pair, is asked of a curator (`curation.dedup.questions`; docs/dedup.md,
    "Three outcomes"; 0 and 1 switch either off). `ask_share`: the most of a source's items
    with an open question; past it the rules decide alone.
    """

    minhash_threshold: float = 0.65
    guard_embedding_threshold: float = 0.72
    guard_short_embedding_threshold: float = 0.75
    fresh_embedding_threshold: float = 0.85
    fresh_short_embedding_threshold: float = 0.75
    fresh_title_threshold: float = 0.70
    unreadable_share: float = 0.3
    unreadable_characters_threshold: float = 0.7
    confirm_threshold: float = 0.0
    ask_threshold: float = 0.25
    ask_share: float = 0.05
    neighbours: int = 10
    batch_size: int = 256
    ann: AnnConfig = field(default_factory=AnnConfig)

    def __post_init__(self) -> None:
        cosines = ("guard_embedding_threshold", "guard_short_embedding_threshold", "fresh_embedding_threshold", "fresh_short_embedding_threshold", "fresh_title_threshold")
        for name in ("minhash_threshold", *cosines, "unreadable_share", "unreadable_characters_threshold"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        for name in (name for name in ("confirm_threshold", "ask_threshold", "ask_share") if not 0 <= getattr(self, name) <= 1):
            raise ValueError(f"{name} must be in [0, 1] (a probability), got {getattr(self, name)}")
        if self.neighbours < 1 or self.batch_size < 1:
            raise ValueError("neighbours and batch_size must be at least 1")

    def thresholds(self, kind: TextKind, *, titled: bool = False) -> dict[str, float]:
        """The thresholds that apply to a text of `kind`, by name (recorded with each decision).
        A `titled` report, however short, is held to the long-text bar for fresh items: short
        reports of one kind ("Upgrade X to ...") embed closer than short sentences do."""
        if kind is TextKind.MACHINE:
            return {"minhash": self.minhash_threshold}
        short = kind is TextKind.SHORT
        guard = self.guard_short_embedding_threshold if short else self.guard_embedding_threshold
        fresh = self.fresh_short_embedding_threshold if short and not titled else self.fresh_embedding_threshold
        return {"minhash": self.minhash_threshold, "guard": guard, "fresh": fresh, "fresh_title": self.fresh_title_threshold}

    def link_levels(self, kind: TextKind) -> dict[str, float]:
        """The recall-first levels at which two texts are recorded as near (`Verdict.links`),
        whatever the decision: the LSH's own threshold for MinHash (below the duplicate threshold),
        and the guard threshold for body cosine (below the fresh one). A release keeps items so
        linked on one side of its split, so a duplicate the rules missed cannot straddle it."""
        levels = {"minhash": self.lsh_threshold}
        if kind is not TextKind.MACHINE:
            levels["embedding"] = self.guard_short_embedding_threshold if kind is TextKind.SHORT else self.guard_embedding_threshold
        return levels

    @property
    def lsh_threshold(self) -> float:
        """The MinHash LSH's threshold: a little below the decision's, so borderline pairs still meet."""
        return max(0.05, min(0.95, self.minhash_threshold - 0.1))


@dataclass(frozen=True)
class Verdict:
    """A decision: `status` (unique, duplicate or contaminated), the `stage` that found the match,
    its `score`, the item `matched` (None when unique) and the `details` that explain it (the rule,
    the margin over the threshold, the runner-up scores, a vetoed match and why)."""

    status: str
    stage: str
    score: float | None = None
    matched: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    links: tuple[NearLinkTo, ...] = ()

    @property
    def rule(self) -> str | None:
        rule = self.details.get("rule")
        return rule if isinstance(rule, str) else None


def judge(
    item: Item,
    sketch: Any,
    body: Vectors | None,
    title: Vectors | None,
    *,
    index: SimilarityIndex,
    kind: TextKind,
    config: DedupConfig,
    facts: Facts,
    details: dict[str, Any],
    exclude: Sequence[int] = (),
    unreadable: Unreadable | None = None,
) -> Verdict:
    """The verdict on one text against `index` (no writes). `details` starts the decision's
    explanation (recipe, model, text kind); the rule, scores and any vetoed match are added.
    `unreadable`: the shares of the text's body and title the model cannot read (None: unknown)."""
    excluded = set(exclude) | (facts.kept_apart(item.id) if item.id is not None else set())
    mine = ItemText(item.source_id, item.title, item.input)
    thresholds = config.thresholds(kind, titled=bool(item.title))
    details = {**details, "rules": RULES_VERSION, "thresholds": thresholds}

    identity = identity_digest(item.identity_key)

    def compatible(other_id: int) -> bool:
        other = index.get(other_id)
        return other_id not in excluded and (not identity or not other.identity or other.identity == identity)

    def representative(other_id: int) -> bool:
        return index.get(other_id).root == other_id

    found_near = index.near(sketch)
    near = [(other_id, score) for other_id, score in found_near if compatible(other_id)]
    found_neighbours = []
    if kind is not TextKind.MACHINE and body is not None and title is not None:
        found_neighbours = index.nearest(body, title, config.neighbours + len(excluded))
    neighbours = [n for n in found_neighbours if compatible(n.item_id) and representative(n.item_id)]
    found_exact = index.exact(item.content_hash)
    # An exact copy of any member is the same text; a representative is named first when one is copied.
    exact = sorted((other_id for other_id in found_exact if compatible(other_id)), key=lambda other_id: not representative(other_id))
    bare_line = kind is TextKind.MACHINE and not item.title  # a log line: nothing but its text
    # Only items that could match are looked up (guard status, texts): most candidates have none.
    near_enough = [other_id for other_id, score in near if score >= config.minhash_threshold and representative(other_id)]
    own = unreadable or Unreadable()
    if own.beyond(config.unreadable_share):
        details["unreadable"] = own.beyond(config.unreadable_share)
    # A body the model cannot read is near anything by its cosine: it links by its copies and sketches only.
    embedded = [] if "body" in own.beyond(config.unreadable_share) else [(n.item_id, n.body_cosine) for n in found_neighbours]
    links = near_links(item.id, set(exclude), found_exact, found_near, embedded, config.link_levels(kind))
    # Readable vs unreadable texts differ by cosine already: only close neighbours need the other side's shares.
    reads_all = not own.beyond(config.unreadable_share)
    looked_at = [n.item_id for n in neighbours if not reads_all or n.body_cosine >= min(thresholds["guard"], thresholds["fresh"])]
    weighed_texts = {other_id: index.get(other_id) for other_id in [*near_enough, *looked_at]}
    theirs = facts.unreadable({other_id: (entry.body_key, entry.title_key) for other_id, entry in weighed_texts.items()}) if weighed_texts else {}
    reading = Reading(item, own, theirs, facts, config.unreadable_share)
    close = [n.item_id for n in neighbours if n.body_cosine >= min(thresholds["guard"], thresholds["fresh"]) or reading.blind(n.item_id, ("body",))]
    weighed = [*near_enough, *close]
    guarded = (facts.guarded(weighed) if weighed else set()) | {other_id for other_id in weighed if index.get(other_id).status == ItemStatus.REFERENCE.value}
    if near:
        details["best_jaccard"] = {"item": near[0][0], "score": round(near[0][1], 4)}
    if neighbours:
        best = max(neighbours, key=lambda neighbour: neighbour.body_cosine)
        details["best_embedding"] = {"item": best.item_id, "cosine": round(best.body_cosine, 4), "title_cosine": round(best.title_cosine, 4)}

    candidates = [Match(DedupStage.EXACT, "exact", 1.0, 1.0, other_id) for other_id in exact]
    fresh_title = thresholds.get("fresh_title")  # none for a machine text: only `machine` matches it
    candidates += minhash_matches(near, index=index, kind=kind, guarded=guarded, title=title, reading=reading, config=config, fresh_title=fresh_title)
    for neighbour in neighbours:
        match = embedding_match(neighbour.item_id, neighbour.body_cosine, neighbour.title_cosine, neighbour.item_id in guarded, thresholds, config, reading, details)
        if match is not None:
            candidates.append(match)
    texts = facts.texts([match.other for match in candidates]) if candidates and not bare_line else {}
    for match in candidates:
        why = title_veto(mine, texts.get(match.other), rule=match.rule, kind=kind, facts=facts, fresh=thresholds.get("fresh"))
        if why is not None:
            vetoed = details.setdefault("vetoed", [])
            if len(vetoed) < VETOES_SHOWN and all(entry["item"] != match.other for entry in vetoed):
                vetoed.append({"item": match.other, "stage": match.stage.value, "score": round(match.score, 4), "why": why})
            continue
        other = index.get(match.other)
        contaminated = ItemStatus.REFERENCE.value in (other.status, index.get(other.root).status if other.root in index else other.status)
        status = ItemStatus.CONTAMINATED.value if contaminated else ItemStatus.DUPLICATE.value
        explained = {**details, "rule": match.rule, "matched_item": match.other, "margin": round(match.score - match.threshold, 4)}
        if match.read_as_characters:
            explained["read_as_characters"] = match.read_as_characters
        return Verdict(status, match.stage.value, round(match.score, 4), match.other, explained, links)
    return Verdict(ItemStatus.UNIQUE.value, DedupStage.NONE.value, details=details, links=links)
