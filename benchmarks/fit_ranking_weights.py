"""How the weights in ``nl2sql_assets/retrieval/ranking.py`` were fitted, and how well they carry over.

Usage (after ``retrieval_quality.py --dataset ... --work DIR`` has built and indexed BIRD in DIR)::

    python benchmarks/fit_ranking_weights.py --dataset ../shared/bench/bird --work DIR [--lodo]

Builds the product's features (``ranking.column_features`` etc.) for every question from the
indexed snapshots and the product's embedding service, with each query text's similarities cut
to its top ``dense_k`` chunks as retrieval sees them (:func:`as_retrieved`), fits the four
logistic models (L2, C=1; weights of evidence features constrained to be >= 0, so more evidence
never lowers a score) on all questions and prints them as Python. Each stage is fitted on
*out-of-fold* outputs of the stages before it (the column model's logits for a question come
from a model fitted without that question's database, in 3 database-grouped folds): on a new
database the stages see estimates that were not fitted on it, and training them on anything more
confident teaches them to over-trust those estimates.

With ``--lodo`` it also fits leave-one-database-out and prints the held-out figures at the
shipped cut-offs and at the cut-offs that spend the issue's budget (3.0 tables, 25% of the
columns): the estimate for databases never seen, and where the shipped cut-offs come from.
The in-sample figures are lower than held-out ones would suggest for a plain fit: applying the
full models to their own training questions feeds later stages more confident inputs than
they were fitted on. Plain numpy; the printed weights are what ``ranking.py`` holds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from nl2sql_assets.retrieval.entity_kinds import EntityKinds
from nl2sql_assets.retrieval.ranking import FLOOR_MARGIN, DenseScores

FOLDS = 3  # database-grouped folds for out-of-fold stacking
TABLE_BUDGET, SHARE_BUDGET = 3.0, 0.25
FREE = {"is_pk", "is_join_key", "degree", "out_degree", "log_columns", "neighbour_max", "neighbour_sum",
        "between_top2"}


def fit_logistic(x: np.ndarray, y: np.ndarray, nonneg: list[bool], c: float = 1.0, iters: int = 3000,
                 lr: float = 0.05) -> tuple[np.ndarray, float]:
    """L2 logistic regression (penalty 1/(C n)) with ``w[j] >= 0`` where ``nonneg[j]``; Adam + projection."""
    n, d = x.shape
    mu, sd = x.mean(0), x.std(0)
    sd[sd < 1e-9] = 1.0
    z = (x - mu) / sd
    w, b = np.zeros(d), 0.0
    m, v = np.zeros(d + 1), np.zeros(d + 1)
    lam = 1.0 / (c * n)
    mask = np.asarray(nonneg, bool)
    for t in range(1, iters + 1):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = np.empty(d + 1)
        g[:d] = z.T @ (p - y) / n + lam * w * sd ** 2
        g[d] = (p - y).mean()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        step = lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        w -= step[:d]
        b -= step[d]
        w[mask] = np.maximum(w[mask], 0.0)
    return w / sd, float(b - (mu / sd) @ w)


def top_k_with_floor(tables: np.ndarray, columns: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query text, the ``k`` most similar table and column chunks keep their similarity and
    every other chunk gets the row's floor (the smallest kept one - ``FLOOR_MARGIN``): what the
    retriever builds from the vector store's top-``k`` hits (``SchemaRetriever._dense_scores``)."""
    both = np.concatenate([tables, columns], axis=1)
    out = both.copy()
    k = min(k, both.shape[1])
    for r in range(both.shape[0]):
        keep = np.argpartition(-both[r], k - 1)[:k]
        out[r].fill(both[r, keep].min() - FLOOR_MARGIN)
        out[r, keep] = both[r, keep]
    return out[:, :tables.shape[1]], out[:, tables.shape[1]:]


def as_retrieved(seg_tables: np.ndarray, seg_columns: np.ndarray, ent_tables: np.ndarray, ent_columns: np.ndarray,
                 k: int, kinds: EntityKinds | None = None) -> DenseScores:
    """Exact similarities cut to what retrieval sees (:func:`top_k_with_floor`), as ``DenseScores``.

    The models are fitted on these, not on the exact similarities of every chunk: a chunk outside
    the top ``k`` reaches them only as the floor, and a model fitted on exact values over-trusts
    the second-best columns of a big table it will never see.
    """
    tables, columns = top_k_with_floor(seg_tables, seg_columns, k)
    entities = top_k_with_floor(ent_tables, ent_columns, k)[1] if ent_columns.shape[0] else ent_columns
    return DenseScores(tables=tables, columns=columns, entities=entities, kinds=kinds or EntityKinds.none())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="the work folder retrieval_quality.py indexed")
    parser.add_argument("--lodo", action="store_true", help="also report leave-one-database-out figures")
    args = parser.parse_args(argv)
    os.environ["NL2SQL_HOME"] = str(args.work.absolute() / "home")

    from nl2sql_assets.config import Settings
    from nl2sql_assets.indexing.chunk_builder import build_chunks
    from nl2sql_assets.indexing.embeddings import build_embedding_service
    from nl2sql_assets.retrieval import ranking as R
    from nl2sql_assets.retrieval.entity_kinds import EntityKindScorer
    from nl2sql_assets.retrieval.lexical import build_query_terms
    from nl2sql_assets.retrieval.models import RetrieverConfig
    from nl2sql_assets.schema.store import build_schema_store

    settings = Settings.from_env()
    store = build_schema_store(settings)
    embed = build_embedding_service(settings)
    kinds = EntityKindScorer(embed.embed_queries)
    questions = [json.loads(line) for line in (args.dataset / "questions.jsonl").read_text().splitlines() if line]
    dbs: dict[str, dict[str, object]] = {}
    for ds in store.list_datasources():
        snap = store.get_snapshot(ds)
        chunks = build_chunks(snap).chunks
        ttext = {c.table: c.get_page_content() for c in chunks if c.type == "schema.table"}
        ctext = {(c.table, c.column): c.get_page_content() for c in chunks if c.type == "schema.column"}
        dbs[ds] = {
            "index": R.build_schema_index(snap),
            "tv": embed.embed_documents([ttext[t.name] for t in snap.tables]).vectors,
            "cv": embed.embed_documents([ctext[(t.name, c.name)] for t in snap.tables for c in t.columns]).vectors,
            "keys": [f"{t.name}.{c.name}".lower() for t in snap.tables for c in t.columns],
            "tables": [t.name.lower() for t in snap.tables],
        }
    rows = []
    for q in questions:
        d = dbs[q["db_id"].lower()]
        terms = build_query_terms(q["question"], q["evidence"] or None)
        seg = embed.embed_documents(list(terms.segments)).vectors
        ent = (embed.embed_documents(list(terms.entities)).vectors if terms.entities
               else np.zeros((0, seg.shape[1]), np.float32))
        dense = as_retrieved(seg @ d["tv"].T, seg @ d["cv"].T, ent @ d["tv"].T, ent @ d["cv"].T,  # type: ignore[union-attr]
                             RetrieverConfig().dense_k, kinds.scores(ent))
        rows.append({"db": q["db_id"].lower(), "d": d, "terms": terms, "dense": dense,
                     "cx": R.column_features(d["index"], terms, dense),  # type: ignore[arg-type]
                     "cy": np.array([k in {g.lower() for g in q["gold_columns"]} for k in d["keys"]], float),  # type: ignore[union-attr]
                     "ty": np.array([t in {g.lower() for g in q["gold_tables"]} for t in d["tables"]], float),  # type: ignore[union-attr]
                     "gold_tables": {g.lower() for g in q["gold_tables"]},
                     "gold_columns": {g.lower() for g in q["gold_columns"]}})

    def fit(feature_names: tuple[str, ...], xs: list[np.ndarray], ys: list[np.ndarray]) -> R.LinearModel:
        w, b = fit_logistic(np.vstack(xs), np.concatenate(ys), [n not in FREE for n in feature_names])
        return R.LinearModel(tuple(float(v) for v in w), b)

    vh = R.COLUMN_FEATURES.index("value_hit")

    def column_logit(model: R.LinearModel, r: dict[str, object]) -> np.ndarray:
        return model.logit(r["cx"]) + R.VALUE_HIT_WEIGHT * r["cx"][:, vh]  # type: ignore[index,call-overload]

    def stage(names: tuple[str, ...], x: str, y: str, train: list[dict[str, object]], apply: list[dict[str, object]],
              out: str, predict, folds: list[set[str]]) -> R.LinearModel:  # type: ignore[no-untyped-def]
        """Fit one stage on ``train``; ``apply`` gets the full model's output, every training question
        the output of a model fitted without its database's fold (out-of-fold stacking)."""
        model = fit(names, [r[x] for r in train], [r[y] for r in train])  # type: ignore[misc]
        for r in apply:
            r[out] = predict(model, r)
        for fold in folds:
            inner = [r for r in train if r["db"] not in fold]
            held = fit(names, [r[x] for r in inner], [r[y] for r in inner])  # type: ignore[misc]
            for r in train:
                if r["db"] in fold:
                    r[out] = predict(held, r)
        return model

    def pipeline(train: list[dict[str, object]], apply: list[dict[str, object]]) -> dict[str, R.LinearModel]:
        names = sorted({str(r["db"]) for r in train})
        folds = [set(names[i::FOLDS]) for i in range(FOLDS)]
        models: dict[str, R.LinearModel] = {}
        models["column"] = stage(R.COLUMN_FEATURES, "cx", "cy", train, apply, "cl", column_logit, folds)
        for r in train + apply:
            r["tx"] = R.table_features(r["d"]["index"], r["terms"], r["dense"], r["cx"], r["cl"])  # type: ignore[index,arg-type]
        models["table"] = stage(R.TABLE_FEATURES, "tx", "ty", train, apply, "first",
                                lambda m, r: m.prob(r["tx"]), folds)
        for r in train + apply:
            r["xx"] = R.context_features(r["d"]["index"], r["first"], r["tx"], r["terms"])  # type: ignore[index,arg-type]
        models["context"] = stage(R.CONTEXT_FEATURES + R.TABLE_FEATURES, "xx", "ty", train, apply, "tp",
                                  lambda m, r: m.prob(r["xx"]), folds)
        for r in train + apply:
            r["wx"] = R.within_features(r["d"]["index"], r["cx"], r["cl"], r["tp"], r["terms"])  # type: ignore[index,arg-type]
        in_gold = [np.isin(r["d"]["index"].lexical.column_table_arr, np.flatnonzero(r["ty"])) for r in train]  # type: ignore[index,arg-type]
        models["within"] = fit(R.WITHIN_FEATURES, [r["wx"][m] for r, m in zip(train, in_gold)],  # type: ignore[index]
                               [r["cy"][m] for r, m in zip(train, in_gold)])  # type: ignore[index]
        for r in apply:
            r["wp"] = models["within"].prob(r["wx"])  # type: ignore[arg-type]
        return models

    def measure(apply: list[dict[str, object]], table_threshold: float | None = None,
                column_cost: float | None = None) -> dict[str, float]:
        cfg = RetrieverConfig()
        tt = cfg.table_threshold if table_threshold is None else table_threshold
        cost = cfg.column_cost if column_cost is None else column_cost
        ok_t = ok_c = sent = share = 0.0
        for r in apply:
            d = r["d"]
            n = len(d["keys"])  # type: ignore[index]
            scores = R.SchemaScores(table_prob=r["tp"], column_logit=r["cl"], column_prob=r["cl"],  # type: ignore[arg-type]
                                    within_prob=r["wp"], column_features=r["cx"], table_features=r["tx"])  # type: ignore[arg-type]
            sel = R.select(d["index"], scores, table_threshold=tt, max_tables=cfg.max_tables,  # type: ignore[index]
                           column_threshold=1 - math.exp(-cost / n),
                           min_columns=cfg.min_columns_per_table, primary_keys=True)
            tables = {d["tables"][t] for t in sel.tables}  # type: ignore[index]
            columns = {d["keys"][c] for cs in sel.columns.values() for c in cs}  # type: ignore[index]
            ok_t += r["gold_tables"] <= tables  # type: ignore[operator]
            ok_c += r["gold_columns"] <= columns  # type: ignore[operator]
            sent += len(tables)
            share += len(columns) / n
        k = len(apply)
        return {"every_gold_table": round(ok_t / k, 4), "avg_tables_sent": round(sent / k, 3),
                "every_gold_column": round(ok_c / k, 4), "avg_column_share_sent": round(share / k, 4)}

    def operating_point(apply: list[dict[str, object]]) -> dict[str, float]:
        """The cut-offs that send the issue's budget (3.0 tables, 25% of the columns), by bisection."""
        lo, hi = 0.01, 0.5
        for _ in range(12):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if measure(apply, mid)["avg_tables_sent"] > TABLE_BUDGET else (lo, mid)
        tt = hi
        lo, hi = 0.5, 12.0
        for _ in range(12):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if measure(apply, tt, mid)["avg_column_share_sent"] > SHARE_BUDGET else (lo, mid)
        return {"table_threshold": round(tt, 4), "column_cost": round(hi, 3), **measure(apply, tt, hi)}

    out: dict[str, object] = {}
    if args.lodo:
        held: dict[int, dict[str, np.ndarray]] = {}
        for db in sorted(dbs):
            apply = [r for r in rows if r["db"] == db]
            pipeline([r for r in rows if r["db"] != db], apply)
            # keep this database's held-out outputs: later folds overwrite every row they train on
            held.update({id(r): {k: r[k] for k in ("cl", "tx", "tp", "wp")} for r in apply})  # type: ignore[misc]
        for r in rows:
            r.update(held[id(r)])
        out["leave_one_database_out"] = measure(rows)
        out["leave_one_database_out_at_budget"] = operating_point(rows)
    models = pipeline(rows, rows)
    out["in_sample"] = measure(rows)
    print(json.dumps(out, indent=2))
    for name, model in models.items():
        weights = ", ".join(f"{w:.4f}" for w in model.weights)
        print(f"{name.upper()}_MODEL = LinearModel(weights=({weights},), bias={model.bias:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
