"""Simulated rolling evals with known truth, for the common scale's recovery tests and benchmark:
monthly releases whose items roll (a share carried from the previous release, the rest new), models
that run on one or several consecutive releases, 0/1 scores drawn from a two-parameter logistic
model with true abilities, difficulties and discriminations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curation.scale.irt import FloatArray, IntArray, Responses


@dataclass(frozen=True)
class World:
    """The truth and what was observed: `release_items[r]` are the item numbers of release `r`;
    `runs` are (model number, release) pairs, run `k` scoring every item of its release."""

    ability: FloatArray
    difficulty: FloatArray
    discrimination: FloatArray
    release_items: list[IntArray]
    runs: list[tuple[int, int]]
    responses: Responses

    def true_expected(self, model: int, release: int) -> float:
        """The true expected score of `model` on `release`'s items."""
        items = self.release_items[release]
        return float(np.mean(1 / (1 + np.exp(-self.discrimination[items] * (self.ability[model] - self.difficulty[items])))))

    def fitted_items(self, release: int) -> IntArray:
        """`release`'s items as indices of the fit (`Responses.item_ids` hold the item numbers)."""
        index = {item_id: position for position, item_id in enumerate(self.responses.item_ids)}
        return np.array([index[item] for item in self.release_items[release] if item in index], dtype=np.int64)


def rolling_world(
    rng: np.random.Generator,
    *,
    releases: int = 12,
    items_per_release: int = 100,
    carried: float = 0.4,
    models: int = 15,
    max_span: int = 4,
    shift: tuple[int, float] | None = None,
    graded: bool = False,
    pinned: tuple[tuple[int, int], ...] = (),
) -> World:
    """A simulated eval: `releases` releases of `items_per_release` items, `carried` of each
    release's items taken from the previous release's; `models` models, each running on 1 to
    `max_span` consecutive releases (at least two models on every release). `shift` (release,
    logits): every new item of that release is that much harder. `graded`: scores in [0, 1] (a
    Beta draw around the expected score) instead of 0/1. `pinned`: more models, one per (first,
    last) span, running on exactly those releases (numbered after the others)."""
    ability = rng.normal(0, 1, models + len(pinned))
    difficulty_list: list[float] = []
    release_items: list[IntArray] = []
    previous: list[int] = []
    for release in range(releases):
        keep = [int(item) for item in rng.choice(previous, size=round(carried * items_per_release), replace=False)] if previous else []
        fresh = items_per_release - len(keep)
        start = len(difficulty_list)
        extra = shift[1] if shift is not None and shift[0] == release else 0.0
        difficulty_list.extend(rng.normal(0, 1, fresh) + extra)
        items = sorted(keep + list(range(start, start + fresh)))
        release_items.append(np.array(items, dtype=np.int64))
        previous = items
    difficulty = np.array(difficulty_list)
    discrimination = np.exp(rng.normal(0, 0.3, len(difficulty)))
    runs: list[tuple[int, int]] = []
    for model in range(models):
        span = int(rng.integers(1, min(max_span, releases) + 1))
        first = int(rng.integers(0, releases - span + 1))
        runs.extend((model, release) for release in range(first, first + span))
    for offset, (first, last) in enumerate(pinned):
        runs.extend((models + offset, release) for release in range(first, last + 1))
    for release in range(releases):
        present = {model for model, at in runs if at == release}
        missing = rng.choice([model for model in range(models) if model not in present], size=max(0, 2 - len(present)), replace=False)
        runs.extend((int(model), release) for model in missing)
    rows: list[tuple[int, str, int, float]] = []
    for run_id, (model, release) in enumerate(runs):
        served = release_items[release]
        expected = 1 / (1 + np.exp(-discrimination[served] * (ability[model] - difficulty[served])))
        scores = rng.beta(np.maximum(expected * 8, 1e-3), np.maximum((1 - expected) * 8, 1e-3)) if graded else (rng.random(len(served)) < expected).astype(float)
        rows.extend((run_id, f"model-{model:02d}", int(item), float(score)) for item, score in zip(served, scores, strict=True))
    introduced: dict[int, int] = {}
    for release, served in enumerate(release_items):
        for item in served:
            introduced.setdefault(int(item), release)
    return World(ability, difficulty, discrimination, release_items, runs, Responses.of(rows, cohort_of=introduced))
