"""How ``ranking.CONFIDENCE_MODEL`` (the result's ``confidence``) was fitted, and how well it is calibrated.

Usage (after ``retrieval_quality.py --dataset ... --work DIR`` has built and indexed BIRD in DIR)::

    python benchmarks/fit_confidence.py --dataset ../shared/bench/bird --work DIR [--limit N]

Asks every BIRD question through the product's retriever three ways: scoped to its own
database (target 1 when every gold table is returned), scoped to another database chosen at
random (unanswerable: target 0) and routed over all databases (target 1 when routed to its
database with every gold table returned). The calibration's inputs are recorded as the
retriever computes them (``confidence.confidence_features``; full-schema fallbacks are left
out: they get fixed confidences). The logistic calibration is fitted leave-one-database-out
(fit on the other databases' questions, predict this one's) and the held-out Brier score,
AUCs and a decile calibration table are printed as JSON, then the model fitted on everything,
as ``ranking.py`` holds it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from fit_ranking_weights import fit_logistic

BATCH = 64
NONNEG = {"top_logit": True, "miss_log": True, "best_similarity": True, "routed": False, "route_margin": True}


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="stable")
    ranks = np.empty(len(order))
    values = np.concatenate([pos, neg])[order]
    i = 0
    while i < len(values):  # average ranks over ties
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def deciles(pred: np.ndarray, y: np.ndarray) -> list[dict[str, float]]:
    """Ten equal-count bins by prediction: mean predicted against observed."""
    order = np.argsort(pred, kind="stable")
    return [{"n": int(len(b)), "mean_predicted": round(float(pred[b].mean()), 4),
             "observed": round(float(y[b].mean()), 4)} for b in np.array_split(order, 10) if len(b)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="the work folder retrieval_quality.py indexed")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    work = args.work.absolute()
    os.environ["NL2SQL_HOME"] = str(work / "home")
    os.environ["NL2SQL_DATASOURCES"] = str(work / "datasources.yaml")

    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval import confidence as C
    from nl2sql_assets.retrieval import ranking as R
    from nl2sql_assets.retrieval.models import RankedDatasource, RetrievalRequest
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    questions = [json.loads(line) for line in (args.dataset / "questions.jsonl").read_text().splitlines() if line]
    questions = questions[: args.limit] if args.limit else questions
    recorded: list[np.ndarray] = []
    features = C.confidence_features

    def record(*a, **k):  # type: ignore[no-untyped-def]
        x = features(*a, **k)
        recorded.append(x)
        return x

    C.confidence_features = record  # type: ignore[assignment]
    rng = random.Random(args.seed)
    rows: list[tuple[str, str, np.ndarray, float]] = []  # (question's db, kind, features, target)
    with SchemaRetriever.from_settings(Settings.from_env()) as retriever:
        dbs = sorted(retriever.schema_store.list_datasources())
        asks = []
        for q in questions:
            db = str(q["db_id"]).lower()
            wrong = rng.choice([d for d in dbs if d != db])
            for kind, ds in (("scoped", db), ("wrong_datasource", wrong), ("routed", None)):
                asks.append((q, db, kind, RetrievalRequest(question=q["question"], evidence=q.get("evidence") or None,
                                                           datasource=ds)))
        for start in range(0, len(asks), BATCH):
            chunk = asks[start:start + BATCH]
            recorded.clear()
            results = retriever.retrieve_batch([a[3] for a in chunk])
            selected = [(a, r) for a, r in zip(chunk, results, strict=True) if r.fallback is None]
            assert len(selected) == len(recorded), (len(selected), len(recorded))
            for ((q, db, kind, _), r), feats in zip(selected, recorded, strict=True):
                gold = {g.lower() for g in q["gold_tables"]}
                ok = r.datasource == db and gold <= {t.name.lower() for t in r.tables}
                rows.append((db, kind, feats, float(ok)))

    x = np.vstack([r[2] for r in rows])
    y = np.array([r[3] for r in rows])
    db_of = np.array([r[0] for r in rows])
    kind = np.array([r[1] for r in rows])
    nonneg = [NONNEG[n] for n in C.CONFIDENCE_FEATURES]
    pred = np.zeros(len(y))
    for db in sorted(set(db_of)):
        train = db_of != db
        w, b = fit_logistic(x[train], y[train], nonneg)
        pred[~train] = [C.calibrate(v, w, b) for v in x[~train]]
    answerable = kind != "wrong_datasource"
    scoped_or_wrong = kind != "routed"
    out = {
        "examples": int(len(y)),
        "by_kind": {k: {"n": int((kind == k).sum()), "target_rate": round(float(y[kind == k].mean()), 4),
                        "mean_confidence": round(float(pred[kind == k].mean()), 4),
                        "warned": round(float((pred[kind == k] < C.LOW_CONFIDENCE).mean()), 4)}
                    for k in ("scoped", "wrong_datasource", "routed")},
        "held_out_brier": round(float(((pred - y) ** 2).mean()), 4),
        "held_out_brier_base_rate": round(float(((y.mean() - y) ** 2).mean()), 4),
        "held_out_auc_target": round(auc(pred, y), 4),
        "held_out_auc_answerable_vs_unanswerable": round(auc(pred[scoped_or_wrong],
                                                             answerable[scoped_or_wrong].astype(float)), 4),
        "calibration_deciles": deciles(pred, y),
    }
    w, b = fit_logistic(x, y, nonneg)
    probe = R.DenseScores(tables=np.random.rand(3, 60), columns=np.random.rand(3, 600), entities=np.zeros((0, 600)))
    ranked = [RankedDatasource(id="a", score=1.2), RankedDatasource(id="b", score=0.9)]
    t0 = time.perf_counter()
    for _ in range(1000):
        C.estimate(np.random.rand(60), [0, 1, 2], probe, ranked)
    out["ms_per_estimate"] = round((time.perf_counter() - t0), 4)
    print(json.dumps(out, indent=2))
    weights = ", ".join(f"{v:.4f}" for v in w)
    print(f"CONFIDENCE_MODEL = LinearModel(weights=({weights},), bias={b:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
