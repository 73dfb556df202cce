"""Detection and false-positive rates of each test over repeated draws, through the probe report's
length-matched Mann–Whitney test (`curation.evidence.length_strata.length_matched_mann_whitney`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bench.tinylm.corpus import GROUPS, Design, PoolItem
from bench.tinylm.scoring import REFERENCE_OF
from curation.evidence.clean_band import near_any
from curation.evidence.length_strata import length_matched_mann_whitney
from curation.intervals import wilson_interval

ALPHA = 0.05
MAX_FALSE_POSITIVES = 0.06
CLEAN = ("N", "R")
"""The clean models: background only, from two seeds."""
MIN_POWER = 0.80
TESTS = ("levenshtein_margin", "levenshtein", "lcs_ratio", "loss", "min_k", "min_k_plus_plus", "zlib", "reference_gap", "reference_test")
"""`levenshtein_margin`, `levenshtein` and `lcs_ratio` are the completion probe's metrics (greedy
text over chat completions); the rest read log-probabilities (`curation.evidence.membership`); `reference_gap` is
the reference model's loss per byte minus the target's on the same item; `reference_test` is the
reference test's decision, the gap confirmed by the target's own Min-K%++ on the same draw (`JOINT`)."""
COMPLETION = ("levenshtein_margin", "levenshtein", "lcs_ratio")
DECIDING = {"levenshtein_margin": "completion", "min_k_plus_plus": "logprob", "reference_test": "reference_logprob"}
"""The metric each of the product's tests decides on (its primary metric; the reference test's
joint decision): the rest are shown beside them."""
PROBE = next(metric for metric, test in DECIDING.items() if test == "completion")
JOINT = {"reference_test": ("reference_gap", "min_k_plus_plus")}
"""Tests that flag only where every one of their metrics does (an intersection-union test: its
p-value is the largest of theirs), as `curation.evidence.probe_report.confirmed` decides."""


@dataclass(frozen=True)
class PowerRow:
    """One test on one model: `band` against the control band. `rate` is the share of `draws`
    draws with a length-matched p-value below alpha; `full_p` the same test on the whole bands."""

    test: str
    model: str
    band: str
    rate: float
    low: float
    high: float
    full_p: float
    pool: int
    control_pool: int


def joint_values(test: str, model: str, probed: dict[str, Any], scored: dict[str, Any], item: PoolItem) -> tuple[tuple[float, ...], int] | None:
    """(scores, length) of one item under each metric of `test` (`JOINT`, else the test alone)."""
    found = [values(part, model, probed, scored, item) for part in JOINT.get(test, (test,))]
    if any(value is None for value in found):
        return None
    return tuple(value[0] for value in found if value is not None), next(value[1] for value in found if value is not None)


def values(test: str, model: str, probed: dict[str, Any], scored: dict[str, Any], item: PoolItem) -> tuple[float, int] | None:
    """(score, length) of one item under one test, higher meaning more like a member; None when
    the item has no score (a failed probe)."""
    if test in COMPLETION:
        if item.item_id not in probed[model]["scores"]:
            return None
        return probed[model]["scores"][item.item_id][test], probed[model]["lengths"][item.item_id]
    if item.item_id not in scored[model]["scores"]:
        return None
    return scored[model]["scores"][item.item_id][test], scored[model]["lengths"][item.item_id]


def one_per_cluster(members: list[PoolItem]) -> list[PoolItem]:
    """The band with one item (the oldest) per cluster of near duplicates within it, clusters being
    joined by each item's nearest near copy in the band (`curation.evidence.clean_band.near_any`).
    Near copies in one band move together in every draw, so the test, which takes items as
    independent, would count one text several times."""
    near = near_any([item.dated() for item in members], [item.dated() for item in members])
    parent = {item.item_id: item.item_id for item in members}

    def root(item_id: str) -> str:
        while parent[item_id] != item_id:
            parent[item_id] = parent[parent[item_id]]
            item_id = parent[item_id]
        return item_id

    for link in near.values():
        parent[root(link.item_id)] = root(link.other)
    kept: dict[str, PoolItem] = {}
    for item in sorted(members, key=lambda item: (item.occurred_at, item.item_id)):
        kept.setdefault(root(item.item_id), item)
    return [item for item in members if kept.get(root(item.item_id)) is item]


def comparisons(plan: Design) -> list[tuple[str, str, list[PoolItem]]]:
    """(model, band, items) compared with the control band: each exposure group and the unexposed
    items on C; on each clean model, the unexposed items and all exposure groups together (it saw
    none of them)."""
    rows = [("C", f"{count}x", plan.groups[count]) for count in GROUPS]
    rows.append(("C", "unexposed", plan.unexposed))
    for clean in CLEAN:
        rows.append((clean, "unexposed", plan.unexposed))
        rows.append((clean, "all groups", plan.exposed()))
    return rows


def collapsed(plan: Design) -> Design:
    """The plan with one item per near-duplicate cluster within the unexposed and control bands
    (the exposure groups hold no near copies of each other by construction)."""
    return replace(plan, unexposed=one_per_cluster(plan.unexposed), control=one_per_cluster(plan.control))


def joint_p(sides: tuple[Any, Any, Any, Any], a: Any, b: Any) -> float:
    """The length-matched p-value of band rows `a` against control rows `b`: the largest over the
    test's metrics (the columns of the value arrays in `sides`: band values, band lengths, control
    values, control lengths)."""
    pre_values, pre_lengths, control_values, control_lengths = sides
    return max(
        length_matched_mann_whitney(pre_values[a, part], control_values[b, part], pre_lengths=pre_lengths[a], control_lengths=control_lengths[b])
        for part in range(pre_values.shape[1])
    )


Side = tuple[np.ndarray, np.ndarray]
"""One band's scores (one row per item, one column per metric of the test) and scored lengths."""


def side(test: str, model: str, probed: dict[str, Any], scored: dict[str, Any], members: list[PoolItem]) -> Side:
    """The scores and lengths of `members` under `test` on `model` (items without a score left out)."""
    found = [value for item in members if (value := joint_values(test, model, probed, scored, item)) is not None]
    return np.array([values for values, _ in found]), np.array([length for _, length in found], dtype=np.int64)


def flagged_draws(pre: Side, control: Side, *, rng: np.random.Generator, draws: int, n: int) -> int:
    """How many of `draws` draws of `n` band items against `n` control items, each drawn without
    replacement (the whole band where it holds fewer), the length-matched test flags at alpha."""
    sides = (pre[0], pre[1], control[0], control[1])
    hits = 0
    for _ in range(draws):
        a = rng.choice(len(pre[0]), size=min(n, len(pre[0])), replace=False)
        b = rng.choice(len(control[0]), size=min(n, len(control[0])), replace=False)
        hits += joint_p(sides, a, b) < ALPHA
    return hits


def draw_rates(plan: Design, probed: dict[str, Any], scored: dict[str, Any], *, rng: np.random.Generator, draws: int, n: int) -> list[PowerRow]:
    """For every test and comparison, the share of `draws` draws flagged (`flagged_draws`; a joint
    test takes the largest p-value of its metrics on the same draw), and the test on the whole bands."""
    rows = []
    for test in TESTS:
        for model, band, members in comparisons(plan):
            pre, control = side(test, model, probed, scored, members), side(test, model, probed, scored, plan.control)
            full = joint_p((pre[0], pre[1], control[0], control[1]), np.arange(len(pre[0])), np.arange(len(control[0])))
            hits = flagged_draws(pre, control, rng=rng, draws=draws, n=n)
            low, high = wilson_interval(hits, draws)
            rows.append(PowerRow(test=test, model=model, band=band, rate=hits / draws, low=low, high=high, full_p=full, pool=len(pre[0]), control_pool=len(control[0])))
    return rows


def print_table(
    rows: list[PowerRow], shares: dict[str, dict[str, dict[str, float]]], runs: dict[str, dict[str, Any]], probed: dict[str, Any], scored: dict[str, Any], *, n: int, draws: int
) -> bool:
    """The figures as tables, with PASS/FAIL lines; True when every requirement holds."""
    for name, run in runs.items():
        size = f"{run['parameters'] / 1e6:.2f}M parameters, {run['tokens']:,} tokens, {run['steps']} steps"
        print(f"model {name}: {size}, trained in {run['seconds']:.0f} s, final loss {run['final_loss']:.3f}")
    print("\nverbatim share (greedy continuation of the first half reproduces >= half of the rest as one run; whole)")
    bands = list(next(iter(shares.values())))
    print("  model " + "".join(f"{band:>17}" for band in bands))
    for name, by_band in shares.items():
        print(f"  {name:<5} " + "".join(f"{by_band[band]['half']:>9.2f} ({by_band[band]['whole']:.2f})" for band in bands))
    for name, probe in probed.items():
        report = probe["report"]
        verdict = f"{report['metric']}: flagged {report['flagged']}, length-matched p {report['length_matched_p']:.3g}, gap {report['median_gap']:+.3f}"
        print(f"  probe report on {name}, all pre-cutoff items vs control: {verdict}")
    for name, report in scored.items():
        verdicts = ", ".join(f"{metric} {'flagged' if entry['flagged'] else 'not flagged'} (p {entry['length_matched_p']:.2g})" for metric, entry in report["report"].items())
        print(f"  {report['test']} report on {name} (reference {REFERENCE_OF[name]}), all pre-cutoff items vs control: {verdicts}")
    return rate_table(rows, n=n, draws=draws, title="bands as drawn")


def rate_table(rows: list[PowerRow], *, n: int, draws: int, title: str) -> bool:
    """The rates as a table (tests by comparison), each test's false-positive rate on this split
(printed: one split's rate swings with which items fell on each side, so the requirement is judged
over many splits, `bench.tinylm.temporal_splits`) and the power lines (PASS/FAIL); True when the
log-probability tests detect the 10x group with power >= 0.8 where the completion probe does not."""
    columns = [(row.model, row.band) for row in rows if row.test == TESTS[0]]
    print(f"\n{title}: share of {draws} draws flagged at alpha {ALPHA} ({n} band items vs {n} control items, length-matched Mann–Whitney)")
    print(f"C: detection (C unexposed: spill-over onto items C did not see), {' and '.join(CLEAN)}: false positives")
    print(f"  {'band / control':<16}" + "".join(f"{f'{row.pool} / {row.control_pool}':>15}" for row in rows if row.test == TESTS[0]))
    print(f"  {'test':<16}" + "".join(f"{model + ' ' + band:>15}" for model, band in columns))
    by = {(row.test, row.model, row.band): row for row in rows}
    for test in TESTS:
        print(f"  {test:<16}" + "".join(f"{by[(test, model, band)].rate:>15.3f}" for model, band in columns))
    print("\n  on this one split (false positives: the largest over the clean models' two pools; see the temporal splits below)")
    ok = True
    for test in TESTS:
        false = max(by[(test, clean, band)].rate for clean in CLEAN for band in ("unexposed", "all groups"))
        line = f"  {test:<16} false positives {false:.3f}"
        if test not in COMPLETION:
            power = by[(test, "C", "10x")].rate
            probe_power = by[(PROBE, "C", "10x")].rate
            strong = power >= MIN_POWER and probe_power < MIN_POWER
            ok &= strong
            line += f"; 10x power {power:.3f} >= {MIN_POWER} where the probe's is {probe_power:.3f}: {'PASS' if strong else 'FAIL'}"
        print(line)
    return ok
