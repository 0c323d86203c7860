"""How ``routing.ROUTE_MODEL`` was fitted, and routing held out by whole databases.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/fit_routing.py --bench bird=../shared/bench/bird:/work/bw/bird \\
        --bench spider=../shared/bench/spider-train:/work/bw/spider [--candidates 12] [--folds 5] \\
        [--save C.pkl | --load C.pkl] [--loss softmax|binary] [--route-k K] \\
        [--fold-tenants spider=/work/bw/spider-folds] [--without FEATURE]

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
fitted on every question, as ``routing.py`` holds it. With ``--fold-tenants`` the benchmark is
indexed again with a tenant per fold and each question routed as its database's tenant, among
its fold's databases only (``within_fold``): the same held-out model where a tenant holds a few
dozen databases instead of a whole benchmark.
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
from ranking_fit import every_wording, fit_logistic

BATCH = 64
#: the weights routing used before this fit (by hand), over the same features
HAND = {"dense_mean": 1.0, "dense_table": 1.0, "mention": 0.2, "overlap": 0.05}
#: features whose weight may be negative (every other one is evidence for a candidate: >= 0)
FREE = {"log_columns"}


def collect(bench: str, dataset: Path, work: Path, count: int, route_k: int | None = None,
            lexical: int | None = None, meaning: int | None = None,
            tenant_of: dict[str, str] | None = None) -> list[dict[str, object]]:
    """One record per question: its database, wording, the candidates and their features; with
    ``tenant_of`` (datasource -> tenant) each question is asked as its database's tenant."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    questions = every_wording(dataset, bench)
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
                [RetrievalRequest(question=q["question"], evidence=q.get("evidence") or None,
                                  tenant=(tenant_of or {}).get(q["datasource"])) for q in chunk], count)
            for q, cand in zip(chunk, found, strict=True):
                out.append({"db": q["db"], "bench": bench, "wording": q["wording"], "gold": q["datasource"],
                            "names": cand.names, "x": cand.features, "sql": q.get("gold_sql"),
                            "work": str(work.absolute())})
            print(f"{bench}: {min(start + BATCH, len(questions))}/{len(questions)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return out


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


def fold_assignment(dbs: set[str], folds: int) -> dict[str, int]:
    """Each database's fold (``bench/datasource`` -> 0..folds-1): shuffled, then dealt in turn."""
    order = sorted(dbs)
    random.Random(11).shuffle(order)
    return {db: i % folds for i, db in enumerate(order)}


def index_as_fold_tenants(bench: str, work: Path, out: Path, fold_of: dict[str, int]) -> dict[str, str]:
    """Index ``work``'s databases again into ``out``, each under the tenant of its fold
    (``fold<k>``), unless ``out`` holds that index already; returns datasource -> tenant. A question
    asked as its database's tenant is routed among its fold's databases only: databases the
    routing model, fitted on the other folds, never saw, as many together as a small benchmark."""
    sys.path.insert(0, str(Path(__file__).parent))
    from retrieval_quality import _index

    spec = yaml.safe_load((work / "datasources.yaml").read_text(encoding="utf-8"))
    ids = [str(d["id"]) for d in spec["datasources"]]
    tenant_of = {ds: f"fold{fold_of[bench + '/' + ds]}" for ds in ids if bench + "/" + ds in fold_of}
    path = out / "datasources.yaml"
    folded = {"datasources": [{**d, "tenant": tenant_of[str(d["id"])]} for d in spec["datasources"]
                              if str(d["id"]) in tenant_of]}
    if not path.exists() or yaml.safe_load(path.read_text(encoding="utf-8")) != folded:
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(folded), encoding="utf-8")
        os.environ["NL2SQL_HOME"] = str(out.absolute() / "home")
        from nl2sql_assets.config import Settings

        _index(Settings.from_env(), path)
    return tenant_of


def held_out_routing(records: list[dict[str, object]], folds: int = 5, iters: int = 3000,
                     loss: str = "softmax") -> dict[str, object]:
    """Routing held out by database-grouped folds over collected candidates (:func:`collect`), the
    hand-set weights on the same candidates, and the model fitted on every record (``model``:
    weights and bias, ``weights`` by feature name)."""
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES

    fold_of = fold_assignment({str(r["db"]) for r in records}, folds)
    dbs = list(fold_of)
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
    same_sql = SameSql()
    try:
        held_out = summarize(records, lambda r: held[id(r)], same_sql)
    finally:
        same_sql.close()
    return {
        "databases": len(dbs),
        "held_out": held_out,
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
    parser.add_argument("--save", type=Path, default=None, help="save the collected candidates (pickle) for --load")
    parser.add_argument("--load", type=Path, default=None,
                        help="fit on candidates saved by --save (with their within-fold candidates, if saved)")
    parser.add_argument("--without", action="append", default=[], metavar="FEATURE",
                        help="fit and hold out with this routing feature left out (repeatable)")
    parser.add_argument("--fold-tenants", type=str, action="append", default=[], metavar="NAME=DIR",
                        help="also route benchmark NAME's questions among their own fold's databases only "
                             "(indexed again in DIR, one tenant per fold), printed as within_fold")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    fold_records: list[dict[str, object]] = []
    if args.load is not None:
        records = pickle.loads(args.load.read_bytes())
        fold_records = [r for r in records if r.get("within_fold")]
        records = [r for r in records if not r.get("within_fold")]
    else:
        records = [r for name, dataset, work in args.bench
                   for r in collect(name, dataset, work, args.candidates, args.route_k, args.lexical_candidates,
                                   args.meaning_candidates)]
    fold_of = fold_assignment({str(r["db"]) for r in records}, args.folds)
    benches = {name: (dataset, work) for name, dataset, work in args.bench}
    for spec in args.fold_tenants:
        name, _, out = spec.partition("=")
        if any(r["bench"] == name for r in fold_records):
            continue  # loaded with --load
        dataset, work = benches[name]
        tenant_of = index_as_fold_tenants(name, work, Path(out), fold_of)
        for r in collect(name, dataset, Path(out), args.candidates, args.route_k, args.lexical_candidates,
                         args.meaning_candidates, tenant_of=tenant_of):
            fold_records.append({**r, "within_fold": True})
    if args.save is not None:
        args.save.write_bytes(pickle.dumps(records + fold_records))
    collected = time.perf_counter() - started
    if args.without:
        from nl2sql_assets.retrieval.routing import ROUTE_FEATURES

        off = [ROUTE_FEATURES.index(f) for f in args.without]
        for r in records + fold_records:
            r["x"] = np.array(r["x"], dtype=np.float64)
            r["x"][:, off] = 0.0  # type: ignore[index]
    out = {"candidates": args.candidates, "lexical_candidates": args.lexical_candidates,
           "meaning_candidates": args.meaning_candidates, "loss": args.loss,
           "folds": args.folds, "questions": len(records),
           "collect_s": round(collected, 1), **held_out_routing(records, args.folds, args.iters, args.loss)}
    w, b = out.pop("model")  # type: ignore[misc]
    if fold_records:
        folded = {r["bench"] for r in fold_records}
        within = held_out_routing([r for r in records if r["bench"] not in folded] + fold_records,
                                  args.folds, args.iters, args.loss)
        out["within_fold"] = {"held_out": within["held_out"],
                              "databases_per_fold": {f"{b}/fold{k}": sum(1 for db, f in fold_of.items()
                                                                         if f == k and db.startswith(f"{b}/"))
                                                     for b in sorted(folded) for k in range(args.folds)}}
    out["without"] = args.without
    print(json.dumps(out, indent=2))
    print(f"ROUTE_MODEL = LinearModel(weights=({', '.join(f'{v:.4f}' for v in w)},), bias={b:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
