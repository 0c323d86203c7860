"""The confidence calibration (nl2sql_assets/retrieval/confidence.py)."""

from __future__ import annotations

import math

import numpy as np

from nl2sql_assets.retrieval import confidence as C
from nl2sql_assets.retrieval.models import RankedDatasource, RetrievalResult
from nl2sql_assets.retrieval.ranking import CONFIDENCE_MODEL, DenseScores


def _dense(best: float) -> DenseScores:
    return DenseScores(tables=np.full((1, 4), best - 0.2), columns=np.array([[best, 0.1, 0.1, 0.1, 0.1]]),
                       entities=np.zeros((0, 5)))


def test_features_in_their_documented_order() -> None:
    ranked = [RankedDatasource(id="a", score=1.5), RankedDatasource(id="b", score=1.2)]
    x = C.confidence_features(np.array([0.8, 0.5, 0.1]), [0, 1], 0.7, ranked)
    assert len(x) == len(C.CONFIDENCE_FEATURES) == len(CONFIDENCE_MODEL.weights)
    assert math.isclose(x[0], math.log(0.8 / 0.2))
    assert math.isclose(x[1], math.log(0.9))            # only the unselected table can be missed
    assert x[2] == 0.7 and x[3] == 1.0 and math.isclose(x[4], 0.3)


def test_scoped_question_has_no_routing_features_and_margin_is_capped() -> None:
    assert list(C.confidence_features(np.array([0.5]), [0], 0.5, [RankedDatasource(id="a", score=1.0)])[3:]) == [0, 0]
    far = [RankedDatasource(id="a", score=5.0), RankedDatasource(id="b", score=0.0)]
    assert C.confidence_features(np.array([0.5]), [0], 0.5, far)[4] == 1.0


def test_many_missed_tables_are_floored_and_extremes_stay_finite() -> None:
    x = C.confidence_features(np.full(500, 1.0), [], 1.0, [])
    assert x[1] == -10.0 and np.isfinite(x).all()
    assert C.calibrate(np.array([1e9]), (1.0,), 0.0) == 1.0
    assert C.calibrate(np.array([-1e9]), (1.0,), 0.0) == 0.0


def test_calibrate_is_the_logistic_of_the_linear_score() -> None:
    assert C.calibrate(np.array([1.0, 2.0]), (0.5, 0.25), -1.0) == 0.5
    assert C.calibrate(np.array([2.0]), (1.0,), 0.0) == round(1 / (1 + math.exp(-2)), 4)


def test_estimate_is_a_probability_and_rises_with_evidence() -> None:
    ranked = [RankedDatasource(id="a", score=1.0)]
    weak = C.estimate(np.array([0.02, 0.01, 0.01, 0.01]), [0], _dense(0.2), ranked)
    strong = C.estimate(np.array([0.95, 0.6, 0.01, 0.01]), [0, 1], _dense(0.8), ranked)
    assert 0.0 <= weak < C.LOW_CONFIDENCE < strong <= 1.0


def test_best_similarity_ignores_empty_matrices() -> None:
    assert C.best_similarity(np.zeros((0, 3)), np.array([[0.1, 0.4]])) == 0.4
    assert C.best_similarity(np.zeros((0, 3))) == 0.0


def test_warning_only_below_the_threshold() -> None:
    assert C.with_warning(["x"], C.LOW_CONFIDENCE) == ["x"]
    warned = C.with_warning([], 0.07)
    assert warned == ["low confidence (0.07): the schema may not hold what the question asks; "
                      "ask the user before writing SQL"]


def test_fallback_confidences_are_documented_values() -> None:
    assert C.FALLBACK_CONFIDENCE["no_candidates"] < C.LOW_CONFIDENCE
    assert C.FALLBACK_CONFIDENCE["small_schema"] >= C.LOW_CONFIDENCE
    assert C.FALLBACK_CONFIDENCE["vector_store_unavailable"] >= C.LOW_CONFIDENCE


def test_result_serializes_confidence_after_fallback() -> None:
    data = RetrievalResult(question="q", confidence=0.42).to_json_dict()
    keys = list(data)
    assert data["confidence"] == 0.42 and keys.index("confidence") == keys.index("fallback") + 1
