"""Near links: the items a text is near at a recall-first level, below the thresholds that decide
a duplicate. Curation records them with each decision (`curation.dedup.batch_writes`); releases
keep linked items on one side of the dev/sealed split (`curation.releases.groups`), so a duplicate
the rules miss still never straddles it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from schemas.dedup import DedupStage


@dataclass(frozen=True)
class NearLinkTo:
    """An indexed item a text is near at a recall-first level (`DedupConfig.link_levels`): the
    stage that saw it (`exact`, `minhash`, `embedding`) and its score."""

    other: int
    stage: str
    score: float | None


def near_links(
    item_id: int | None,
    exclude: Collection[int],
    exact: Sequence[int],
    near: Sequence[tuple[int, float]],
    neighbours: Sequence[tuple[int, float]],
    levels: dict[str, float],
) -> tuple[NearLinkTo, ...]:
    """The items a text is near at the recall-first `levels`, from what its judgement found
    (exact copies, MinHash candidates with their estimated Jaccard, embedding neighbours with
    their body cosine), before any rule, identity or ruling set a pair apart: one link per item,
    the strongest stage first."""
    links: dict[int, NearLinkTo] = {}

    def add(other: int, stage: DedupStage, score: float) -> None:
        if other != item_id and other not in exclude and other not in links:
            links[other] = NearLinkTo(other, stage.value, round(float(score), 4))

    for other in exact:
        add(other, DedupStage.EXACT, 1.0)
    for other, score in near:
        if score >= levels["minhash"]:
            add(other, DedupStage.MINHASH, score)
    if "embedding" in levels:
        for other, cosine in neighbours:
            if cosine >= levels["embedding"]:
                add(other, DedupStage.EMBEDDING, cosine)
    return tuple(links.values())
