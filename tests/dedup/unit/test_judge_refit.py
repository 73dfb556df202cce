"""A source's refit of the judge from curators' rulings (`curation.dedup.judge.refit`)."""

from __future__ import annotations

import random

import pytest

from curation.dedup.judge.refit import MIN_EACH, MIN_RULINGS, Ruling, duplicate_threshold, refit


def _rulings(count: int, *, shipped: float, same_share: float, seed: int = 3) -> list[Ruling]:
    rng = random.Random(seed)
    return [Ruling(shipped, {"body_cosine": 0.9, "title_cosine": 0.8}, rng.random() < same_share) for _ in range(count)]


def test_too_few_rulings_or_one_kind_only_leave_the_shipped_p() -> None:
    assert refit(_rulings(MIN_RULINGS - 1, shipped=0.9, same_share=0.5)) is None
    one_kind = [Ruling(0.9, {}, True)] * MIN_RULINGS + [Ruling(0.9, {}, False)] * (MIN_EACH - 1)
    assert refit(one_kind) is None


def test_rulings_that_find_the_judge_overconfident_lower_its_p() -> None:
    # The shipped judge says 0.95; curators find a third of such pairs the same incident.
    fitted = refit(_rulings(200, shipped=0.95, same_share=1 / 3))
    assert fitted is not None
    assert fitted.probability(0.95, {"body_cosine": 0.9, "title_cosine": 0.8}) == pytest.approx(1 / 3, abs=0.08)


def test_a_few_rulings_move_p_less_than_many() -> None:
    features = {"body_cosine": 0.9, "title_cosine": 0.8}
    def rulings(same: int, distinct: int) -> list[Ruling]:
        return [Ruling(0.95, features, True)] * same + [Ruling(0.95, features, False)] * distinct

    few = refit(rulings(3, 9))
    many = refit(rulings(100, 300))
    assert few is not None and many is not None
    assert many.probability(0.95, features) < few.probability(0.95, features) < 0.95


def test_rulings_that_agree_with_the_judge_keep_its_ranking() -> None:
    rng = random.Random(9)
    rulings = []
    for _ in range(120):
        p = rng.uniform(0.05, 0.95)
        rulings.append(Ruling(p, {"body_cosine": p, "title_cosine": p}, rng.random() < p))
    fitted = refit(rulings)
    assert fitted is not None
    scores = [fitted.probability(p, {"body_cosine": p, "title_cosine": p}) for p in (0.1, 0.3, 0.5, 0.7, 0.9)]
    assert scores == sorted(scores)
    assert scores[0] < 0.3 and scores[-1] > 0.7


def test_the_duplicate_threshold_is_the_lowest_p_whose_pairs_reach_the_precision() -> None:
    # Mean of {0.99, 0.95, 0.9} is 0.947; adding 0.7 gives 0.885 < 0.9.
    assert duplicate_threshold([0.99, 0.95, 0.9, 0.7, 0.2], precision=0.9, floor=0.5) == 0.9
    assert duplicate_threshold([0.8, 0.7], precision=0.9, floor=0.5) == 1.0, "nothing reaches it: nothing is merged"
    assert duplicate_threshold([0.99, 0.98, 0.97, 0.96, 0.6, 0.55], precision=0.5, floor=0.6) == 0.6, "never below the floor"
