"""How many curators' rulings a pool the judge was not fitted on needs before the judge's
duplicates reach the target precision there, with the per-source refit of
`curation.dedup.judge.refit`. Prints figures; not a test.

For each training pool of `bench/train_judge.py` in turn (the held-out pool plays the new source):
1. the shipped learner (`model.json`'s) is fitted on the other training pools, as the
   cross-pool validation does, and gives P for every labelled pair of the held-out pool;
2. curators answer questions: rulings are drawn at random, in 30 orders (fixed seeds), from the
   held-out pool's labelled pairs the judge is unsure of or calls the same (P >= `ASKED_FROM`),
   which is where curation asks;
3. after k rulings the source's P is refitted (`refit`); the pairs not ruled on are scored at the
   shipped duplicate threshold: precision, recall and AUC of the refitted P, medians over the orders.

"Rulings needed" is the smallest k whose median precision reaches 0.90 with a recall above 0.
Reads the features `bench/train_judge.py` computed (run it first; `--cached-only` here by default).

    PYTHONPATH=. .venv/bin/python bench/rulings_needed.py
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.train_judge import PRECISION_TARGET, TRAIN_POOLS, Matrix, fit, load_pools, pool_weights
from curation.dedup.judge import MODEL_FILE
from curation.dedup.judge.refit import Ruling, duplicate_threshold, refit
from curation.dedup.pair_features import FEATURES

STEPS = (0, 12, 25, 50, 100, 200)
VARIANTS: dict[str, tuple[str, ...]] = {"log-odds only": (), "log-odds and cosines": ("body_cosine", "title_cosine")}
FLOOR = 0.5
"""A refitted source never merges below this P."""
ORDERS = 30
ASKED_FROM = 0.2
"""Questions come from pairs with the shipped P at or above this (the unsure and the likely same)."""


def _features(row: Matrix) -> dict[str, float]:
    return {name: float(value) for name, value in zip(FEATURES, row, strict=True)}


def main() -> None:
    model = json.loads(MODEL_FILE.read_text())
    learner = "boosting + sigmoid" if model["scorer"]["kind"] == "boosting" else "logistic + sigmoid"
    threshold = float(model["thresholds"]["duplicate"])
    _, (x, y, pool_of, _, _) = load_pools(cached_only=True)
    print(f"learner {learner}; duplicate at P >= {threshold}; questions from P >= {ASKED_FROM}; {ORDERS} orders of rulings per step\n")
    print("| held-out pool | refit on | labelled pairs (same) | asked pairs (same) | rulings | threshold | precision | recall | AUC |")
    print("|---|---|---|---|---|---|---|---|---|")
    needed: dict[tuple[str, str], int | None] = {}
    for pool in TRAIN_POOLS:
        training = np.isin(pool_of, [name for name in TRAIN_POOLS if name != pool])
        held = pool_of == pool
        predict = fit(learner, x[training], y[training], pool_weights(pool_of[training]))
        shipped = predict(x[held])
        rows, labels = x[held], y[held]
        features = [_features(row) for row in rows]
        asked = [index for index in range(len(labels)) if shipped[index] >= ASKED_FROM]
        for variant, inputs in VARIANTS.items():
            needed[pool, variant] = None
            for step in STEPS:
                if step > len(asked) * 0.8:
                    break
                thresholds, precisions, recalls, aucs = [], [], [], []
                for order in range(ORDERS):
                    ruled = random.Random(order).sample(asked, step)
                    rulings = [Ruling(float(shipped[index]), features[index], bool(labels[index])) for index in ruled]
                    source = refit(rulings, inputs=inputs)
                    rest = np.setdiff1d(np.arange(len(labels)), ruled)
                    if source is None:
                        p, cut = shipped[rest], threshold
                    else:
                        p = np.array([source.probability(float(shipped[index]), features[index]) for index in rest])
                        cut = duplicate_threshold(list(p), precision=PRECISION_TARGET, floor=FLOOR)
                    said, truth = p >= cut, labels[rest]
                    thresholds.append(cut)
                    precisions.append(float(truth[said].mean()) if said.any() else float("nan"))
                    recalls.append(float(said[truth == 1].mean()))
                    aucs.append(float(roc_auc_score(truth, p)))
                measured = [value for value in precisions if not np.isnan(value)]
                precision = statistics.median(measured) if measured else None
                recall = statistics.median(recalls)
                shown = "—" if precision is None else f"{precision:.2f}"
                print(
                    f"| {pool} | {variant} | {len(labels)} ({int(labels.sum())}) | {len(asked)} ({int(labels[asked].sum())}) | {step} | "
                    f"{statistics.median(thresholds):.2f} | {shown} | {recall:.2f} | {statistics.median(aucs):.3f} |"
                )
                if needed[pool, variant] is None and precision is not None and precision >= PRECISION_TARGET and recall > 0:
                    needed[pool, variant] = step
    print()
    for (pool, variant), step in needed.items():
        print(f"{pool}, refit on {variant}: {'not reached within ' + str(max(STEPS)) + ' rulings' if step is None else f'{step} rulings'} to reach precision {PRECISION_TARGET}")


if __name__ == "__main__":
    main()
