"""Two models compared on the items both scored, in dev runs of one eval: the pairs, how many
items each scored that the other did not, and the paired difference (`service.runs.paired`).

Which scores pair:

- with a release: the items both models scored in dev runs of that release;
- without one, across releases: an item counts as the same item when its id and its released
  content (the dev content digest the release froze) match, so a revised item is another item;
  the same content released again pairs with itself whatever release each model ran.

Where a model scored an item in several runs, its latest run (highest id) counts. Sealed runs
never pair: their per-item results stay out of every comparison (a sealed run is shown only as
its aggregate score), and so does any item some eval holds sealed
(`curation.releases.visibility.sealed_anywhere`), which no dev split serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from curation.releases.visibility import sealed_anywhere
from schemas.evals import Eval, Split
from schemas.model_registry import Model
from schemas.release import Release
from schemas.runs import Result, Run, RunItem
from service.runs.paired import PairedDifference, paired_difference


@dataclass(frozen=True)
class ScoredItem:
    """A model's latest dev score on one released version of an item."""

    item_id: int
    content_digest: str
    release: int
    run_id: int
    score: float


@dataclass(frozen=True)
class PairedItem:
    """One item both models scored: each side's run, release and score."""

    item_id: int
    content_digest: str
    first: ScoredItem
    second: ScoredItem

    @property
    def difference(self) -> float:
        return self.first.score - self.second.score


@dataclass(frozen=True)
class Comparison:
    """`pairs` in item order; `only_first` and `only_second`: items one model scored and the other
    did not; `difference`: the paired difference, first − second."""

    release: int | None
    pairs: list[PairedItem]
    only_first: int
    only_second: int
    difference: PairedDifference


def dev_scores(*, session: Session, evaluation: Eval, model: Model, release: Release | None = None) -> dict[tuple[int, str], ScoredItem]:
    """The model's dev scores on the eval (on `release` only, when given), by (item id, content
    digest): the latest run's score where several runs scored one. Items some eval holds sealed
    are left out."""
    query = (
        sa_select(col(Result.item_id), col(Result.score), col(RunItem.content_digest), col(Run.id), col(Release.number))
        .join(Run, col(Run.id) == col(Result.run_id))
        .join(RunItem, (col(RunItem.run_id) == col(Result.run_id)) & (col(RunItem.item_id) == col(Result.item_id)))
        .join(Release, col(Release.id) == col(Run.release_id))
        .where(col(Run.eval_id) == evaluation.id, col(Run.model_id) == model.id, col(Run.split) == Split.DEV.value)
        .order_by(col(Run.id), col(Result.item_id))
    )
    if release is not None:
        query = query.where(col(Run.release_id) == release.id)
    found: dict[tuple[int, str], ScoredItem] = {}
    for item_id, score, digest, run_id, number in session.execute(query).all():
        found[(item_id, digest)] = ScoredItem(item_id, digest, number, run_id, score)
    hidden = sealed_anywhere(session, {item_id for item_id, _ in found})
    return {key: scored for key, scored in found.items() if key[0] not in hidden}


def compare_models(*, session: Session, evaluation: Eval, first: Model, second: Model, release: Release | None = None, confidence: float = 0.95) -> Comparison:
    """`first` against `second` on the items both scored in dev runs of the eval (of `release`,
    when given; otherwise across releases, as the module says)."""
    a = dev_scores(session=session, evaluation=evaluation, model=first, release=release)
    b = dev_scores(session=session, evaluation=evaluation, model=second, release=release)
    both = sorted(a.keys() & b.keys())
    pairs = [PairedItem(item_id, digest, a[(item_id, digest)], b[(item_id, digest)]) for item_id, digest in both]
    difference = paired_difference([pair.first.score for pair in pairs], [pair.second.score for pair in pairs], confidence)
    return Comparison(release.number if release is not None else None, pairs, len(a) - len(both), len(b) - len(both), difference)
