"""A one-hidden-layer network (the within-table column model; half of the table context model), loaded from JSON.

The linear within-table model had stopped gaining from more training data (3,000 or 9,000
questions per fold gave the same held-out figures): which column of a table the question needs
depends on combinations of its evidence (for example how well the question means a column's name
together with how that column ranks in its own table), which a sum of weights cannot express. A
small network over the same features can, and costs microseconds per question. It is fitted by
``benchmarks/fit_ranking_weights.py`` (held out by ``benchmarks/heldout.py``) and shipped as data.

Which tables a question needs is scored by the mean of a logistic model's and such a network's
logits (:class:`MeanLogitModel`): held out, the network alone ranked Spider's tables better and
BIRD's worse than the logistic model; their mean ranked Spider's and BIRD's (without evidence)
better than either, and BIRD's with evidence within 0.6 point of the logistic model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from nl2sql_assets.errors import RetrievalError


def sigmoid(logit: np.ndarray) -> np.ndarray:
    """The probability for log-odds, clipped so that extreme logits neither overflow nor reach 0 or 1."""
    return 1.0 / (1.0 + np.exp(-np.clip(logit, -30, 30)))


@dataclass(frozen=True)
class MLPModel:
    """``sigmoid(relu(((x - mean) / scale) @ w1 + b1) @ w2 + b2)`` over named features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        hidden = np.maximum(((x - self.mean) / self.scale) @ self.w1 + self.b1, 0.0)
        return hidden @ self.w2 + self.b2

    def prob(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.logit(x))

    def to_json(self) -> dict[str, object]:
        return {"features": list(self.features), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "w1": self.w1.tolist(), "b1": self.b1.tolist(), "w2": self.w2.tolist(), "b2": self.b2}

    @classmethod
    def load(cls, path: Path, features: tuple[str, ...]) -> MLPModel:
        """The model in ``path``, checked against the ``features`` the code computes."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            model = cls(features=tuple(data["features"]), mean=np.asarray(data["mean"], dtype=np.float64),
                         scale=np.asarray(data["scale"], dtype=np.float64),
                         w1=np.asarray(data["w1"], dtype=np.float64), b1=np.asarray(data["b1"], dtype=np.float64),
                         w2=np.asarray(data["w2"], dtype=np.float64), b2=float(data["b2"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RetrievalError(f"model file {path} cannot be read: {exc}") from exc
        if model.features != features:
            raise RetrievalError(f"model file {path} was fitted on other features than the code computes "
                                 f"(refit with benchmarks/fit_ranking_weights.py)")
        n, hidden = len(features), len(model.b1)
        shapes = {"mean": (model.mean.shape, (n,)), "scale": (model.scale.shape, (n,)),
                  "w1": (model.w1.shape, (n, hidden)), "w2": (model.w2.shape, (hidden,))}
        wrong = [name for name, (got, want) in shapes.items() if got != want]
        if wrong or not np.all(model.scale > 0):
            raise RetrievalError(f"model file {path} is malformed ({', '.join(wrong) or 'scale'})")
        return model


class LogitModel(Protocol):
    """Anything that scores rows of features as log-odds."""

    def logit(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class MeanLogitModel:
    """``sigmoid(mean of the models' logits)``: an ensemble of models fitted on the same features."""

    models: tuple[LogitModel, ...]

    def logit(self, x: np.ndarray) -> np.ndarray:
        return np.mean([m.logit(x) for m in self.models], axis=0)

    def prob(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.logit(x))
