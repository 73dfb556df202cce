"""The evidence the dedup rules (`curation.dedup.rules`) weigh for one pair, in named steps: the
texts a decision reads (`ItemText`, through `Facts`), which fields of a pair the model cannot read
and how alike those are in characters (`Reading`), the near-verbatim and embedding matches a
candidate passes (`minhash_matches`, `embedding_match`), and why two alike texts are still not one
incident (`title_veto`: titles naming something different, or texts alike only in their source's
template)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from curation.dedup.boilerplate import CommonLines
from curation.dedup.embeddings import Vectors, body_text, title_text
from curation.dedup.identifiers import distinction
from curation.dedup.index import SimilarityIndex
from curation.dedup.lexical import lexical_similarity
from curation.dedup.readability import Unreadable
from curation.dedup.text_kind import TextKind
from schemas.dedup import DedupStage
from schemas.item import Item

if TYPE_CHECKING:
    from curation.dedup.rules import DedupConfig

TEMPLATE_SHARE = 0.2
"""A template (lines the whole source shares) this large a part of either text is no evidence."""
VETOES_SHOWN = 5
"""Refused matches listed in a decision's details."""


@dataclass(frozen=True)
class ItemText:
    """An item's text as a decision reads it."""

    source_id: int
    title: str
    input: str

    @property
    def display_title(self) -> str:
        return display_title(self.title, self.input)


class Facts(Protocol):
    """What a decision needs to know of indexed items beyond the index: read on demand."""

    def texts(self, item_ids: Collection[int]) -> dict[int, ItemText]:
        """The source, title and input of each item."""

    def common_lines(self, source_id: int) -> CommonLines:
        """The lines common to a source's items (`curation.dedup.boilerplate`)."""

    def embed(self, texts: Sequence[str]) -> Vectors | None:
        """Body vectors of `texts` (None: texts cannot be encoded here, and are compared whole)."""

    def guarded(self, item_ids: Collection[int]) -> set[int]:
        """The items exposed to an endpoint that may train on them, or released in an eval."""

    def kept_apart(self, item_id: int) -> set[int]:
        """The items a person ruled not a duplicate of `item_id`, either way round."""

    def unreadable(self, keys: Mapping[int, tuple[str | None, str | None]]) -> dict[int, Unreadable]:
        """The shares of items' body and title texts (by their text hashes) the model cannot read."""


def display_title(title: str, input_text: str) -> str:
    """The title a decision compares: the item's, or the first line of its input."""
    return title.strip() or next((line.strip() for line in input_text.splitlines() if line.strip()), "")


@dataclass
class Match:
    stage: DedupStage
    rule: str
    score: float
    threshold: float
    other: int
    read_as_characters: dict[str, float] = field(default_factory=dict)


class Reading:
    """Which fields of a pair the model cannot read, and how alike those fields are in characters."""

    FIELDS = ("body", "title")

    def __init__(self, item: Item, own: Unreadable, theirs: Mapping[int, Unreadable], facts: Facts, limit: float) -> None:
        self.item, self.own, self.theirs, self.facts, self.limit = item, own, theirs, facts, limit

    def blind(self, other_id: int, fields: Sequence[str] = FIELDS) -> dict[str, float]:
        """The fields either text of the pair cannot be read in, each with the larger share."""
        theirs = self.theirs.get(other_id, Unreadable())
        found: dict[str, float] = {}
        for name in fields:
            shares = [share for share in (getattr(self.own, name), getattr(theirs, name)) if share is not None]
            if shares and max(shares) > self.limit:
                found[name] = round(max(shares), 2)
        return found

    def characters(self, other_id: int, name: str) -> float:
        """The character n-gram similarity of the pair's `name` texts (0 when the other's text is not known)."""
        other = self.facts.texts([other_id]).get(other_id)
        if other is None:
            return 0.0
        text = body_text if name == "body" else title_text
        return round(float(lexical_similarity(text(self.item.title, self.item.input), [text(other.title, other.input)])[0]), 4)


def embedding_match(
    other_id: int, body_cosine: float, title_cosine: float, guarded: bool, thresholds: dict[str, float], config: DedupConfig, reading: Reading, details: dict[str, Any]
) -> Match | None:
    """The embedding rule (`guard` on the body, `fresh` on body and title) a neighbour passes, or
    None. A field either text cannot be read in passes by its characters instead of its cosine
    (stage `characters`); a match the cosines alone would have made, refused so, is listed among
    the vetoed with why."""
    rule, fields = ("guard", ("body",)) if guarded else ("fresh", ("body", "title"))
    cosines = {"body": body_cosine, "title": title_cosine}
    needed = {"body": thresholds[rule], "title": thresholds["fresh_title"]}
    blind = reading.blind(other_id, fields)
    if guarded and not blind and body_cosine < thresholds["guard"]:
        return embedding_match(other_id, body_cosine, title_cosine, False, thresholds, config, reading, details)
    if not blind:
        if all(cosines[name] >= needed[name] for name in fields):
            return Match(DedupStage.EMBEDDING, rule, body_cosine, thresholds[rule], other_id)
        return None
    alike = {name: reading.characters(other_id, name) for name in blind}
    if all(cosines[name] >= needed[name] for name in fields if name not in blind) and all(score >= config.unreadable_characters_threshold for score in alike.values()):
        score = min(alike.values())
        return Match(DedupStage.CHARACTERS, rule, score, config.unreadable_characters_threshold, other_id, alike)
    if all(cosines[name] >= needed[name] for name in fields):
        vetoed = details.setdefault("vetoed", [])
        if len(vetoed) < VETOES_SHOWN and all(entry["item"] != other_id for entry in vetoed):
            unread = ", ".join(f"{name} {share:.0%}" for name, share in blind.items())
            chars = ", ".join(f"{name} {score:.2f}" for name, score in alike.items())
            why = f"the model cannot read the text ({unread} unknown or spelled out): alike in characters {chars}, {config.unreadable_characters_threshold} needed"
            vetoed.append({"item": other_id, "stage": DedupStage.EMBEDDING.value, "score": round(body_cosine, 4), "why": why, "unreadable": blind})
    if guarded:
        return embedding_match(other_id, body_cosine, title_cosine, False, thresholds, config, reading, details)
    return None


def alike_in_template_only(mine: ItemText, other: ItemText, facts: Facts, threshold: float) -> str | None:
    """Why two texts are not the same incident although alike, when what they share is their
    source's common lines; None when those are a small part of both, or the rest is as close."""
    common = facts.common_lines(mine.source_id)
    if other.source_id != mine.source_id:
        common = common | facts.common_lines(other.source_id)
    my_rest, my_share = common.distinctive(mine.input)
    other_rest, other_share = common.distinctive(other.input)
    share = max(my_share, other_share)
    if share < TEMPLATE_SHARE:
        return None
    vectors = facts.embed([body_text(mine.title, my_rest), body_text(other.title, other_rest)])
    if vectors is None:
        return None
    cosine = float(vectors[0] @ vectors[1])
    if cosine >= threshold:
        return None
    return f"alike in the lines their source shares ({share:.0%} of the text), not in the rest (cosine {cosine:.2f})"


def minhash_matches(
    near: Sequence[tuple[int, float]],
    *,
    index: SimilarityIndex,
    kind: TextKind,
    guarded: Collection[int],
    title: Vectors | None,
    reading: Reading,
    config: DedupConfig,
    fresh_title: float | None,
) -> list[Match]:
    """The near-verbatim matches among `near` (representatives only): `machine` for a machine
    text, `guard` for a guarded item, else `fresh`, which also needs the titles alike (by their
    cosine, or by their characters where the model cannot read one): the same words under another
    title are one report quoting another, or a list of failures."""
    found = []
    for other_id, score in near:
        if score < config.minhash_threshold or index.get(other_id).root != other_id:
            continue
        rule = "machine" if kind is TextKind.MACHINE else ("guard" if other_id in guarded else "fresh")
        if rule == "fresh" and title is not None:
            assert fresh_title is not None  # every text kind with a `fresh` rule has its title bar
            if reading.blind(other_id, ("title",)):
                if reading.characters(other_id, "title") < config.unreadable_characters_threshold:
                    continue
            elif float(index.vectors(other_id)[1] @ title) < fresh_title:
                continue
        found.append(Match(DedupStage.MINHASH, rule, score, config.minhash_threshold, other_id))
    return found


def title_veto(mine: ItemText, other: ItemText | None, *, rule: str, kind: TextKind, facts: Facts, fresh: float | None) -> str | None:
    """Why a match with `other` is not the same incident, or None. Titles name the task; a short
    text without one (a log line, a headline, an alert message) is all content, and masking and
    the embedding already judged it whole. A `fresh` match alike mostly in its source's template
    must be as close in the rest (`alike_in_template_only`)."""
    if other is None:
        return None
    titled = bool(mine.title and other.title) or kind is TextKind.LONG
    why = distinction(mine.display_title, other.display_title) if titled else None
    if why is None and rule == "fresh" and fresh is not None:
        why = alike_in_template_only(mine, other, facts, fresh)
    return why
