"""A calibrated same-incident judge: P(two records are one incident) from a pair's features
(`curation.dedup.pair_features`), and the three outcomes it supports: duplicate above a high P,
distinct below a low P, and "ask a curator" in between.

The model is a plain JSON file (`model.json` beside this module, written by
`bench/train_judge.py`), format `goldenset-judge/2`: a scorer that turns a pair's features into
log-odds, then a calibration map (Platt's sigmoid or isotonic), plus the two thresholds and the
figures it was chosen by. The scorer is either a logistic regression over standardised features
(missing values replaced by the training medians) or gradient-boosted trees (scikit-learn's
HistGradientBoosting, exported node by node: feature, threshold, children, leaf values and where
a missing value goes). Format `goldenset-judge/1` files (logistic only) still load. Nothing is
unpickled; scoring a pair is a dot product or a walk down each tree plus an interpolation
(microseconds), so it can be called per candidate pair during curation. Curation asks a
curator with it (`curation.dedup.questions`) where it disagrees with the rules, which still decide
duplicates (see DATA_CARD.md); curators' answers refit it per source (`refit`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from curation.dedup.pair_features import FEATURES, FEATURES_VERSION

MODEL_FILE = Path(__file__).with_name("model.json")
MODEL_FORMAT = "goldenset-judge/2"
READABLE_FORMATS = ("goldenset-judge/1", MODEL_FORMAT)


class Outcome(StrEnum):
    DUPLICATE = "duplicate"
    DISTINCT = "distinct"
    ASK = "ask a curator"


@dataclass(frozen=True)
class Thresholds:
    """P at or above `duplicate` is a duplicate, below `distinct` distinct, in between a curator's call."""

    duplicate: float
    distinct: float

    def __post_init__(self) -> None:
        if not 0 <= self.distinct <= self.duplicate <= 1:
            raise ValueError(f"thresholds must satisfy 0 <= distinct <= duplicate <= 1, got distinct {self.distinct}, duplicate {self.duplicate}")


class Trees:
    """Gradient-boosted trees as exported by `bench/train_judge.py`: each tree holds parallel node
    arrays (`feature`, `threshold`, `left`, `right`, `leaf`, `value`, `missing_left`); a row goes
    left where its value is at most the threshold (a missing value goes where `missing_left` says),
    and its log-odds are `baseline` plus the leaf value it reaches in every tree."""

    def __init__(self, model: Mapping[str, Any]) -> None:
        self.baseline = float(model["baseline"])
        self.missing = float(model["missing"]) if model.get("missing") is not None else None
        trees = model["trees"]
        width = max((len(tree["leaf"]) for tree in trees), default=1)
        # All trees side by side, padded to one width (a padding node is a leaf worth 0), so a walk
        # moves every row down every tree at once: one step per level, not one per node.
        self._feature = np.zeros((len(trees), width), dtype=np.intp)
        self._threshold = np.zeros((len(trees), width))
        self._left = np.zeros((len(trees), width), dtype=np.intp)
        self._right = np.zeros((len(trees), width), dtype=np.intp)
        self._leaf = np.ones((len(trees), width), dtype=bool)
        self._value = np.zeros((len(trees), width))
        self._missing_left = np.zeros((len(trees), width), dtype=bool)
        for row, tree in enumerate(trees):
            size = len(tree["leaf"])
            self._feature[row, :size] = tree["feature"]
            self._threshold[row, :size] = tree["threshold"]
            self._left[row, :size] = tree["left"]
            self._right[row, :size] = tree["right"]
            self._leaf[row, :size] = tree["leaf"]
            self._value[row, :size] = tree["value"]
            self._missing_left[row, :size] = tree["missing_left"]
        self._trees = np.arange(len(trees))
        self._depth = width

    def scores(self, matrix: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.missing is not None:
            matrix = np.where(np.isnan(matrix), self.missing, matrix)
        node = np.zeros((len(matrix), len(self._trees)), dtype=np.intp)  # each row's node in each tree
        trees = np.broadcast_to(self._trees, node.shape)
        rows = np.arange(len(matrix))[:, None]
        for _ in range(self._depth):
            inner = ~self._leaf[trees, node]
            if not inner.any():
                break
            x = matrix[rows, self._feature[trees, node]]
            go_left = np.where(np.isnan(x), self._missing_left[trees, node], x <= self._threshold[trees, node])
            node = np.where(inner, np.where(go_left, self._left[trees, node], self._right[trees, node]), node)
        return np.asarray(self.baseline + self._value[trees, node].sum(axis=1), dtype=np.float64)


def export_trees(boosted: Any, *, missing: float | None = None) -> dict[str, Any]:
    """A fitted binary scikit-learn `HistGradientBoostingClassifier`'s trees as the plain arrays
    `Trees` scores (its log-odds: the baseline plus one leaf value a tree). `missing`: the value
    unknowns were replaced by before the fit (None: they were left NaN)."""
    if boosted.n_trees_per_iteration_ != 1:
        raise ValueError("only a binary classifier's trees can be exported")
    trees = []
    for (predictor,) in boosted._predictors:
        nodes = predictor.nodes
        if nodes["is_categorical"].any():
            raise ValueError("categorical splits are not exported")
        trees.append(
            {
                "feature": nodes["feature_idx"].tolist(),
                "threshold": nodes["num_threshold"].tolist(),
                "left": nodes["left"].tolist(),
                "right": nodes["right"].tolist(),
                "leaf": nodes["is_leaf"].astype(bool).tolist(),
                "value": nodes["value"].tolist(),
                "missing_left": nodes["missing_go_to_left"].astype(bool).tolist(),
            }
        )
    return {"kind": "boosting", "baseline": float(np.ravel(boosted._baseline_prediction)[0]), "missing": missing, "trees": trees}


class SameIncidentJudge:
    """The judge a model file describes (`load`). `probability` and `outcome` take the features of
    one pair, by name (a mapping, as `pair_features` returns) or as a vector in `FEATURES` order."""

    def __init__(self, model: Mapping[str, Any]) -> None:
        if model.get("format") not in READABLE_FORMATS:
            raise ValueError(f"not a judge model of format {MODEL_FORMAT}: {model.get('format')!r}; rebuild it with bench/train_judge.py")
        if model.get("features_version") != FEATURES_VERSION or tuple(model.get("features", ())) != FEATURES:
            raise ValueError(
                f"the model was fitted on features {model.get('features_version')!r} and this code computes {FEATURES_VERSION!r}: rebuild it with bench/train_judge.py"
            )
        self.model = dict(model)
        # Format 1 held the logistic scorer's arrays at the top level.
        scorer = model["scorer"] if model["format"] == MODEL_FORMAT else {"kind": "logistic", **model}
        self.kind = scorer["kind"]
        self._trees: Trees | None = None
        if self.kind == "logistic":
            self._medians = np.asarray(scorer["impute"], dtype=np.float64)
            self._mean = np.asarray(scorer["mean"], dtype=np.float64)
            self._scale = np.asarray(scorer["scale"], dtype=np.float64)
            self._coef = np.asarray(scorer["coef"], dtype=np.float64)
            self._intercept = float(scorer["intercept"])
        elif self.kind == "boosting":
            self._trees = Trees(scorer)
        else:
            raise ValueError(f"unknown scorer {self.kind!r}: expected logistic or boosting")
        calibration = model["calibration"]
        self._method = calibration["method"]
        if self._method == "isotonic":
            self._x = np.asarray(calibration["x"], dtype=np.float64)
            self._y = np.asarray(calibration["y"], dtype=np.float64)
        elif self._method == "sigmoid":
            self._a, self._b = float(calibration["a"]), float(calibration["b"])
        else:
            raise ValueError(f"unknown calibration {self._method!r}: expected isotonic or sigmoid")
        self.thresholds = Thresholds(**model["thresholds"])

    @classmethod
    def load(cls, path: str | Path | None = None) -> SameIncidentJudge:
        """The judge in `path` (default: the shipped `model.json`)."""
        return cls(json.loads(Path(path or MODEL_FILE).read_text(encoding="utf-8")))

    def _matrix(self, features: Mapping[str, float] | Sequence[float] | NDArray[np.float64]) -> NDArray[np.float64]:
        if isinstance(features, Mapping):
            missing = [name for name in FEATURES if name not in features]
            if missing:
                raise KeyError(f"features missing: {', '.join(missing)}")
            features = [float(features[name]) for name in FEATURES]
        matrix = np.atleast_2d(np.asarray(features, dtype=np.float64))
        if matrix.shape[1] != len(FEATURES):
            raise ValueError(f"expected {len(FEATURES)} features per pair ({', '.join(FEATURES)}), got {matrix.shape[1]}")
        return matrix

    def _standardised(self, matrix: NDArray[np.float64]) -> NDArray[np.float64]:
        filled = np.where(np.isnan(matrix), self._medians, matrix)
        return (filled - self._mean) / self._scale

    def scores(self, matrix: NDArray[np.float64]) -> NDArray[np.float64]:
        """The uncalibrated decision values (log-odds) of pairs, one row of features each."""
        rows = self._matrix(matrix)
        if self._trees is not None:
            return self._trees.scores(rows)
        return np.asarray(self._standardised(rows) @ self._coef + self._intercept, dtype=np.float64)

    def probabilities(self, matrix: NDArray[np.float64] | Sequence[Sequence[float]]) -> NDArray[np.float64]:
        """P(same incident) of pairs, one row of features (in `FEATURES` order) each."""
        scores = self.scores(np.asarray(matrix, dtype=np.float64))
        if self._method == "isotonic":
            return np.asarray(np.interp(scores, self._x, self._y), dtype=np.float64)
        return np.asarray(1.0 / (1.0 + np.exp(self._a * scores + self._b)), dtype=np.float64)

    def probability(self, features: Mapping[str, float] | Sequence[float]) -> float:
        """P(same incident) of one pair."""
        return float(self.probabilities(self._matrix(features))[0])

    def outcome(self, probability: float) -> Outcome:
        """The decision a probability stands for under the model's thresholds."""
        if math.isnan(probability):
            raise ValueError("probability is NaN")
        if probability >= self.thresholds.duplicate:
            return Outcome.DUPLICATE
        if probability < self.thresholds.distinct:
            return Outcome.DISTINCT
        return Outcome.ASK

    def contributions(self, features: Mapping[str, float] | Sequence[float], *, top: int = 5) -> dict[str, float]:
        """The features that moved this pair's log-odds most, by name, with their signed share
        of it (coefficient times standardised value): what a curator is shown as "why". Only a
        logistic scorer splits its log-odds by feature; trees give an empty mapping."""
        if self._trees is not None:
            return {}
        values = self._standardised(self._matrix(features))[0] * self._coef
        order = np.argsort(-np.abs(values))[:top]
        return {FEATURES[index]: round(float(values[index]), 3) for index in order}
