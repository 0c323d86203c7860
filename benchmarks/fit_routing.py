"""How ``routing.ROUTE_MODEL`` was fitted, and routing held out by whole databases.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/fit_routing.py --bench bird=../shared/bench/bird:/work/bw/bird \\
        --bench spider=../shared/bench/spider-train:/work/bw/spider [--candidates 12] [--folds 5] \\
        [--save C.pkl | --load C.pkl] [--loss softmax|binary] [--route-k K] \\
        [--rerank 4 [--ranking-models M.pkl]]

Every question (BIRD with its evidence and with it blanked; Spider in both wordings) goes through
the product's own routing path over all of its benchmark's databases indexed together: the
batched routing search and ``DatasourceRouter.candidates`` (``SchemaRetriever.route_candidates``), which
returns the best ``--candidates`` datasources by dense evidence with their feature rows
(``routing.ROUTE_FEATURES``). A linear model over them is fitted in database-grouped folds
(``--loss softmax``, the default: each question's candidates ranked against each other; or
``binary``: each candidate on its own): the weights that rank a fold's questions never saw its
databases. Printed as JSON per benchmark and wording: top-1 / top-5 held out, the same for the
hand-set weights this replaced, how often the question's database is among the candidates at
all (the ceiling), and ``top1_or_same_sql``: top-1 counting also a first choice where the
question's gold SQL runs as written (every table and column it names exists there: the schema
cannot tell the two databases apart for this question; Spider's questions were written for a
known database, and "What are the names of all departments?" fits several); then the model
fitted on every question, as ``routing.py`` holds it.

``--rerank N`` also fits and holds out routing's second look (``route_rerank.RERANK_MODEL``): each
question's best N candidates by routing's held-out logit, each scored against its own schema by
the product's path (``SchemaRetriever.rerank_features``), re-ranked by a softmax over routing's
logit and the scoped features, fitted in the same database-grouped folds (``held_out_rerank``).
With ``--ranking-models`` (``heldout.py --save-models``) every question's candidates are scored by
the ranking stages and query adapter fitted without its database, so the figure is held out
throughout; without it the shipped ranking weights score them (they saw every database: an
in-sample figure). Printed as ``held_out_rerank`` beside ``held_out``, then ``RERANK_MODEL``
fitted on every question.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

# one BLAS thread before numpy loads (ranking_fit sets the same, but only when it is imported first):
# two fits side by side on this 2-core machine otherwise oversubscribe it several times over
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from heldout import parse_bench
from ranking_fit import fit_logistic, load_questions

BATCH = 64
#: the weights routing used before this fit (by hand), over the same features
HAND = {"dense_mean": 1.0, "dense_table": 1.0, "mention": 0.2, "overlap": 0.05}
#: features whose weight may be negative (every other one is evidence for a candidate: >= 0)
FREE = {"log_columns"}


def collect(bench: str, dataset: Path, work: Path, count: int, route_k: int | None = None,
            lexical: int | None = None, meaning: int | None = None) -> list[dict[str, object]]:
    """One record per question: its database, wording, the candidates and their features."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    questions = load_questions(dataset, bench)
    if any(q.get("evidence") for q in questions):
        questions += load_questions(dataset, bench, blank_evidence=True)
    out: list[dict[str, object]] = []
    overrides: dict[str, int] = {}
    if route_k is not None:
        overrides["route_k"] = route_k
    if lexical is not None:
        overrides["route_lexical_candidates"] = lexical
    if meaning is not None:
        overrides["route_meaning_candidates"] = meaning
    config = RetrieverConfig(**overrides)
    with SchemaRetriever.from_settings(Settings.from_env(), config=config) as retriever:
        for start in range(0, len(questions), BATCH):
            chunk = questions[start:start + BATCH]
            found = retriever.route_candidates(
                [RetrievalRequest(question=q["question"], evidence=q.get("evidence") or None) for q in chunk], count)
            for q, cand in zip(chunk, found, strict=True):
                out.append({"db": q["db"], "bench": bench, "wording": q["wording"], "gold": q["datasource"],
                            "names": cand.names, "x": cand.features, "sql": q.get("gold_sql"),
                            "work": str(work.absolute()), "question": q["question"],
                            "evidence": q.get("evidence") or None})
            print(f"{bench}: {min(start + BATCH, len(questions))}/{len(questions)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return out


def collect_scoped(records: list[dict[str, object]], work: Path, pool: int,
                   fold_models: list[dict[str, object]] | None) -> None:
    """Give each record ``scoped``: per datasource of its ``pool`` best candidates by the shipped
    ``ROUTE_MODEL``, the scoped half of its row for routing's second look
    (``SchemaRetriever.rerank_features``: the product's path). With ``fold_models`` (``heldout.py
    --save-models``) a question is scored by the ranking stages and query adapter fitted without
    its database; otherwise by the shipped ones (an in-sample figure)."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval import ranking
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.retriever import SchemaRetriever
    from nl2sql_assets.retrieval.routing import ROUTE_MODEL

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    parts = [(None, records)] if not fold_models else [
        (fold, [r for r in records if r["db"] in set(fold["databases"])]) for fold in fold_models]  # type: ignore[arg-type]
    shipped = {name: getattr(ranking, name) for name in STAGES.values()}
    try:
        for fold, part in parts:
            if fold is not None:
                for key, name in STAGES.items():
                    setattr(ranking, name, fold["models"][key])  # type: ignore[index]
            adapter = fold["adapter"] if fold is not None else None  # type: ignore[index]
            with SchemaRetriever.from_settings(Settings.from_env(), config=RetrieverConfig(),
                                               adapter=adapter) as retriever:  # type: ignore[arg-type]
                for start in range(0, len(part), BATCH):
                    chunk = part[start:start + BATCH]
                    pools = []
                    for r in chunk:
                        logit = ROUTE_MODEL.logit(r["x"]) if len(r["names"]) else np.zeros(0)  # type: ignore[arg-type]
                        order = sorted(range(len(r["names"])), key=lambda i: (-logit[i], r["names"][i]))  # type: ignore[index]
                        pools.append([r["names"][i] for i in order[:pool]])  # type: ignore[index]
                    requests = [RetrievalRequest(question=str(r["question"]), evidence=r.get("evidence") or None)  # type: ignore[arg-type]
                                for r in chunk]
                    for r, found in zip(chunk, retriever.rerank_features(requests, pools), strict=True):
                        r["scoped"] = found
                    print(f"scoped: {start + len(chunk)}/{len(part)}", file=sys.stderr, end="\r")
    finally:
        for name, model in shipped.items():
            setattr(ranking, name, model)
    print(file=sys.stderr)


def within_own_fold(records: list[dict[str, object]], fold_models: list[dict[str, object]]) -> None:
    """Keep, of each record's candidates, only the databases of its own ranking fold (in place).

    With ``--ranking-models`` a question's database is scored by stages that never saw it, but a
    candidate from another fold by stages fitted on that database's own questions (the query
    adapter above all pulls questions towards the chunks it was fitted on), which favours the
    wrong candidates; in-sample, the question itself was fitted on. Routing among the fold's own
    databases (about a fifth of them) leaves every candidate unseen by the stages that score it,
    as a user's databases are: the first and the second look compared on that task are both fair."""
    fold_of = {db: i for i, fold in enumerate(fold_models) for db in fold["databases"]}  # type: ignore[attr-defined]
    for r in records:
        own = fold_of[str(r["db"])]
        keep = [i for i, name in enumerate(r["names"]) if fold_of.get(f"{r['bench']}/{name}") == own]  # type: ignore[arg-type]
        r["names"] = [r["names"][i] for i in keep]  # type: ignore[index]
        r["x"] = r["x"][keep]  # type: ignore[index]


#: heldout.py's stage names -> the ranking module's model each replaces
STAGES = {"column": "COLUMN_MODEL", "table": "TABLE_MODEL", "context": "CONTEXT_MODEL", "within": "WITHIN_MODEL"}


def ranks(record: dict[str, object], scores: np.ndarray) -> int | None:
    """The gold database's rank (0 = first) among the candidates by ``scores``; None when absent."""
    names = record["names"]
    if record["gold"] not in names:  # type: ignore[operator]
        return None
    order = sorted(range(len(names)), key=lambda i: (-scores[i], names[i]))  # type: ignore[arg-type, index]
    return [names[i] for i in order].index(record["gold"])  # type: ignore[index]


class SameSql:
    """Whether a question's gold SQL runs as written on another database of its benchmark
    (``EXPLAIN``: every table and column it names exists there), from the work folder's
    ``datasources.yaml``; one engine per database, kept."""

    def __init__(self) -> None:
        self.urls: dict[str, dict[str, str]] = {}
        self.engines: dict[tuple[str, str], Engine] = {}

    def runs(self, record: dict[str, object], db: str) -> bool:
        work, sql = record.get("work"), record.get("sql")
        if not work or not sql:  # candidates saved before this was recorded
            return False
        if work not in self.urls:
            spec = yaml.safe_load((Path(str(work)) / "datasources.yaml").read_text(encoding="utf-8"))
            self.urls[str(work)] = {str(d["id"]): str(d["url"]) for d in spec["datasources"]}
        key = (str(work), db)
        if key not in self.engines:
            self.engines[key] = create_engine(self.urls[str(work)][db])
        try:
            with self.engines[key].connect() as conn:
                conn.execute(text(f"EXPLAIN {sql}")).fetchall()
        except SQLAlchemyError:
            return False
        return True

    def close(self) -> None:
        for engine in self.engines.values():
            engine.dispose()
        self.engines.clear()


def summarize(records: list[dict[str, object]], score,  # type: ignore[no-untyped-def]
              same_sql: SameSql | None = None) -> dict[str, dict[str, float]]:
    """Top-1 / top-5 per benchmark and wording, with ``score(record) -> scores per candidate``;
    with ``same_sql`` also ``top1_or_same_sql`` (see the module docstring)."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    for r in records:
        scores = score(r)
        rank = ranks(r, scores)
        same = False
        if same_sql is not None and rank != 0 and len(r["names"]):  # type: ignore[arg-type]
            names = list(r["names"])  # type: ignore[call-overload]
            first = min(range(len(names)), key=lambda i: (-scores[i], names[i]))
            same = same_sql.runs(r, names[first])
        for key in (f"{r['bench']}/{r['wording']}", "all"):
            a = acc[key]
            a[0] += 1
            a[1] += rank == 0
            a[2] += rank is not None and rank < 5
            a[3] += rank is not None
            a[4] += rank == 0 or same
    out = {k: {"questions": int(a[0]), "top1": round(a[1] / a[0], 4), "top5": round(a[2] / a[0], 4),
               "among_candidates": round(a[3] / a[0], 4)} for k, a in sorted(acc.items())}
    if same_sql is not None:
        for k, a in acc.items():
            out[k]["top1_or_same_sql"] = round(a[4] / a[0], 4)
    return out


def fit_softmax(groups: list[tuple[np.ndarray, int]], nonneg: list[bool], c: float = 1.0, iters: int = 3000,
                lr: float = 0.05) -> tuple[np.ndarray, float]:
    """Conditional logit: per question, softmax over its candidates, the gold one's log-likelihood
    maximized (L2 penalty 1/(C n), ``w[j] >= 0`` where ``nonneg[j]``; Adam + projection). Ranks the
    candidates of one question against each other, which is all routing needs; the bias is then
    set so that the mean probability of the top candidate matches how often it is right."""
    x = np.vstack([g[0] for g in groups])
    mu, sd = x.mean(0), x.std(0)
    sd[sd < 1e-9] = 1.0
    z = (x - mu) / sd
    sizes = np.array([len(g[0]) for g in groups])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gold = starts + np.array([g[1] for g in groups])
    owner = np.repeat(np.arange(len(groups)), sizes)
    n, d = len(groups), x.shape[1]
    w = np.zeros(d)
    m, v = np.zeros(d), np.zeros(d)
    lam = 1.0 / (c * n)
    mask = np.asarray(nonneg, bool)
    for t in range(1, iters + 1):
        s = z @ w
        s = s - np.maximum.reduceat(s, starts)[owner]
        e = np.exp(s)
        p = e / np.add.reduceat(e, starts)[owner]
        g = (z.T @ p - z[gold].sum(0)) / n + lam * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        w[mask] = np.maximum(w[mask], 0.0)
    w = w / sd
    raw = x @ w
    top = np.array([raw[a:a + k].max() for a, k in zip(starts, sizes, strict=True)])
    right = np.array([raw[gi] >= raw[a:a + k].max() for gi, a, k in zip(gold, starts, sizes, strict=True)])
    lo, hi = -50.0, 50.0
    for _ in range(60):  # the bias at which the top candidate's mean probability equals its hit rate
        bias = (lo + hi) / 2
        if (1 / (1 + np.exp(-np.clip(top + bias, -30, 30)))).mean() < right.mean():
            lo = bias
        else:
            hi = bias
    return w, float(bias)


def rerank_pools(records: list[dict[str, object]], logits_of, pool: int  # type: ignore[no-untyped-def]
                 ) -> dict[int, tuple[list[str], np.ndarray]]:
    """Per record with scoped features, routing's second look as the product takes it: the best
    ``pool`` candidates by ``logits_of(record)``, less those that could not be scored, and their
    ``route_rerank.RERANK_FEATURES`` rows (``route_rerank.rerank_rows``)."""
    from nl2sql_assets.retrieval.route_rerank import rerank_rows

    out = {}
    for r in records:
        scoped = r.get("scoped")
        if not scoped:
            continue
        names = list(r["names"])  # type: ignore[call-overload]
        logit = logits_of(r)
        order = sorted(range(len(names)), key=lambda i: (-logit[i], names[i]))
        kept = [names[i] for i in order[:pool] if names[i] in scoped]  # type: ignore[operator]
        if len(kept) < 2:
            continue
        at = {n: i for i, n in enumerate(names)}
        out[id(r)] = (kept, rerank_rows([float(logit[at[n]]) for n in kept], [scoped[n] for n in kept]))  # type: ignore[index]
    return out


def reranked_scores(record: dict[str, object], logit: np.ndarray, pools: dict[int, tuple[list[str], np.ndarray]],
                    w: np.ndarray, b: float) -> np.ndarray:
    """Scores per candidate that order the re-ranked pool first (by ``w``, ``b``), the rest after
    it by routing's logit."""
    if id(record) not in pools:
        return logit
    names, rows = pools[id(record)]
    out = np.array(logit, dtype=np.float64)
    at = {n: i for i, n in enumerate(record["names"])}  # type: ignore[call-overload]
    for name, value in zip(names, rows @ w + b, strict=True):
        out[at[name]] = 1e6 + value
    return out


def held_out_rerank(records: list[dict[str, object]], held: dict[int, np.ndarray], fold_of: dict[str, int],
                    folds: int, pool: int, iters: int) -> tuple[dict[int, np.ndarray], tuple[np.ndarray, float]]:
    """Routing's second look held out: per fold, ``RERANK_MODEL`` fitted on the other folds' pools
    (routing's held-out logits), applied to this fold's; and the model fitted on every record."""
    pools = rerank_pools(records, lambda r: held[id(r)], pool)

    def fit(part: list[dict[str, object]]) -> tuple[np.ndarray, float]:
        groups = [(pools[id(r)][1], pools[id(r)][0].index(r["gold"])) for r in part  # type: ignore[arg-type]
                  if id(r) in pools and r["gold"] in pools[id(r)][0]]
        return fit_softmax(groups, [False] * groups[0][0].shape[1], iters=iters)

    scores: dict[int, np.ndarray] = {}
    for k in range(folds):
        w, b = fit([r for r in records if fold_of[str(r["db"])] != k])
        for r in records:
            if fold_of[str(r["db"])] == k:
                scores[id(r)] = reranked_scores(r, held[id(r)], pools, w, b)
    return scores, fit(records)


def held_out_routing(records: list[dict[str, object]], folds: int = 5, iters: int = 3000,
                     loss: str = "softmax", rerank: int = 0) -> dict[str, object]:
    """Routing held out by database-grouped folds over collected candidates (:func:`collect`), the
    hand-set weights on the same candidates, and the model fitted on every record (``model``:
    weights and bias, ``weights`` by feature name)."""
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES

    dbs = sorted({str(r["db"]) for r in records})
    random.Random(11).shuffle(dbs)
    fold_of = {db: i % folds for i, db in enumerate(dbs)}
    nonneg = [name not in FREE for name in ROUTE_FEATURES]

    def fit(part: list[dict[str, object]]) -> tuple[np.ndarray, float]:
        if loss == "binary":
            x = np.vstack([r["x"] for r in part if len(r["names"])])  # type: ignore[arg-type]
            y = np.concatenate([[float(name == r["gold"]) for name in r["names"]]  # type: ignore[attr-defined]
                                for r in part])
            return fit_logistic(x, y, nonneg, iters=iters)
        groups = [(r["x"], list(r["names"]).index(r["gold"])) for r in part  # type: ignore[call-overload]
                  if r["gold"] in r["names"] and len(r["names"]) > 1]  # type: ignore[operator, arg-type]
        return fit_softmax(groups, nonneg, iters=iters)

    held: dict[int, np.ndarray] = {}
    for k in range(folds):
        w, b = fit([r for r in records if fold_of[str(r["db"])] != k])
        for r in records:
            if fold_of[str(r["db"])] == k:
                held[id(r)] = r["x"] @ w + b  # type: ignore[operator]
    hand = np.array([HAND.get(f, 0.0) for f in ROUTE_FEATURES])
    w, b = fit(records)
    second: dict[str, object] = {}
    same_sql = SameSql()
    try:
        held_out = summarize(records, lambda r: held[id(r)], same_sql)
        if rerank >= 2:
            from nl2sql_assets.retrieval.route_rerank import RERANK_FEATURES

            scores, (rw, rb) = held_out_rerank(records, held, fold_of, folds, rerank, iters)
            second = {"rerank": rerank, "held_out_rerank": summarize(records, lambda r: scores[id(r)], same_sql),
                      "rerank_weights": dict(zip(RERANK_FEATURES, (round(float(v), 4) for v in rw), strict=True)),
                      "rerank_model": (rw, rb)}
    finally:
        same_sql.close()
    return {
        "databases": len(dbs),
        "held_out": held_out,
        **second,
        "hand_weights_same_candidates": summarize(records, lambda r: r["x"] @ hand),
        "in_sample_final": summarize(records, lambda r: r["x"] @ w + b),
        "weights": dict(zip(ROUTE_FEATURES, (round(float(v), 4) for v in w), strict=True)),
        "model": (w, b),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=parse_bench, action="append", default=[],
                        help="NAME=DATASET_DIR:WORK_DIR (repeatable; the work folder retrieval_quality.py indexed)")
    parser.add_argument("--candidates", type=int, default=12,
                        help="datasources scored in full per question (RetrieverConfig.route_candidates)")
    parser.add_argument("--route-k", type=int, default=None,
                        help="vector hits per query text routing looks at (RetrieverConfig.route_k; default its default)")
    parser.add_argument("--lexical-candidates", type=int, default=None,
                        help="datasources added by vocabulary (RetrieverConfig.route_lexical_candidates; default: its default)")
    parser.add_argument("--meaning-candidates", type=int, default=None,
                        help="datasources added by word meaning (RetrieverConfig.route_meaning_candidates; default: its default)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument("--loss", choices=("softmax", "binary"), default="softmax",
                        help="softmax: rank a question's candidates against each other; binary: each on its own")
    parser.add_argument("--rerank", type=int, default=0,
                        help="also fit and hold out routing's second look over the best N candidates "
                             "(RetrieverConfig.route_rerank; RERANK_MODEL)")
    parser.add_argument("--ranking-models", type=Path, default=None,
                        help="heldout.py --save-models output: score each question's candidates with the ranking "
                             "stages and query adapter fitted without its database (else the shipped ones: in-sample)")
    parser.add_argument("--same-fold", action="store_true",
                        help="with --ranking-models: route among the question's own ranking fold's databases only "
                             "(every candidate unseen by the stages that score it; see within_own_fold)")
    parser.add_argument("--save", type=Path, default=None, help="save the collected candidates (pickle) for --load")
    parser.add_argument("--load", type=Path, default=None, help="fit on candidates saved by --save")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    if args.load is not None:
        records = pickle.loads(args.load.read_bytes())
    else:
        fold_models = pickle.loads(args.ranking_models.read_bytes()) if args.ranking_models else None
        records = []
        for name, dataset, work in args.bench:
            part = collect(name, dataset, work, args.candidates, args.route_k, args.lexical_candidates,
                           args.meaning_candidates)
            if args.same_fold:
                within_own_fold(part, fold_models)  # type: ignore[arg-type]
            if args.rerank >= 2:  # two more than the pool: the held-out logits order them otherwise
                collect_scoped(part, work, args.rerank + 2, fold_models)
            records += part
    if args.save is not None:
        args.save.write_bytes(pickle.dumps(records))
    collected = time.perf_counter() - started
    out = {"candidates": args.candidates, "lexical_candidates": args.lexical_candidates,
           "meaning_candidates": args.meaning_candidates, "loss": args.loss,
           "folds": args.folds, "questions": len(records),
           "collect_s": round(collected, 1),
           **held_out_routing(records, args.folds, args.iters, args.loss, args.rerank)}
    w, b = out.pop("model")  # type: ignore[misc]
    second = out.pop("rerank_model", None)
    print(json.dumps(out, indent=2))
    print(f"ROUTE_MODEL = LinearModel(weights=({', '.join(f'{v:.4f}' for v in w)},), bias={b:.4f})")
    if second is not None:
        rw, rb = second
        print(f"RERANK_MODEL = LinearModel(weights=({', '.join(f'{v:.4f}' for v in rw)},), bias={rb:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
