"""The public-inflation test (`curation/scale/inflation.py`) on simulated models with known truth.
Prints figures; not a test.

Each simulated world (`tests/support/inflation_world.py`) holds reference models and one target
with a latent ability, a harder free-answer private eval and an easier multiple-choice public
benchmark (the relation between the two scores bends), 0/1 scores, and for inflated targets a
planted public inflation of 5 or 10 points (failed public items turned into passes). Every world is
new: new items, new reference models, new target.

1. The requirement, at 10 reference models and 300 + 300 items: the share of clean targets flagged
   at alpha 0.05 (must be <= 6%) and of targets with a planted 10-point inflation (power, must be
   >= 0.8), each with its Wilson 95% interval; PASS/FAIL.
2. A grid: reference models 5/10/20 × items per side 100/300 × inflation 0/5/10 points.
3. Two harder cases: targets outside the reference models' range (the report warns), and models
   with their own public-only skill (`--spread`, in logits), which the test cannot tell from
   inflation.

With `--compare-fits`, instead: the false-positive rate and power of each fit the report could
use (a line on raw scores, on the logit scale, on the probit scale, and a smoothing spline with its
smoothness chosen by generalised cross-validation, as ConStat fits), at 10 and 20 reference
models, which is how the probit line was chosen. Slow: the spline is fitted one draw at a time.

Usage: .venv/bin/python bench/public_inflation.py [--targets 1000] [--grid-targets 300] [--workers 2]
       .venv/bin/python bench/public_inflation.py --compare-fits [--compare-targets 300] [--compare-resamples 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.intervals import wilson_interval
from curation.scale.inflation import BOOTSTRAP_RESAMPLES, Link, public_inflation_report
from tests.support.inflation_world import InflationWorld, inflation_world

ALPHA = 0.05
MAX_FALSE_POSITIVES = 0.06
MIN_POWER = 0.80


@dataclass(frozen=True)
class Case:
    """One cell: how the worlds are made and which fit tests them."""

    references: int
    items: int
    inflation: float
    spread: float = 0.0
    outside: bool = False
    fit: str = "probit"
    resamples: int = BOOTSTRAP_RESAMPLES


def _world(rng: np.random.Generator, case: Case) -> InflationWorld:
    ability = None
    if case.outside:
        # Beyond every reference model (abilities uniform on [-2, 2]), on either side.
        ability = float(rng.choice([-1.0, 1.0]) * rng.uniform(2.1, 2.6))
    return inflation_world(rng, references=case.references, private_items=case.items, public_items=case.items, inflation=case.inflation, spread=case.spread, target_ability=ability)


def _spline_test(world: InflationWorld, rng: np.random.Generator, resamples: int) -> tuple[float, float, int]:
    """The same bootstrap with a smoothing spline (smoothness by GCV) in place of the line:
    (difference, p-value, fits that fell back to a line because the spline could not be fitted)."""
    from scipy.interpolate import make_smoothing_spline

    fallbacks = 0

    def predict(private: np.ndarray, public: np.ndarray, weights: np.ndarray, at: float) -> float:
        nonlocal fallbacks
        chosen = weights > 0
        xs, index = np.unique(private[chosen], return_inverse=True)
        totals = np.bincount(index, weights=weights[chosen])
        ys = np.bincount(index, weights=weights[chosen] * public[chosen]) / totals
        if xs.size >= 5:
            try:
                return float(make_smoothing_spline(xs, ys, w=totals)(at))
            except (ValueError, np.linalg.LinAlgError):
                pass  # the smoothness choice is ill-posed on this draw: fall back to a line
        fallbacks += 1
        if xs.size < 2:
            return float(ys.mean())
        slope, intercept = np.polyfit(xs, ys, 1, w=np.sqrt(totals))
        return float(intercept + slope * at)

    private_rows = np.vstack([world.reference_private, world.target_private])
    public_rows = np.vstack([world.reference_public, world.target_public])
    count = world.reference_private.shape[0]
    observed = float(public_rows[-1].mean()) - predict(private_rows[:-1].mean(axis=1), public_rows[:-1].mean(axis=1), np.ones(count), float(private_rows[-1].mean()))
    differences = np.empty(resamples)
    for draw in range(resamples):
        private = private_rows[:, rng.integers(0, private_rows.shape[1], private_rows.shape[1])].mean(axis=1)
        public = public_rows[:, rng.integers(0, public_rows.shape[1], public_rows.shape[1])].mean(axis=1)
        weights = np.bincount(rng.integers(0, count, count), minlength=count).astype(float)
        differences[draw] = public[-1] - predict(private[:-1], public[:-1], weights, float(private[-1]))
    return observed, float((1 + np.count_nonzero(differences <= 0)) / (resamples + 1)), fallbacks


def _run(case: Case, seed: int, targets: int) -> tuple[int, int, list[float]]:
    """(flagged, warned outside the range (for the spline: fits that fell back to a line), differences) over `targets` worlds."""
    rng = np.random.default_rng(seed)
    flagged = warned = 0
    differences: list[float] = []
    for _ in range(targets):
        world = _world(rng, case)
        if case.fit == "spline":
            difference, p_value, fallbacks = _spline_test(world, rng, case.resamples)
            flagged += difference > 0 and p_value < ALPHA
            warned += fallbacks
            differences.append(difference)
            continue
        link: Link = "probit" if case.fit == "probit" else "logit" if case.fit == "logit" else "identity"
        report = public_inflation_report(
            world.reference_private, world.reference_public, world.target_private, world.target_public,
            reference_models=world.reference_models, model="target", eval_name="private", corpus="public",
            rng=rng, alpha=ALPHA, resamples=case.resamples, link=link,
        )  # fmt: skip
        flagged += report.flagged
        warned += any(warning.code == "outside_reference_range" for warning in report.warnings)
        differences.append(report.difference)
    return flagged, warned, differences


@dataclass(frozen=True)
class Rate:
    case: Case
    targets: int
    flagged: int
    warned: int
    mean_difference: float
    seconds: float

    @property
    def share(self) -> float:
        return self.flagged / self.targets

    def interval(self) -> str:
        low, high = wilson_interval(self.flagged, self.targets)
        return f"[{low:.3f}, {high:.3f}]"


def measure(cases: list[Case], targets: int, *, seed: int, workers: int) -> list[Rate]:
    """The share flagged in each case over `targets` new worlds, the cases' worlds split over `workers` processes."""
    chunks = max(1, workers)
    sizes = [targets // chunks + (1 if part < targets % chunks else 0) for part in range(chunks)]
    seeds = np.random.SeedSequence(seed).spawn(len(cases) * chunks)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [
            [pool.submit(_run, case, int(seeds[index * chunks + part].generate_state(1)[0]), size) for part, size in enumerate(sizes) if size]
            for index, case in enumerate(cases)
        ]
        rates = []
        for case, parts in zip(cases, futures, strict=True):
            results = [future.result() for future in parts]
            differences = [value for _, _, values in results for value in values]
            flagged = sum(result[0] for result in results)
            warned = sum(result[1] for result in results)
            rates.append(Rate(case, targets, flagged, warned, float(np.mean(differences)), time.perf_counter() - started))
    return rates


def _print(title: str, rates: list[Rate], describe: Callable[[Case], str]) -> None:
    print(title)
    for rate in rates:
        share = f"flagged {rate.flagged:>4}/{rate.targets:<5} {rate.share:6.3f} {rate.interval()}"
        print(f"  {describe(rate.case):<46} {share}   mean difference {rate.mean_difference * 100:+5.1f} points")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=1000, help="Simulated targets per side of the requirement (clean, inflated).")
    parser.add_argument("--grid-targets", type=int, default=300, help="Simulated targets per cell of the grid and of the harder cases.")
    parser.add_argument("--spread", type=float, default=0.2, help="Public-only skill of each model (logits) in the harder case.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20241210)
    parser.add_argument("--compare-fits", action="store_true", help="Instead, compare the fits the report could use (slow).")
    parser.add_argument("--compare-targets", type=int, default=300)
    parser.add_argument("--compare-resamples", type=int, default=500)
    args = parser.parse_args()

    started = time.perf_counter()
    if args.compare_fits:
        print(f"alpha {ALPHA}; {args.compare_resamples} bootstrap draws a report; shares with Wilson 95% intervals\n")
        fits = [
            Case(references, 300, inflation, fit=fit, resamples=args.compare_resamples)
            for references in (10, 20) for fit in ("identity", "logit", "probit", "spline") for inflation in (0.0, 0.10)
        ]  # fmt: skip
        rates = measure(fits, args.compare_targets, seed=args.seed + 3, workers=args.workers)
        _print("Fits compared (300 + 300 items)", rates, lambda case: f"{case.fit:<8} {case.references} references, +{case.inflation * 100:.0f} points")
        for rate in rates:
            if rate.case.fit == "spline":
                fits = rate.targets * (rate.case.resamples + 1)
                cell = f"spline, {rate.case.references} references, +{rate.case.inflation * 100:.0f} points"
                print(f"  {cell}: {rate.warned} of {fits} fits fell back to a line ({rate.warned / fits:.1%})")
        print(f"{time.perf_counter() - started:.0f} s")
        return 0
    print(f"alpha {ALPHA}; {BOOTSTRAP_RESAMPLES} bootstrap draws a report; shares with Wilson 95% intervals\n")
    clean, inflated = measure([Case(10, 300, 0.0), Case(10, 300, 0.10)], args.targets, seed=args.seed, workers=args.workers)
    _print("Requirement: 10 reference models, 300 + 300 items", [clean, inflated], lambda case: f"inflation {case.inflation * 100:.0f} points")
    false_ok, power_ok = clean.share <= MAX_FALSE_POSITIVES, inflated.share >= MIN_POWER
    print(f"  false positives {clean.share:.3f} <= {MAX_FALSE_POSITIVES}: {'PASS' if false_ok else 'FAIL'}")
    print(f"  power {inflated.share:.3f} >= {MIN_POWER}: {'PASS' if power_ok else 'FAIL'}\n")

    grid = [Case(references, items, inflation) for references in (5, 10, 20) for items in (100, 300) for inflation in (0.0, 0.05, 0.10)]
    rates = measure(grid, args.grid_targets, seed=args.seed + 1, workers=args.workers)
    _print("Grid", rates, lambda case: f"{case.references:>2} references, {case.items} + {case.items} items, +{case.inflation * 100:.0f} points")

    harder = [Case(10, 300, 0.0, outside=True), Case(10, 300, 0.10, outside=True), Case(10, 300, 0.0, spread=args.spread), Case(10, 300, 0.10, spread=args.spread)]
    rates = measure(harder, args.grid_targets, seed=args.seed + 2, workers=args.workers)
    _print(
        "Harder cases (10 references, 300 + 300 items)",
        rates,
        lambda case: (f"target outside the range, +{case.inflation * 100:.0f} points" if case.outside else f"public-only skill sd {case.spread}, +{case.inflation * 100:.0f}"),
    )
    outside = rates[0]
    print(f"  the report warned outside_reference_range for {outside.warned + rates[1].warned} of {2 * args.grid_targets} targets outside the range\n")

    print(f"{time.perf_counter() - started:.0f} s")
    return 0 if false_ok and power_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
