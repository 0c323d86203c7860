"""How ``ranking.CONFIDENCE_MODEL`` (the result's ``confidence``) was fitted, and how well it is calibrated.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/fit_confidence.py --bench bird=../shared/bench/bird:/tmp/h14a_bird \\
        --bench spider=../shared/bench/spider-train:/tmp/h14a_spider [--limit 2000]

Asks up to ``--limit`` questions of each benchmark (BIRD with its evidence and again with it
blanked, as most users ask; Spider in both wordings) through the product's retriever three ways:
scoped to its own database (target 1 when every gold table is returned), scoped to another
database of the benchmark chosen at random (unanswerable: target 0) and routed over all of the
benchmark's databases (target 1 when routed to its database with every gold table returned). The calibration's inputs are recorded as the
retriever computes them (``confidence.confidence_features``; full-schema fallbacks are left
out: they get fixed confidences). The logistic calibration is fitted in database-grouped folds
(fit on the other folds' databases, predict this fold's) and the held-out Brier score,
AUCs and a decile calibration table are printed as JSON, then the model fitted on everything,
as ``ranking.py`` holds it.

``--ranking-models`` (``heldout.py --save-models``) asks each fold's questions with the ranking
stages and query adapter fitted without its databases, and draws the wrong datasource from the
same fold: the inputs then look as they will on a user's databases, which no stage saw (with the
shipped stages every benchmark database's questions were fitted on, so the likeliest table is
surer than it will be). ``shipped_model_on_these_inputs`` tells how the shipped calibration fares
on them.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import sys
import time
from pathlib import Path

import numpy as np

from heldout import fold_stages
from ranking_fit import fit_logistic

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


def ask(bench: str, dataset: Path, work: Path, limit: int | None, blank_evidence: bool,
        rng: random.Random, fold_models: list[dict[str, object]] | None = None
        ) -> list[tuple[str, str, np.ndarray, float]]:
    """(question's db, kind, features, target) for one indexed benchmark, asked three ways; with
    ``fold_models`` each fold's questions by its ranking stages and query adapter, the wrong
    datasource drawn from the same fold (so that no datasource asked is one the stages saw)."""
    questions = [json.loads(line) for line in (dataset / "questions.jsonl").read_text().splitlines() if line]
    if limit and len(questions) > limit:
        questions = rng.sample(questions, limit)
    if not fold_models:
        return _ask(bench, work, questions, blank_evidence, rng, None)
    rows: list[tuple[str, str, np.ndarray, float]] = []
    for fold in fold_models:
        own = {str(d).split("/", 1)[1] for d in fold["databases"] if str(d).startswith(bench + "/")}  # type: ignore[attr-defined]
        part = [q for q in questions if str(q["db_id"]).lower() in own]
        if part:
            with fold_stages(fold):
                rows += _ask(bench, work, part, blank_evidence, rng, fold)
    return rows


def _ask(bench: str, work: Path, questions: list[dict[str, object]], blank_evidence: bool, rng: random.Random,
         fold: dict[str, object] | None) -> list[tuple[str, str, np.ndarray, float]]:
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval import confidence as C
    from nl2sql_assets.retrieval.models import RetrievalRequest
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    os.environ["NL2SQL_DATASOURCES"] = str(work.absolute() / "datasources.yaml")
    recorded: list[np.ndarray] = []
    features = C.confidence_features

    def record(*a, **k):  # type: ignore[no-untyped-def]
        x = features(*a, **k)
        recorded.append(x)
        return x

    C.confidence_features = record  # type: ignore[assignment]
    rows: list[tuple[str, str, np.ndarray, float]] = []
    try:
        adapter = fold["adapter"] if fold is not None else None
        with SchemaRetriever.from_settings(Settings.from_env(), adapter=adapter) as retriever:  # type: ignore[arg-type]
            dbs = sorted(retriever.schema_store.list_datasources())
            if fold is not None:
                dbs = [d for d in dbs if f"{bench}/{d}" in fold["databases"]]  # type: ignore[operator]
            asks = []
            for q in questions:
                db = str(q["db_id"]).lower()
                evidence = None if blank_evidence else (q.get("evidence") or None)
                wrong = rng.choice([d for d in dbs if d != db] or [d for d in retriever.schema_store.list_datasources()
                                                                   if d != db])
                for kind, ds in (("scoped", db), ("wrong_datasource", wrong), ("routed", None)):
                    asks.append((q, db, kind, RetrievalRequest(question=q["question"], evidence=evidence,
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
                    rows.append((f"{bench}/{db}", kind, feats, float(ok)))
    finally:
        C.confidence_features = features  # type: ignore[assignment]
    return rows


def main(argv: list[str] | None = None) -> int:
    from heldout import parse_bench

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=parse_bench, action="append", required=True,
                        help="NAME=DATASET_DIR:WORK_DIR (repeatable; the work folder retrieval_quality.py indexed)")
    parser.add_argument("--limit", type=int, default=2000, help="at most N questions per benchmark (random)")
    parser.add_argument("--folds", type=int, default=5, help="database-grouped folds for the held-out figures")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ranking-models", type=Path, default=None,
                        help="heldout.py --save-models output: ask each fold's questions with the ranking stages and "
                             "query adapter fitted without its databases (else the shipped ones, which saw them)")
    args = parser.parse_args(argv)
    fold_models = pickle.loads(args.ranking_models.read_bytes()) if args.ranking_models else None

    from nl2sql_assets.retrieval import confidence as C
    from nl2sql_assets.retrieval import ranking as R
    from nl2sql_assets.retrieval.models import RankedDatasource

    rng = random.Random(args.seed)
    rows: list[tuple[str, str, np.ndarray, float]] = []
    for name, dataset, work in args.bench:
        with_evidence = ask(name, dataset, work, args.limit, False, rng, fold_models)
        rows += with_evidence
        has_evidence = any(json.loads(line).get("evidence")
                           for line in (dataset / "questions.jsonl").read_text().splitlines()[:50] if line)
        if has_evidence:  # and as most users ask: without the hint
            rows += [(db, kind if kind == "wrong_datasource" else f"{kind}_no_evidence", x, y)
                     for db, kind, x, y in ask(name, dataset, work, args.limit, True, rng, fold_models)]

    x = np.vstack([r[2] for r in rows])
    y = np.array([r[3] for r in rows])
    db_of = np.array([r[0] for r in rows])
    kind = np.array([r[1] for r in rows])
    nonneg = [NONNEG[n] for n in C.CONFIDENCE_FEATURES]
    pred = np.zeros(len(y))
    names = sorted(set(db_of))
    rng.shuffle(names)
    for i in range(args.folds):
        held = np.isin(db_of, names[i::args.folds])
        w, b = fit_logistic(x[~held], y[~held], nonneg)
        pred[held] = [C.calibrate(v, w, b) for v in x[held]]
    answerable = kind != "wrong_datasource"
    shipped = np.array([C.calibrate(v, R.CONFIDENCE_MODEL.weights, R.CONFIDENCE_MODEL.bias) for v in x])
    out = {
        "ranking_stages": "fitted without each question's databases" if fold_models else "shipped (in-sample)",
        "shipped_model_on_these_inputs": {
            "brier": round(float(((shipped - y) ** 2).mean()), 4), "auc_target": round(auc(shipped, y), 4),
            "mean_confidence": round(float(shipped.mean()), 4), "target_rate": round(float(y.mean()), 4),
            "warned_when_answered": round(float((shipped[(y == 1) & answerable] < C.LOW_CONFIDENCE).mean()), 4),
            "warned_wrong_datasource": round(float((shipped[~answerable] < C.LOW_CONFIDENCE).mean()), 4),
            "calibration_deciles": deciles(shipped, y)},
        "examples": int(len(y)),
        "by_kind": {k: {"n": int((kind == k).sum()), "target_rate": round(float(y[kind == k].mean()), 4),
                        "mean_confidence": round(float(pred[kind == k].mean()), 4),
                        "warned": round(float((pred[kind == k] < C.LOW_CONFIDENCE).mean()), 4),
                        "warned_when_answered": round(float((pred[(kind == k) & (y == 1)] < C.LOW_CONFIDENCE).mean()), 4)
                        if ((kind == k) & (y == 1)).any() else None}
                    for k in sorted(set(kind))},
        "by_benchmark_auc_target": {b: round(auc(pred[np.char.startswith(db_of, b + "/")],
                                                 y[np.char.startswith(db_of, b + "/")]), 4)
                                    for b in sorted({d.split("/", 1)[0] for d in names})},
        "held_out_brier": round(float(((pred - y) ** 2).mean()), 4),
        "held_out_brier_base_rate": round(float(((y.mean() - y) ** 2).mean()), 4),
        "held_out_auc_target": round(auc(pred, y), 4),
        "held_out_auc_answerable_vs_unanswerable": round(auc(pred, answerable.astype(float)), 4),
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
