"""Confidence: the estimated probability that every table the question needs is in ``tables``.

A small logistic calibration over what ranking and routing already computed for the question
(docs/retrieval-result.md, ``confidence``):

- ``top_logit``: the log-odds of the likeliest table (the context model's probability);
- ``miss_log``: ``sum log(1 - p)`` over the tables *not* selected: the log-probability, taken
  as independent, that none of them is needed;
- ``best_similarity``: the best dense similarity of any query text to any table or column
  chunk of the chosen datasource;
- ``routed`` and ``route_margin``: 1 when routing chose among several datasources, and the
  score gap between the first and the second (capped at 1).

The coefficients (``ranking.CONFIDENCE_MODEL``) were fitted by ``benchmarks/fit_confidence.py``
on BIRD dev (with its evidence and with it blanked, as most users ask) and Spider train (both
wordings), on answerable questions (target: every gold table returned) and on the same
questions asked of a wrong datasource (target 0). Below :data:`LOW_CONFIDENCE` the result gets
a warning: the schema may not hold what the question asks. Computing it costs microseconds and
never changes what is returned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.models import RankedDatasource

CONFIDENCE_FEATURES = ("top_logit", "miss_log", "best_similarity", "routed", "route_margin")
#: below this the result carries the low-confidence warning
LOW_CONFIDENCE = 0.2
#: full-schema answers: every table of the datasource is sent, but whether the question belongs
#: to that datasource was not measured (0.5: unknown), except ``no_candidates`` (nothing matched)
FALLBACK_CONFIDENCE = {"no_candidates": 0.0, "small_schema": 0.5, "vector_store_unavailable": 0.5}
_MISS_FLOOR = -10.0


def confidence_features(table_prob: np.ndarray, selected: Sequence[int], best_similarity: float,
                        ranked: Sequence[RankedDatasource]) -> np.ndarray:
    """The calibration's inputs (:data:`CONFIDENCE_FEATURES`) for one ranked datasource.

    >>> x = confidence_features(np.array([0.9, 0.1]), [0], 0.6, [])
    >>> [round(float(v), 3) for v in x]
    [2.197, -0.105, 0.6, 0.0, 0.0]
    """
    p = np.clip(np.asarray(table_prob, dtype=np.float64), 1e-6, 1 - 1e-6)
    top = float(p.max()) if p.size else 1e-6
    rest = np.ones(p.size, dtype=bool)
    rest[list(selected)] = False
    miss = max(_MISS_FLOOR, float(np.log1p(-p[rest]).sum()))
    routed = len(ranked) > 1
    margin = min(1.0, ranked[0].score - ranked[1].score) if routed else 0.0
    return np.array([np.log(top / (1 - top)), miss, best_similarity, float(routed), margin], dtype=np.float64)


def best_similarity(*matrices: np.ndarray) -> float:
    """The largest value of the non-empty similarity matrices (0.0 when all are empty)."""
    return max((float(m.max()) for m in matrices if m.size), default=0.0)


def calibrate(x: np.ndarray, weights: Sequence[float], bias: float) -> float:
    """``sigmoid(x . weights + bias)``, rounded to 4 places.

    >>> calibrate(np.array([0.0, 0.0]), (1.0, 2.0), 0.0)
    0.5
    """
    z = float(np.clip(np.dot(x, np.asarray(weights, dtype=np.float64)) + bias, -30.0, 30.0))
    return round(1.0 / (1.0 + math.exp(-z)), 4)


def low_confidence_warning(confidence: float) -> str | None:
    """The warning a result below :data:`LOW_CONFIDENCE` carries, else None.

    >>> low_confidence_warning(0.07)
    'low confidence (0.07): the schema may not hold what the question asks; ask the user before writing SQL'
    """
    if confidence >= LOW_CONFIDENCE:
        return None
    return (f"low confidence ({confidence:.2f}): the schema may not hold what the question asks; "
            "ask the user before writing SQL")


def estimate(table_prob: np.ndarray, selected: Sequence[int], dense: ranking.DenseScores,
             ranked: Sequence[RankedDatasource]) -> float:
    """The confidence of one ranked selection (``ranking.CONFIDENCE_MODEL`` over its features)."""
    sim = best_similarity(dense.tables, dense.columns)
    model = ranking.CONFIDENCE_MODEL
    return calibrate(confidence_features(table_prob, selected, sim, ranked), model.weights, model.bias)


def with_warning(warnings: list[str], confidence: float) -> list[str]:
    """``warnings`` plus the low-confidence warning when ``confidence`` calls for it."""
    warning = low_confidence_warning(confidence)
    return [*warnings, warning] if warning else list(warnings)
