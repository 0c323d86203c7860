"""Routing's second look: the best few routed datasources each scored against their own schema.

Routing (:mod:`~nl2sql_assets.retrieval.routing`) ranks datasources by evidence pooled over the
whole store, and two schemas about one subject (several with a ``singer`` table) tie there. The
scoped ranking that follows knows more about each: how sure its likeliest table is, how much
doubt the tables it would leave out hold, and how close the question came to any of the schema's
chunks, the inputs by which the confidence calibration tells an answerable question from one
asked of the wrong datasource. The best ``RetrieverConfig.route_rerank`` routed candidates are
each scored so and re-ranked by a logistic model over those three and routing's own logit
(:data:`RERANK_MODEL`); the winner's scoring becomes the result, so nothing is scored twice.

The weights were fitted by ``benchmarks/fit_routing.py --rerank`` on BIRD dev and Spider train (a
softmax over each question's scored candidates; the scoped features from ranking stages and query
adapters fitted without the question's database, the routing logits held out too), and the bias
set so that the first candidate's score matches how often it is right. No feature names a
database.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nl2sql_assets.retrieval.confidence import confidence_features
from nl2sql_assets.retrieval.mlp import sigmoid
from nl2sql_assets.retrieval.models import RankedDatasource
from nl2sql_assets.retrieval.ranking import LinearModel

RERANK_FEATURES = ("route_gap", "top_logit", "miss_log", "best_similarity")
#: how many confidence features the scoped half takes (``top_logit``, ``miss_log``, ``best_similarity``)
SCOPED = 3
# Fitted by benchmarks/fit_routing.py --rerank 4 --ranking-models M.pkl --same-fold (softmax over each
# question's scored candidates, every candidate scored by stages fitted without it; printed as-is).
RERANK_MODEL = LinearModel(weights=(0.7563, 0.1646, 2.4125, 11.4512,), bias=-2.4728)


def scoped_features(table_prob: np.ndarray, selected: Sequence[int], best_similarity: float) -> np.ndarray:
    """The scoped half of a candidate's row: the confidence features that need no routing.

    >>> [round(float(v), 3) for v in scoped_features(np.array([0.9, 0.1]), [0], 0.6)]
    [2.197, -0.105, 0.6]
    """
    return confidence_features(table_prob, selected, best_similarity, [])[:SCOPED]


def rerank_rows(route_logits: Sequence[float], scoped: Sequence[np.ndarray]) -> np.ndarray:
    """One :data:`RERANK_FEATURES` row per candidate: routing's logit less the best one's, then
    its scoped features.

    >>> rerank_rows([2.0, 0.5], [np.zeros(3), np.ones(3)])[:, 0].tolist()
    [0.0, -1.5]
    """
    logits = np.asarray(route_logits, dtype=np.float64)
    gap = logits - logits.max(initial=-np.inf)
    return np.column_stack([gap, np.vstack(scoped).reshape(len(logits), SCOPED)])


def reranked(ranked: Sequence[RankedDatasource], names: Sequence[str], rows: np.ndarray,
             model: LinearModel | None = None) -> list[RankedDatasource]:
    """``ranked`` with ``names`` (scored, one row each) first by ``model`` (default
    :data:`RERANK_MODEL`), each scored by it; the rest keep their order after them, scored no
    higher than the last of them.

    >>> old = [RankedDatasource(id=d, score=s) for d, s in (("a", 0.6), ("b", 0.3), ("c", 0.1))]
    >>> flip = LinearModel(weights=(-1.0, 0.0, 0.0, 0.0), bias=0.0)
    >>> [(d.id, d.score) for d in reranked(old, ["a", "b"], rerank_rows([1.0, 0.0], [np.zeros(3)] * 2), flip)]
    [('b', 0.7311), ('a', 0.5), ('c', 0.1)]
    """
    logit = (model or RERANK_MODEL).logit(rows)
    prob = sigmoid(logit)
    order = sorted(range(len(names)), key=lambda i: (-logit[i], names[i]))
    out = [RankedDatasource(id=names[i], score=round(float(prob[i]), 4)) for i in order]
    floor = out[-1].score if out else 1.0
    taken = set(names)
    out += [RankedDatasource(id=d.id, score=min(d.score, floor)) for d in ranked if d.id not in taken]
    return out
