"""The shipped networks (within-table columns; half of the context stage) load and score, and a broken file fails clearly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.mlp import MeanLogitModel, MLPModel

SHIPPED = Path(ranking.__file__).with_name("within_model.json")


def test_the_shipped_network_is_fitted_on_the_features_the_code_computes() -> None:
    model = ranking.WITHIN_MODEL
    assert model.features == ranking.WITHIN_FEATURES
    assert model.w1.shape == (len(ranking.WITHIN_FEATURES), 32) and np.all(model.scale > 0)
    x = np.random.default_rng(0).normal(size=(50, len(model.features)))
    p = model.prob(x)
    assert p.shape == (50,) and np.all((p > 0) & (p < 1)) and p.std() > 0.01  # not a constant


def test_the_context_stage_averages_its_logistic_model_and_its_shipped_network() -> None:
    model = ranking.CONTEXT_MODEL
    assert isinstance(model, MeanLogitModel)
    linear, net = model.models
    assert linear is ranking.CONTEXT_LINEAR and isinstance(net, MLPModel)
    assert net.features == ranking.CONTEXT_FEATURES + ranking.TABLE_FEATURES
    x = np.random.default_rng(2).normal(size=(40, len(net.features)))
    assert np.allclose(model.logit(x), (linear.logit(x) + net.logit(x)) / 2)
    p = model.prob(x)
    assert np.allclose(p, 1 / (1 + np.exp(-model.logit(x)))) and p.std() > 0.01
    # the network is fitted, not the zeros a placeholder would hold: it disagrees with the linear half
    assert not np.allclose(net.logit(x), linear.logit(x)) and np.abs(net.w1).sum() > 0


def test_a_mean_of_logits_is_extreme_safe() -> None:
    class Const:
        def __init__(self, v: float) -> None:
            self.v = v

        def logit(self, x: np.ndarray) -> np.ndarray:
            return np.full(len(x), self.v)

    x = np.zeros((3, 2))
    assert np.allclose(MeanLogitModel((Const(2.0), Const(-4.0))).logit(x), -1.0)
    p = MeanLogitModel((Const(1e6), Const(1e6))).prob(x)
    assert np.all(np.isfinite(p)) and np.all(p > 0.999)


def test_a_network_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(ranking.WITHIN_MODEL.to_json()), encoding="utf-8")
    again = MLPModel.load(path, ranking.WITHIN_FEATURES)
    x = np.random.default_rng(1).normal(size=(20, len(again.features)))
    assert np.allclose(again.prob(x), ranking.WITHIN_MODEL.prob(x))


def _write(tmp_path: Path, **changes: object) -> Path:
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_missing_or_broken_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(RetrievalError, match="nowhere.json cannot be read"):
        MLPModel.load(tmp_path / "nowhere.json", ranking.WITHIN_FEATURES)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(RetrievalError, match="bad.json cannot be read"):
        MLPModel.load(bad, ranking.WITHIN_FEATURES)
    with pytest.raises(RetrievalError, match="cannot be read"):
        MLPModel.load(_write(tmp_path, b2="high"), ranking.WITHIN_FEATURES)
    with pytest.raises(RetrievalError, match=r"malformed \(w2\)"):
        MLPModel.load(_write(tmp_path, w2=None), ranking.WITHIN_FEATURES)


def test_a_file_fitted_on_other_features_asks_for_a_refit(tmp_path: Path) -> None:
    path = _write(tmp_path, features=list(ranking.WITHIN_FEATURES[:-1]) + ["something_else"])
    with pytest.raises(RetrievalError, match="other features.*fit_ranking_weights"):
        MLPModel.load(path, ranking.WITHIN_FEATURES)


def test_a_file_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    with pytest.raises(RetrievalError, match="malformed.*w1"):
        MLPModel.load(_write(tmp_path, w1=[row[:-1] for row in data["w1"]]), ranking.WITHIN_FEATURES)
    with pytest.raises(RetrievalError, match="malformed.*scale"):
        MLPModel.load(_write(tmp_path, scale=[0.0] * len(data["scale"])), ranking.WITHIN_FEATURES)
