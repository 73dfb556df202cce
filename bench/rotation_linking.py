"""Linking core and balance: how much the difficulty of consecutive releases moves when the pool's
composition drifts, with the linking core and the balance, with the rotation that takes the
newest items, and with a random draw each month. Prints figures; not part of the test suite.

The pool is simulated with a known, true difficulty for every item (a logit): a source whose items
get harder month after month, categories of very different difficulty whose mix drifts (the
hardest grows from 5% to 35% of what arrives; a source doubles its volume half way), longer texts
a little harder, and noise. Every strategy runs the real rotation (`curation.releases.rotation.
plan_rotation`, the function the release writer calls) on the same simulated candidates, twelve
monthly releases after six months of history, with splits by the real keyed hash
(`curation.releases.sealing`):

- `linked`: the linking core (`--share`, 0.3 by default) and the balance against the release
  before's shares (`curation.releases.composition`), as an eval has them by default;
- `newest`: no core, no balance (the rotation before them: newest incident first);
- `random`: each release a uniform draw of the target size from the items inside the window.

The difficulty index of a release is the mean expected score, in points out of 100, of a reference
ability (0 logits) on its items, from their true difficulties. Printed: one seed's twelve indexes
per strategy, then over `--seeds` seeds the largest and the mean change between consecutive
releases, the share of each release's dev split carried from the release before, and how far
consecutive releases' category shares differ (total variation). The claim checked: with linking
and balance, consecutive releases are within 3 points of each other.

Usage: PYTHONPATH=. .venv/bin/python bench/rotation_linking.py [--seeds 40] [--target 200] [--share 0.3] [--noise 0.4] [--no-sensitivity]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.releases.composition import Strata, shares, strata_of
from curation.releases.rotation import Candidate, RotationPolicy, plan_rotation
from curation.releases.sealing import is_sealed
from schemas.evals import Split

KEY = b"rotation-linking-bench-key-01234"
SEALED_FRACTION = 0.2
HISTORY_MONTHS = 6
RELEASES = 12
MAX_AGE_DAYS = 180
START = datetime(2026, 1, 1, 3, tzinfo=UTC)
LIMIT = 3.0
"""Points: the most consecutive releases may differ with linking and balance."""

SOURCES = {"pager": (0.0, 0.0), "tickets": (-0.3, 0.05), "security": (0.4, 0.0)}
"""Source -> (difficulty offset, added each month: `tickets` gets harder)."""
CATEGORIES = {"network": -1.0, "ui": -0.7, "auth": -0.4, "database": 0.0, "storage": 0.6, "kernel": 1.4}
"""Category -> difficulty offset."""


@dataclass(frozen=True)
class Simulated:
    item_id: int
    source: str
    tag: str
    length: int
    occurred_at: datetime
    difficulty: float
    split: str


def month_start(month: int) -> datetime:
    """The start of the period `month` months after the history began (month 0)."""
    year, index = divmod(START.month - 1 + month, 12)
    return START.replace(year=START.year + year, month=index + 1)


def _category_weights(progress: float) -> list[float]:
    """What arrives, by category, at `progress` (0 to 1) through the whole run: `kernel`, the
    hardest, grows from 5% to 35%, `network`, the easiest, shrinks."""
    kernel = 0.05 + 0.30 * progress
    network = 0.30 - 0.20 * progress
    rest = (1.0 - kernel - network) / 4
    return [network, rest, rest, rest, rest, kernel]


def simulate_pool(rng: np.random.Generator, *, inflow: int, noise: float) -> list[Simulated]:
    """Every item of the run, in order of arrival (ids follow dates); `noise` is the standard
    deviation, in logits, of what the strata do not explain of an item's difficulty."""
    items: list[Simulated] = []
    months = HISTORY_MONTHS + RELEASES
    for month in range(months):
        start, end = month_start(month), month_start(month + 1)
        progress = month / (months - 1)
        security = 2.0 if month >= HISTORY_MONTHS + RELEASES // 2 else 1.0
        volume = np.array([1.0, 1.0, security])
        counts = rng.multinomial(int(rng.poisson(inflow * volume.sum() / 3)), volume / volume.sum())
        arrivals: list[tuple[datetime, str]] = []
        for source, count in zip(SOURCES, counts, strict=True):
            for _ in range(int(count)):
                arrivals.append((start + (end - start) * float(rng.random()), source))
        arrivals.sort()
        weights = _category_weights(progress)
        for occurred_at, source in arrivals:
            tag = str(rng.choice(list(CATEGORIES), p=weights))
            length = int(np.clip(rng.lognormal(6.0, 0.8), 20, 20_000))
            offset, per_month = SOURCES[source]
            difficulty = offset + per_month * month + CATEGORIES[tag] + 0.25 * math.log2(length / 400) + float(rng.normal(0.0, noise))
            item_id = len(items) + 1
            split = Split.SEALED.value if is_sealed(KEY, item_id, SEALED_FRACTION) else Split.DEV.value
            items.append(Simulated(item_id, source, tag, length, occurred_at, difficulty, split))
    return items


def _candidate(item: Simulated) -> Candidate:
    return Candidate(item_id=item.item_id, source=item.source, occurred_at=item.occurred_at, status="approved", split=item.split, tags=(item.tag,), length=item.length)


def _strata(item: Simulated, at: datetime) -> Strata:
    return strata_of(source=item.source, tags=(item.tag,), length=item.length, occurred_at=item.occurred_at, at=at)


def difficulty_index(items: Sequence[Simulated]) -> float:
    """The mean expected score, in points, of a reference ability of 0 logits on `items`."""
    return 100.0 * float(np.mean([1.0 / (1.0 + math.exp(item.difficulty)) for item in items]))


@dataclass
class Run:
    """One strategy's releases: their items, and the share of each dev split carried from the one before."""

    releases: list[list[Simulated]] = field(default_factory=list)
    carried: list[float] = field(default_factory=list)


def rotate(pool: Sequence[Simulated], *, target: int, share: float, balance: bool) -> Run:
    """Twelve releases by the real rotation (`plan_rotation`), each written as the writer would:
    kept members keep their split, newcomers get theirs by the keyed hash."""
    by_id = {item.item_id: item for item in pool}
    run = Run()
    members: list[int] = []
    ever: set[int] = set()
    previous_at: datetime | None = None
    for number in range(RELEASES):
        at = month_start(HISTORY_MONTHS + number)
        previous = [by_id[item_id] for item_id in members]
        reference = shares(_strata(item, previous_at) for item in previous) if balance and previous and previous_at is not None else None
        previous_dev = frozenset(item.item_id for item in previous if item.split == Split.DEV.value)
        policy = RotationPolicy(
            window_start=at - timedelta(days=MAX_AGE_DAYS),
            window_end=at,
            target_size=target,
            admitted=frozenset({"approved"}),
            linking_share=share,
            previous_dev=previous_dev,
            reference=reference,
        )
        fresh = [_candidate(item) for item in pool if item.occurred_at < at and item.item_id not in ever]
        plan = plan_rotation(policy, [_candidate(item) for item in previous], fresh)
        members = plan.members
        ever.update(plan.added)
        release = [by_id[item_id] for item_id in members]
        run.releases.append(release)
        dev = [item for item in release if item.split == Split.DEV.value]
        if previous:
            run.carried.append(sum(item.item_id in previous_dev for item in dev) / len(dev))
        previous_at = at
    return run


def draw(pool: Sequence[Simulated], rng: np.random.Generator, *, target: int) -> Run:
    """Twelve releases, each a uniform draw of `target` items from those inside its window."""
    run = Run()
    previous_dev: set[int] = set()
    for number in range(RELEASES):
        at = month_start(HISTORY_MONTHS + number)
        window = [item for item in pool if at - timedelta(days=MAX_AGE_DAYS) <= item.occurred_at < at]
        picks = rng.choice(len(window), size=min(target, len(window)), replace=False)
        release = [window[int(index)] for index in sorted(picks)]
        run.releases.append(release)
        dev = [item for item in release if item.split == Split.DEV.value]
        if number:
            run.carried.append(sum(item.item_id in previous_dev for item in dev) / len(dev))
        previous_dev = {item.item_id for item in dev}
    return run


def changes(run: Run) -> list[float]:
    indexes = [difficulty_index(release) for release in run.releases]
    return [abs(later - earlier) for earlier, later in itertools.pairwise(indexes)]


def composition_drift(run: Run, dimension: str) -> float:
    """The mean total variation distance between consecutive releases' shares in `dimension`."""
    distances = []
    for number, (earlier, later) in enumerate(itertools.pairwise(run.releases)):
        at_before, at_after = month_start(HISTORY_MONTHS + number), month_start(HISTORY_MONTHS + number + 1)
        before = Counter(getattr(_strata(item, at_before), dimension) for item in earlier)
        after = Counter(getattr(_strata(item, at_after), dimension) for item in later)
        distances.append(0.5 * sum(abs(before[value] / len(earlier) - after[value] / len(later)) for value in set(before) | set(after)))
    return float(np.mean(distances))


STRATEGIES = ("linked", "newest", "random")


def _run(strategy: str, pool: Sequence[Simulated], rng: np.random.Generator, *, target: int, share: float) -> Run:
    if strategy == "linked":
        return rotate(pool, target=target, share=share, balance=True)
    if strategy == "newest":
        return rotate(pool, target=target, share=0.0, balance=False)
    return draw(pool, rng, target=target)


def scenario(*, seeds: int, inflow: int, noise: float, target: int, share: float, strategies: Sequence[str] = STRATEGIES, show: bool = False) -> dict[str, dict[str, list[float]]]:
    """Every strategy over `seeds` simulated pools: per seed, the largest and the mean change of the
    difficulty index between consecutive releases, the mean share of the dev split carried, and
    the mean composition drift by category and by age band. `show` prints seed 0's indexes."""
    figures: dict[str, dict[str, list[float]]] = {name: {"max": [], "mean": [], "carried": [], "tag": [], "age": []} for name in strategies}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        pool = simulate_pool(rng, inflow=inflow, noise=noise)
        runs = {name: _run(name, pool, rng, target=target, share=share) for name in strategies}
        if show and seed == 0:
            print(f"Seed 0: {len(pool)} items over {HISTORY_MONTHS + RELEASES} months; difficulty index (points) of each release:")
            print("release  " + "  ".join(f"{name:>7}" for name in strategies))
            for number in range(RELEASES):
                print(f"{number + 1:>7}  " + "  ".join(f"{difficulty_index(runs[name].releases[number]):7.1f}" for name in strategies))
        for name, run in runs.items():
            steps = changes(run)
            figures[name]["max"].append(max(steps))
            figures[name]["mean"].append(float(np.mean(steps)))
            figures[name]["carried"].append(float(np.mean(run.carried)))
            figures[name]["tag"].append(composition_drift(run, "tag"))
            figures[name]["age"].append(composition_drift(run, "age"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--target", type=int, default=200)
    parser.add_argument("--share", type=float, default=0.3)
    parser.add_argument("--noise", type=float, default=0.4, help="logits of an item's difficulty its strata do not explain (standard deviation)")
    parser.add_argument("--no-sensitivity", action="store_true", help="skip the table over item noise and linking share")
    args = parser.parse_args()

    worst = 0.0
    for number, inflow in enumerate((240, 150)):
        print(f"\n== {inflow} items a month (one source doubles half way), target {args.target}, maximum age {MAX_AGE_DAYS} days, share {args.share}, item noise {args.noise}")
        figures = scenario(seeds=args.seeds, inflow=inflow, noise=args.noise, target=args.target, share=args.share, show=number == 0)
        print(f"Over {args.seeds} seeds, between consecutive releases (11 changes a seed):")
        print(f"{'strategy':<8}  {'max change':>10}  {'worst seed':>10}  {'mean change':>11}  {'dev carried':>11}  {'category TV':>11}  {'age TV':>7}")
        for name in STRATEGIES:
            values = figures[name]
            print(
                f"{name:<8}  {np.mean(values['max']):10.2f}  {max(values['max']):10.2f}  {np.mean(values['mean']):11.2f}"
                f"  {np.mean(values['carried']):11.1%}  {np.mean(values['tag']):11.3f}  {np.mean(values['age']):7.3f}"
            )
        worst = max(worst, *figures["linked"]["max"])
    print(f"\nlinked: every consecutive change within {LIMIT:.0f} points: {'PASS' if worst <= LIMIT else 'FAIL'} (worst {worst:.2f})")
    if args.no_sensitivity:
        return
    seeds = max(1, args.seeds // 2)
    print(f"\nlinked, 240 items a month, target {args.target}: the largest consecutive change (mean over {seeds} seeds / worst seed) by item noise and linking share")
    shares_asked = (0.0, 0.3, 0.5)
    print(f"{'noise':>5}  " + "  ".join(f"{'share ' + str(share):>13}" for share in shares_asked))
    for noise in (0.0, 0.4, 0.6, 0.9):
        cells = []
        for share in shares_asked:
            largest = scenario(seeds=seeds, inflow=240, noise=noise, target=args.target, share=share, strategies=("linked",))["linked"]["max"]
            cells.append(f"{np.mean(largest):5.2f} / {max(largest):5.2f}")
        print(f"{noise:5.1f}  " + "  ".join(f"{cell:>13}" for cell in cells))


if __name__ == "__main__":
    main()
