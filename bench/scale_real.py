"""The common scale (`curation.scale`) on real per-item results of public models: LiveCodeBench's
code-generation results (`bench/data/per_item_results/`, 72 models on 1,055 dated problems, scores
pass@1 in [0, 1]) cut into monthly pseudo-releases by problem date, a "run" being one model on one
month's problems. Prints figures; not a test.

What is known here is what was observed, so the checks predict observations the fit did not see:

- held-out cells: 10% of the (run, problem) scores held out at random; the log-likelihood per cell
  of the scale against per-release means (each run's mean on the rest of its month);
- held-out releases (equating): for each model with results on 4 months or more, one of its months
  held out entirely at a time (its other months kept); the scale's equated score of the model on
  that month (its ability from the other months, the month's problems placed by the other models)
  against the model's observed mean there, beside the naive guess (its mean over its other months);
  mean absolute error in points, and how often the 95% interval holds the observed mean: the
  interval of the expected score, and the predictive interval, which adds the month's sampling
  (an observed mean over a few dozen problems varies around its expectation);
- ability against the models' mean score on the 400 problems every model was scored on (Spearman).

Usage: .venv/bin/python bench/scale_real.py [--holdouts 40] [--draws 200]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from curation.scale.equating import equated_score
from curation.scale.irt import Responses, fit_scale, laplace_draws, log_likelihood

DATA = Path(__file__).resolve().parent / "data" / "per_item_results" / "livecodebench_codegen.csv.gz"
SHARED_PROBLEMS = 400


def load() -> list[tuple[str, int, str, float]]:
    """(model, problem number, month, score) rows; problems are numbered by date, then id."""
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        raw = [(row["model"], row["item_id"], row["item_date"], float(row["score"])) for row in csv.DictReader(handle)]
    number = {key: index for index, key in enumerate(sorted({(date, item) for _, item, date, _ in raw}))}
    return [(model, number[(date, item)], date[:7], score) for model, item, date, score in raw]


def responses_of(rows: list[tuple[str, int, str, float]]) -> tuple[Responses, dict[int, tuple[str, str]], dict[str, list[int]]]:
    """The responses with one run per (model, month), each problem's cohort its month; the run ids'
    (model, month), and each month's problem ids."""
    months = sorted({month for _, _, month, _ in rows})
    month_index = {month: index for index, month in enumerate(months)}
    run_of: dict[tuple[str, str], int] = {}
    for model, _, month, _ in rows:
        run_of.setdefault((model, month), len(run_of))
    cohort = {item: month_index[month] for _, item, month, _ in rows}
    responses = Responses.of([(run_of[(model, month)], model, item, score) for model, item, month, score in rows], cohort_of=cohort)
    problems: dict[str, list[int]] = defaultdict(list)
    for item, index in cohort.items():
        problems[months[index]].append(item)
    return responses, {run: key for key, run in run_of.items()}, dict(problems)


def held_out_cells(rows: list[tuple[str, int, str, float]], rng: np.random.Generator) -> tuple[float, float]:
    responses, _, _ = responses_of(rows)
    held = rng.random(len(responses.score)) < 0.1
    kept = responses.observations(~held)
    mode = fit_scale(kept)
    count = int(held.sum())
    scale = log_likelihood(mode, responses.run[held], responses.item[held], responses.score[held]) / count
    sums = np.bincount(kept.run, weights=kept.score, minlength=responses.runs)
    counts = np.bincount(kept.run, minlength=responses.runs)
    means = np.clip((sums + 0.5) / (counts + 1.0), 1e-9, 1 - 1e-9)[responses.run[held]]
    observed = responses.score[held]
    baseline = float(np.sum(observed * np.log(means) + (1 - observed) * np.log(1 - means))) / count
    return scale, baseline


def held_out_releases(rows: list[tuple[str, int, str, float]], rng: np.random.Generator, holdouts: int, draws: int) -> list[tuple[float, float, float, bool, bool]]:
    """Per held-out (model, month): observed mean, equated score, naive guess (points), whether the
    equated score's interval holds the observed mean, and whether the predictive interval does."""
    months_of: dict[str, set[str]] = defaultdict(set)
    for model, _, month, _ in rows:
        months_of[model].add(month)
    candidates = [(model, month) for model, months in sorted(months_of.items()) if len(months) >= 4 for month in sorted(months)]
    chosen = [candidates[index] for index in rng.choice(len(candidates), size=min(holdouts, len(candidates)), replace=False)]
    found = []
    for model, month in chosen:
        kept = [row for row in rows if not (row[0] == model and row[2] == month)]
        observed = float(np.mean([score for name, _, at, score in rows if name == model and at == month])) * 100
        naive = float(np.mean([score for name, _, at, score in kept if name == model])) * 100
        responses, runs, problems = responses_of(kept)
        mode = fit_scale(responses)
        sampled = laplace_draws(responses, mode, draws=draws, rng=rng)
        position = {item: index for index, item in enumerate(responses.item_ids)}
        items = np.array([position[item] for item in problems.get(month, []) if item in position], dtype=np.int64)
        run = next(index for index, run_id in enumerate(responses.run_ids) if runs[run_id][0] == model)
        # The model's ability: a run of it on another month carries it (its deviation is small).
        equated = equated_score(mode, sampled, run, items).points()
        # What an observed mean would be: each draw's expected scores, then 0/1 outcomes drawn from
        # them (a month has 12 to 68 problems: its mean varies around the expected score).
        predicted = [float(np.mean(rng.random(len(items)) < draw.expected(np.full(len(items), run), items))) * 100 for draw in sampled]
        low, high = np.quantile(predicted, [0.025, 0.975])
        found.append((observed, equated.value, naive, equated.low <= observed <= equated.high, bool(low <= observed <= high)))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holdouts", type=int, default=40, help="(model, month) pairs held out in turn")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    rows = load()
    rng = np.random.default_rng(7)
    responses, _, problems = responses_of(rows)
    print(f"LiveCodeBench code generation: {responses.models} models, {responses.items} problems, {len(problems)} months, {responses.runs} (model, month) runs, {len(rows)} scores")
    started = time.perf_counter()
    mode = fit_scale(responses)
    print(f"fit: {time.perf_counter() - started:.1f} s, converged {mode.converged}")
    shared = sorted({item for _, item, _, _ in rows})[:SHARED_PROBLEMS]
    shared_set = set(shared)
    means = defaultdict(list)
    for model, item, _, score in rows:
        if item in shared_set:
            means[model].append(score)
    names = list(responses.model_names)
    rho = spearmanr([mode.model_ability[index] for index in range(len(names))], [np.mean(means[name]) for name in names]).statistic
    print(f"ability vs mean score on the {SHARED_PROBLEMS} problems every model was scored on: Spearman {rho:.3f}")
    scale, baseline = held_out_cells(rows, rng)
    print(f"held-out cells (10%): log-likelihood per cell, scale {scale:.4f} vs per-release means {baseline:.4f}")
    found = held_out_releases(rows, rng, args.holdouts, args.draws)
    equated = np.mean([entry[0] - entry[1] for entry in found])
    error = np.mean([abs(entry[0] - entry[1]) for entry in found])
    naive = np.mean([abs(entry[0] - entry[2]) for entry in found])
    covered, predicted = np.mean([entry[3] for entry in found]), np.mean([entry[4] for entry in found])
    print(f"held-out months ({len(found)} (model, month) pairs): equated score MAE {error:.2f} points (mean signed {equated:+.2f}) vs naive {naive:.2f}")
    print(f"  the expected score's 95% interval holds the observed mean {covered:.0%}; the predictive 95% interval (with the month's sampling) {predicted:.0%}")


if __name__ == "__main__":
    main()
