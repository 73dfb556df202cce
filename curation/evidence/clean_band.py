"""A clean control band: which items are near duplicates of items a model may have seen.

The control band of a contamination test (items dated on or after the model's training cutoff)
stands for "what an unseen item scores". An item there whose text is a near copy of an item dated
before the cutoff is not unseen: a model that learned the older one reproduces, or assigns a high
probability to, its twin (CISA KEV repeats descriptions word for word across CVEs). Such items are
left out of the control band, and, where a caller marks items exposed (a benchmark that trains a
model on chosen items), out of the unexposed ones.

"Near" is the dedup's recall-first level (`curation.dedup.rules.DedupConfig.link_levels`, what
`curation.dedup.near_links` records), on the lexical stages only, since nothing is embedded at
request time: an exact copy (the same normalised text, `ingest.normalisation.normalise_text`),
or MinHash with the project's own recipe (`curation.dedup.fingerprints`) at or above the link
level; plus any pair curation recorded (a stored near link, which may also be a paraphrase seen by
the embedding stage, or a duplicate decision), passed in as `links`.

Everything here is pure: texts and ids in, ids out. The service reads the items and links from
the database; a benchmark hands in plain items.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from datasketch import MinHashLSH

from curation.dedup.fingerprints import MinHashRecipe, sketch_texts, tokens
from curation.dedup.near_links import near_links
from curation.dedup.rules import DedupConfig
from curation.dedup.text_kind import TextKind
from ingest.normalisation import normalise_text
from schemas.evidence import EvidenceWarning, cutoff_instant


@dataclass(frozen=True)
class DatedText:
    """An item as the clean band sees it: its id, the text a model would have seen or is probed
    on, and its date (tz-aware). A reference whose text is not at hand (empty) is joined to
    others by recorded links only."""

    item_id: str
    text: str
    occurred_at: datetime


@dataclass(frozen=True)
class RecordedLink:
    """A pair curation recorded as near (a `schemas.dedup.NearLink` row, or a duplicate decision),
    by item ids as the caller names them, either way round."""

    a: str
    b: str
    stage: str
    score: float | None = None


@dataclass(frozen=True)
class NearTo:
    """Why an item is not clean: the item (`item_id`) is near `other`, seen by `stage` (`exact`,
    `minhash`, or a recorded link's stage) with `score` (estimated Jaccard for MinHash)."""

    item_id: str
    other: str
    stage: str
    score: float | None


def lexical_levels(config: DedupConfig) -> dict[str, float]:
    """The recall-first levels of the lexical stages: MinHash's link level, the same for every kind
    of text (the embedding level, which differs by kind, is not used here)."""
    return {"minhash": config.link_levels(TextKind.LONG)["minhash"]}


def near_any(
    queries: Sequence[DatedText],
    references: Sequence[DatedText],
    *,
    links: Iterable[RecordedLink] = (),
    config: DedupConfig | None = None,
    recipe: MinHashRecipe | None = None,
) -> dict[str, NearTo]:
    """The queries near any of `references`, each with the one reference it is nearest to.

    A query is near a reference when their texts normalise to the same text (`exact`), when the
    MinHash estimate of their Jaccard (`recipe`, default the dedup's) reaches the link level of
    `config` (`minhash`), or when a recorded link joins them (its own stage). The strongest lexical
    match wins, then a recorded link. An item is never near itself (same id). Queries near
    nothing are absent from the result. Dates are not looked at: the caller chooses the sides.
    """
    config, recipe = config or DedupConfig(), recipe or MinHashRecipe()
    levels = lexical_levels(config)
    by_hash: dict[str, list[int]] = {}
    for position, reference in enumerate(references):
        if normalised := normalise_text(reference.text):  # an empty text: joined by recorded links only
            by_hash.setdefault(normalised, []).append(position)
    sketched = [position for position, reference in enumerate(references) if tokens(reference.text)]
    sketches = dict(zip(sketched, sketch_texts((references[position].text for position in sketched), recipe), strict=True))
    # Candidates come from an LSH a little below the link level, so that pairs at the level are
    # not lost to banding; each is then held to the level by its estimated Jaccard.
    lsh = MinHashLSH(threshold=max(0.05, levels["minhash"] - 0.25), num_perm=recipe.num_perm)
    with lsh.insertion_session() as session:
        for position, sketch in sketches.items():
            session.insert(position, sketch, check_duplication=False)
    query_sketches = sketch_texts((query.text for query in queries), recipe)
    recorded = _recorded(links, {reference.item_id for reference in references})
    found: dict[str, NearTo] = {}
    for query, sketch in zip(queries, query_sketches, strict=True):
        exact = by_hash.get(normalise_text(query.text), [])
        candidates = [int(position) for position in lsh.query(sketch)] if tokens(query.text) else []
        near = sorted(((position, float(sketch.jaccard(sketches[position]))) for position in candidates), key=lambda pair: -pair[1])
        lexical = near_links(None, _same_id(references, query.item_id, exact, candidates), exact, near, (), levels)
        if lexical:
            best = lexical[0]
            found[query.item_id] = NearTo(query.item_id, references[best.other].item_id, best.stage, best.score)
        elif (link := recorded.get(query.item_id)) is not None:
            found[query.item_id] = NearTo(query.item_id, link.b if link.a == query.item_id else link.a, link.stage, link.score)
    return found


def _same_id(references: Sequence[DatedText], item_id: str, *positions: Sequence[int]) -> set[int]:
    """Positions among `positions` holding the query itself (an item is never near itself)."""
    return {position for group in positions for position in group if references[position].item_id == item_id}


def _recorded(links: Iterable[RecordedLink], references: set[str]) -> dict[str, RecordedLink]:
    """For each item id, one recorded link joining it to a reference (the first given)."""
    joined: dict[str, RecordedLink] = {}
    for link in links:
        if link.a == link.b:
            continue
        if link.b in references:
            joined.setdefault(link.a, link)
        if link.a in references:
            joined.setdefault(link.b, link)
    return joined


def near_pre_cutoff(
    items: Sequence[DatedText],
    *,
    cutoff: date,
    pool: Sequence[DatedText] = (),
    links: Iterable[RecordedLink] = (),
    config: DedupConfig | None = None,
    recipe: MinHashRecipe | None = None,
) -> dict[str, NearTo]:
    """The items of `items` dated on or after 00:00 UTC on `cutoff` (the control band) that are
    near an item dated before it (`near_any`), among `items` and `pool` (every item a model may have
    seen: for an eval, the items of its sources; for a public corpus, the corpus). What is left of
    the control band holds no near duplicate of a pre-cutoff item, at the dedup's recall-first level."""
    instant = cutoff_instant(cutoff)
    control = [item for item in items if item.occurred_at >= instant]
    before: dict[str, DatedText] = {}
    for item in (*items, *pool):
        if item.occurred_at < instant:
            before.setdefault(item.item_id, item)
    return near_any(control, list(before.values()), links=links, config=config, recipe=recipe)


def clean_band_warning(left_out: Mapping[str, NearTo]) -> EvidenceWarning | None:
    """The `control_near_pre_cutoff` warning for the items `left_out` of the control band, by how
    they were found; None when none was."""
    if not left_out:
        return None
    stages = Counter(near.stage for near in left_out.values())
    how = ", ".join(f"{count} {stage}" for stage, count in sorted(stages.items(), key=lambda pair: (-pair[1], pair[0])))
    return EvidenceWarning(
        code="control_near_pre_cutoff",
        message=(
            f"{len(left_out)} items dated on or after the cutoff were left out of the control band ({how}): each is a near copy "
            "of an item dated before it, at the dedup's recall-first level, so a model that saw the older item may reproduce "
            "its twin, and it would stand for an unseen item wrongly."
        ),
    )
