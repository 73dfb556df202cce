"""False positives of each test on the clean models over many temporal splits of the items, and the
spread that a correctly sized test shows on one fixed split.

One split at one cutoff is one draw of which items fall on each side. Repeated samples of 50 against
50 from the same two pools keep that draw: where the older pool happens to score a little higher
(drift, or chance), every sample sees it. So a single split's rate is not the test's size: random
splits of the very same scores into pools of the same sizes show how far it swings
(`chance_spread`). The clean models saw no item of the pool, so any cutoff splits the items into a
pre-cutoff band and a control band they have not seen (`clean_split_rates`): the mean over cutoffs
is the false-positive rate over repeated temporal splits, drift included, and is what the
requirement (at most 6% at alpha 0.05) is judged on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from bench.tinylm.corpus import Design, PoolItem
from bench.tinylm.power import CLEAN, DECIDING, MAX_FALSE_POSITIVES, TESTS, flagged_draws, side
from bench.tinylm.scoring import completion_report
from curation.evidence.clean_band import near_pre_cutoff
from schemas.evidence import cutoff_instant

MIN_SIDE = 100
"""The fewest items on each side of a cutoff for it to be used (twice the draw)."""


@dataclass(frozen=True)
class SplitRates:
    """One test on one clean model: its false-positive rate at each cutoff (`rates`, in the order
    of `cutoffs`)."""

    test: str
    model: str
    cutoffs: tuple[str, ...]
    rates: tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.rates))


def quarterly_cutoffs(first: date, last: date) -> list[date]:
    """The first day of every quarter from `first` to `last`, both included where they fall on one."""
    out, year, month = [], first.year, ((first.month - 1) // 3) * 3 + 1
    while date(year, month, 1) <= last:
        if date(year, month, 1) >= first:
            out.append(date(year, month, 1))
        year, month = (year + 1, 1) if month == 10 else (year, month + 3)
    return out


def clean_split_rates(plan: Design, probed: dict[str, Any], scored: dict[str, Any], *, cutoffs: list[date], rng: np.random.Generator, draws: int, n: int) -> list[SplitRates]:
    """For each clean model and test, at each cutoff with at least `MIN_SIDE` items on each side:
    the items dated before it against those dated on or after it, less those near a pre-cutoff
    item (`curation.evidence.clean_band.near_pre_cutoff`, as the product cleans its control band),
    `draws` draws of `n` against `n` through the length-matched test."""
    items = plan.probed()
    used: list[tuple[date, list[PoolItem], list[PoolItem]]] = []
    for cutoff in cutoffs:
        instant = cutoff_instant(cutoff)
        near = near_pre_cutoff([item.dated() for item in items], cutoff=cutoff)
        pre = [item for item in items if item.occurred_at < instant]
        control = [item for item in items if item.occurred_at >= instant and item.item_id not in near]
        if min(len(pre), len(control)) >= MIN_SIDE:
            used.append((cutoff, pre, control))
    rates: dict[tuple[str, str], list[float]] = {}
    for cutoff, pre, control in used:
        for model in CLEAN:
            # The completion scores again with the bands of this cutoff (the margin compares within a band).
            at = {**probed, model: completion_report(plan, probed[model]["completions"], model=model, cutoff=cutoff)}
            for test in TESTS:
                hits = flagged_draws(side(test, model, at, scored, pre), side(test, model, at, scored, control), rng=rng, draws=draws, n=n)
                rates.setdefault((test, model), []).append(hits / draws)
    names = tuple(cutoff.isoformat() for cutoff, _, _ in used)
    return [SplitRates(test=test, model=model, cutoffs=names, rates=tuple(rates[(test, model)])) for model in CLEAN for test in TESTS]


def chance_spread(
    plan: Design, probed: dict[str, Any], scored: dict[str, Any], *, model: str, splits: int, rng: np.random.Generator, draws: int, n: int
) -> dict[str, dict[str, float]]:
    """Per test, on `model`: the unexposed and control items' scores pooled and split at random
    `splits` times into pools of their sizes, each split's rate over `draws` draws: the mean (the
    test's size where the bands are exchangeable), the share of splits above 6% and the 90th
    percentile (how far one split's rate swings by chance alone). Completion scores are as at the
    bench's cutoff (a margin's comparison items are not drawn again for each random split)."""
    out = {}
    for test in TESTS:
        pre, control = side(test, model, probed, scored, plan.unexposed), side(test, model, probed, scored, plan.control)
        values, lengths = np.concatenate([pre[0], control[0]]), np.concatenate([pre[1], control[1]])
        rates = []
        for _ in range(splits):
            order = rng.permutation(len(values))
            a, b = order[: len(pre[0])], order[len(pre[0]) :]
            rates.append(flagged_draws((values[a], lengths[a]), (values[b], lengths[b]), rng=rng, draws=draws, n=n) / draws)
        found = np.array(rates)
        out[test] = {"mean": float(found.mean()), "over_6pct": float(np.mean(found > MAX_FALSE_POSITIVES)), "p90": float(np.quantile(found, 0.9))}
    return out


def split_table(rows: list[SplitRates], spread: dict[str, dict[str, float]], *, draws: int, n: int) -> bool:
    """The false-positive rates over temporal splits (mean, largest, per clean model) beside the
    chance spread of one split, and the PASS/FAIL lines for the tests the product decides on
    (`DECIDING`); True when each one's mean over splits is at most 6% on every clean model."""
    cutoffs = rows[0].cutoffs
    print(f"\nclean models over {len(cutoffs)} temporal splits ({cutoffs[0]} .. {cutoffs[-1]}, quarterly; {draws} draws of {n} vs {n} each): false-positive rate")
    print(f"  {'test':<16}" + "".join(f"{f'{model} mean':>10}{f'{model} max':>9}" for model in CLEAN) + f"{'one split by chance: mean, >6%, p90':>40}")
    by = {(row.test, row.model): row for row in rows}
    for test in TESTS:
        cells = "".join(f"{by[(test, model)].mean:>10.3f}{max(by[(test, model)].rates):>9.3f}" for model in CLEAN)
        chance = spread[test]
        print(f"  {test:<16}{cells}{chance['mean']:>19.3f}{chance['over_6pct']:>10.2f}{chance['p90']:>11.3f}")
    ok = True
    print()
    for metric, test in DECIDING.items():
        worst = max(by[(metric, model)].mean for model in CLEAN)
        passed = worst <= MAX_FALSE_POSITIVES
        ok &= passed
        print(f"  {test:<18} ({metric}) false positives over temporal splits {worst:.3f} <= {MAX_FALSE_POSITIVES}: {'PASS' if passed else 'FAIL'}")
    return ok
