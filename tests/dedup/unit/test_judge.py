"""The shipped same-incident judge (`curation/dedup/judge/model.json`): it loads, it refuses a model
fitted on other features, and it orders known pairs of Hadoop reports (GitBugs, CC BY 4.0; Patil,
arXiv:2504.09651) as a reader labelled them. Cosines are all-MiniLM-L6-v2's, measured on the
reports' full texts by bench/train_judge.py; only the start of each text is kept here."""

from __future__ import annotations

import json
import math
from datetime import datetime

import numpy as np
import pytest

from curation.dedup.judge import MODEL_FILE, MODEL_FORMAT, Outcome, SameIncidentJudge, Thresholds
from curation.dedup.pair_features import FEATURES, FEATURES_VERSION, PairScores, PairText, feature_vector, pair_features

YETUS = "Disable JIRA plugin for YETUS on Hadoop"
YETUS_BODY = (
    f"{YETUS}\n\nI've been noticing an issue with Jenkins CI where a file jira-json goes missing all of a sudden – "
    "jenkins / hadoop-multibranch / PR-3588 / #2 (apache.org)\n{code}\n[2021-10-27T17:52:58.787Z] Processing: https://github.com/apache/hadoop/pull/3588"
)
CHECK_STATE = "implement non-guava Precondition checkState"
CHECK_ARGUMENT = "implement non-guava Precondition checkArgument"


def _body(title: str, method: str) -> str:
    return (
        f"{title}\n\nAs part In order to replace Guava Preconditions, we need to implement our own versions of the API.\n"
        f" This Jira is to add the implementation {{{{{method}}}}} to the existing class {{{{org.apache.hadoop.util.Preconditions}}}}"
    )


def _pair(a: PairText, b: PairText, body: float, title: float) -> dict[str, float]:
    return pair_features(a, b, PairScores(body_cosine=body, title_cosine=title, unreadable_a=(0.0, 0.0), unreadable_b=(0.0, 0.0)))


@pytest.fixture(scope="module")
def judge() -> SameIncidentJudge:
    return SameIncidentJudge.load()


def test_the_shipped_model_loads_with_its_thresholds(judge: SameIncidentJudge) -> None:
    assert 0 <= judge.thresholds.distinct <= judge.thresholds.duplicate <= 1
    assert judge.model["features"] == list(FEATURES)
    assert judge.model["format"] == MODEL_FORMAT


def test_a_format_1_logistic_model_still_loads() -> None:
    width = len(FEATURES)
    model = {
        "format": "goldenset-judge/1",
        "features_version": FEATURES_VERSION,
        "features": list(FEATURES),
        "impute": [0.0] * width,
        "mean": [0.0] * width,
        "scale": [1.0] * width,
        "coef": [1.0] + [0.0] * (width - 1),  # body_cosine only
        "intercept": 0.0,
        "calibration": {"method": "sigmoid", "a": -1.0, "b": 0.0},
        "thresholds": {"duplicate": 0.9, "distinct": 0.1},
    }
    judge = SameIncidentJudge(model)
    row = [0.0] * width
    assert judge.kind == "logistic"
    assert judge.probability(row) == pytest.approx(0.5)
    row[0] = 2.0
    assert judge.probability(row) == pytest.approx(1.0 / (1.0 + math.exp(-2.0)))


def test_an_identical_refiling_is_judged_more_likely_the_same_than_sibling_subtasks(judge: SameIncidentJudge) -> None:
    refiled = _pair(PairText(YETUS, YETUS_BODY, datetime(2021, 11, 2)), PairText(YETUS, YETUS_BODY, datetime(2021, 10, 29)), 1.0, 1.0)
    siblings = _pair(
        PairText(CHECK_STATE, _body(CHECK_STATE, "checkState"), datetime(2021, 9, 22, 17, 52)),
        PairText(CHECK_ARGUMENT, _body(CHECK_ARGUMENT, "checkArgument"), datetime(2021, 9, 22, 17, 49)),
        0.9696,
        0.8597,
    )
    assert siblings["conflict_name"] == 1.0  # checkState vs checkArgument: a feature now, not a veto
    same, related = judge.probability(refiled), judge.probability(siblings)
    assert same > related
    # Only a probability is checked here: the shipped thresholds are not yet fit to decide (an exact
    # copy is merged by the exact stage before any judge; see the data card).
    assert judge.outcome(related) is not Outcome.DUPLICATE


def test_unrelated_texts_are_distinct(judge: SameIncidentJudge) -> None:
    features = _pair(
        PairText("", "Quake hits northern Japan, no tsunami warning"),
        PairText("", "Central bank holds interest rates steady"),
        0.05,
        0.05,
    )
    assert judge.outcome(judge.probability(features)) is Outcome.DISTINCT


def test_a_vector_and_a_mapping_score_alike_and_missing_features_are_refused(judge: SameIncidentJudge) -> None:
    features = _pair(PairText("a title", "a title\n\nsome body text"), PairText("another title", "another title\n\nother words"), 0.4, 0.3)
    assert judge.probability(features) == pytest.approx(judge.probability(feature_vector(features)))
    features["time_gap_log_days"] = math.nan  # unknown dates are allowed
    assert 0.0 <= judge.probability(features) <= 1.0
    del features["jaccard"]
    with pytest.raises(KeyError, match="jaccard"):
        judge.probability(features)
    with pytest.raises(ValueError, match="features per pair"):
        judge.probability([0.5, 0.5])


def test_a_model_fitted_on_other_features_is_refused() -> None:
    model = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    model["features_version"] = "f0"
    with pytest.raises(ValueError, match="train_judge"):
        SameIncidentJudge(model)


def test_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="distinct <= duplicate"):
        Thresholds(duplicate=0.2, distinct=0.8)


def test_pair_features_are_symmetric_and_named_in_order() -> None:
    a = PairText("Upgrade Jetty to 9.4.44", "Upgrade Jetty to 9.4.44", datetime(2021, 1, 1), {"priority": "Major"})
    b = PairText("Upgrade Jetty to 9.4.39", "Upgrade Jetty to 9.4.39", datetime(2021, 3, 1), {"priority": "Minor"})
    ab, ba = _pair(a, b, 0.95, 0.97), _pair(b, a, 0.95, 0.97)
    assert list(ab) == list(FEATURES)
    assert ab == ba
    assert ab["same_normalised_text"] == 1.0  # numbers are masked by normalisation ...
    assert ab["conflict_version"] == 1.0  # ... and the version conflict says what masking hid
    assert ab["fields_same"] == 0.0
    assert ab["time_gap_log_days"] == pytest.approx(math.log1p(59))


def test_boosted_trees_exported_to_json_score_as_scikit_learn_does() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    from curation.dedup.judge import Trees, export_trees

    generator = np.random.default_rng(7)
    x = generator.normal(size=(600, len(FEATURES)))
    x[generator.random(x.shape) < 0.1] = np.nan  # unknown values take each split's learned side
    y = ((np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 3]) * 0.5 + generator.normal(scale=0.5, size=600)) > 0).astype(int)
    boosted = HistGradientBoostingClassifier(max_iter=40, max_leaf_nodes=15, random_state=7).fit(x, y)
    exported = json.loads(json.dumps(export_trees(boosted)))  # through JSON, as model.json holds it
    rows = generator.normal(size=(500, len(FEATURES)))
    rows[generator.random(rows.shape) < 0.1] = np.nan
    ours = 1.0 / (1.0 + np.exp(-Trees(exported).scores(rows)))
    assert np.max(np.abs(ours - boosted.predict_proba(rows)[:, 1])) < 1e-9
