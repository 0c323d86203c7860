"""Held-out retrieval quality: fit on some databases, measure on databases the fit never saw.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/heldout.py --bench bird=../shared/bench/bird:/tmp/h14a_bird \\
        --bench spider=../shared/bench/spider-train:/tmp/h14a_spider [--folds 5] [--max-train 20000]

All databases of all benchmarks are split into ``--folds`` database-grouped folds (each benchmark's
databases dealt round-robin, so every fold holds some of each). Per fold the four ranking stages
(``ranking_fit.pipeline``) are fitted on the other folds' questions (BIRD with its evidence and
with it blanked, Spider in both wordings; at most ``--max-train`` questions, drawn at random) and
applied to this fold's, with a query adapter (``ranking_fit.fit_adapter``) fitted on the other folds
too (``--no-query-adapter``: without one; ``--adapter-cache DIR`` keeps each fitted adapter there, named by a
digest of what it was fitted on (settings, query and chunk vectors, labels), and reuses it: the adapters are
most of a run's time and do not depend on the ranking stages) and a word-association table
(``nl2sql_assets.retrieval.word_association``) fitted on the other folds' questions
(``--no-word-association``: without one). Every figure is then computed over held-out outputs only, per benchmark and per wording:

- ``budget``: the shipped defaults (``RetrieverConfig``: the recall targets);
- ``table_curve`` / ``column_curve``: the recall/size curve over several targets;
  ``column_cost_curve`` over several prices of a column (``column_share_cost``), and
  ``column_target_alone`` the column target without priced columns (the defaults before them);
- ``fixed_cutoffs``: the previous fixed cut-offs (``recall_target`` None);
- ``plain_dense``: one MiniLM vector per table (its table chunk), cosine to the question, top-k
  tables with all their columns;
- ``plain_dense_routing``: every database of the benchmark scored by its best table vector's
  cosine to the question, top-1 / top-5 (the baseline of ``fit_routing.py``'s figures).

Routing's held-out figures need the live retriever's candidates over all of a benchmark's
databases indexed together: ``fit_routing.py`` measures them; ``retrieval_quality.py`` the latency.
Prints one JSON object.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# one BLAS thread before numpy loads (ranking_fit sets the same, but only when it is imported first):
# two fits side by side on this 2-core machine otherwise oversubscribe it several times over
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import ranking_fit
from ranking_fit import (Row, association_examples, build_rows, cross_fit_adapters, every_wording, fit_adapter,
                         load_databases, measure, pipeline, plain_dense, plain_routing, with_adapter)

from nl2sql_assets.retrieval import word_association, word_similarity
from nl2sql_assets.retrieval.mlp import MLPModel

TABLE_TARGETS = (0.5, 0.7, 0.8, 0.875, 0.9, 0.93, 0.95, 0.955, 0.96, 0.965, 0.97, 0.98, 0.99)
COLUMN_TARGETS = (0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
COLUMN_COSTS = (0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2.0)
#: the column target before share-priced columns (``column_share_cost``): the comparison row
TARGET_ALONE = 0.77
#: training questions per fold: every question of the other folds (11,357 to 12,656), as the shipped
#: stages are fitted on every question (3,000 before 2026-12-07 late)
MAX_TRAIN = 20000
PLAIN_K = (1, 2, 3, 5)


def load_benchmark(name: str, dataset: Path, work: Path, embed,  # type: ignore[no-untyped-def]
                   word_meaning: bool = True) -> list[Row]:
    """Rows for every question of one indexed benchmark (BIRD also with its evidence blanked)."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.schema.store import build_schema_store

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    store = build_schema_store(Settings.from_env())
    try:
        dbs = load_databases(store, embed, name)
    finally:
        store.close()
    questions = every_wording(dataset, name)
    return build_rows([q for q in questions if q["db"] in dbs], dbs, embed, word_meaning)


def folds_of(rows: list[Row], k: int, seed: str = "") -> list[set[str]]:
    """Database-grouped folds; each benchmark's databases dealt round-robin after a seeded shuffle
    (``seed`` "" is the split every figure in the README comes from; another gives another split)."""
    folds: list[set[str]] = [set() for _ in range(k)]
    by_bench: dict[str, list[str]] = defaultdict(list)
    for db in sorted({str(r["db"]) for r in rows}):
        by_bench[db.split("/", 1)[0]].append(db)
    offset = 0
    for bench in sorted(by_bench):
        names = by_bench[bench]
        random.Random(bench + seed).shuffle(names)
        for i, db in enumerate(names):
            folds[(i + offset) % k].add(db)
        offset += len(names)
    return folds


def groups(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        out[f"{r['bench']}/{r['wording']}"].append(r)
    return dict(sorted(out.items()))


def report(rows: list[Row], table_target: float | None = None, column_target: float | None = None) -> dict[str, object]:
    """All held-out figures per benchmark and wording."""
    from nl2sql_assets.retrieval.models import RetrieverConfig

    cfg = RetrieverConfig()
    tt = cfg.recall_target if table_target is None else table_target
    ct = cfg.column_recall_target if column_target is None else column_target
    out: dict[str, object] = {}
    for name, part in groups(rows).items():
        out[name] = {
            "questions": len(part),
            "databases": len({r["db"] for r in part}),
            "budget": {"recall_target": tt, "column_recall_target": ct,
                       **measure(part, recall_target=tt, column_recall_target=ct)},
            "table_curve": [{"recall_target": t, **measure(part, recall_target=t, column_recall_target=ct)}
                            for t in TABLE_TARGETS],
            "column_curve": [{"column_recall_target": c, **measure(part, recall_target=tt, column_recall_target=c)}
                             for c in COLUMN_TARGETS],
            "column_cost_curve": [{"column_share_cost": c, **measure(part, recall_target=tt, column_recall_target=ct,
                                                                     column_share_cost=c)} for c in COLUMN_COSTS],
            "column_target_alone": {"column_recall_target": TARGET_ALONE,
                                    **measure(part, recall_target=tt, column_recall_target=TARGET_ALONE,
                                              column_share_cost=None)},
            "fixed_cutoffs": measure(part, recall_target=None, column_recall_target=None),
            "plain_dense": {f"top{k}": plain_dense(part, k) for k in PLAIN_K},
            "plain_dense_routing": plain_routing(part),
        }
    return out


def run_folds(rows: list[Row], k: int, max_train: int, iters: int, adapter_model: str | None = None,
              seed: str = "", association: bool = True) -> list[dict[str, object]]:
    """Write held-out outputs into every row: fold by fold, fit on the rest, apply to the fold.

    With ``adapter_model`` (the embedding model's key) a query adapter is fitted on the rest too
    and maps the fold's query texts; the training rows get theirs from adapters fitted without
    their own databases (``ranking_fit.cross_fit_adapters``), as the shipped fit does. With
    ``association`` the word-association table is fitted on the rest too (every question of the
    other folds) and raises the fold's within-table estimates, as the shipped table does. Returns per
    fold its databases, the fitted stages and the adapter (``--save-models``: what
    ``fit_confidence.py --ranking-models`` scores each fold's questions with)."""
    fitted: list[dict[str, object]] = []
    rng = random.Random(13)
    held: dict[int, dict[str, object]] = {}
    for i, fold in enumerate(folds_of(rows, k, seed)):
        test = [r for r in rows if r["db"] in fold]
        rest = [r for r in rows if r["db"] not in fold]
        train = rng.sample(rest, max_train) if len(rest) > max_train else rest
        t0 = time.perf_counter()
        adapter = None
        if adapter_model is not None:
            adapter = fit_adapter(rest, adapter_model)
            with_adapter(test, adapter)
            cross_fit_adapters(rest, adapter_model, train)
        table = word_association.fit(association_examples(rest)) if association else None
        models = pipeline(train, test, iters=iters, association=table)
        fitted.append({"databases": sorted(fold), "models": models, "adapter": adapter, "association": table})
        held.update({id(r): {key: r[key] for key in ("cl", "tx", "tp", "wp", "cx")} for r in test})
        print(f"fold {i + 1}/{k}: {len(fold)} databases, {len(test)} held-out questions, "
              f"fitted on {len(train)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for r in rows:
        r.update(held[id(r)])
    return fitted


#: run_folds' stage names -> the ranking module's model each stands for
STAGES = {"column": "COLUMN_MODEL", "table": "TABLE_MODEL", "context": "CONTEXT_MODEL", "within": "WITHIN_MODEL"}


@contextmanager
def fold_stages(fold: dict[str, object]) -> Iterator[None]:
    """The live retriever's ranking stages replaced by one fold's (``run_folds``' output) while
    inside: a script that asks the product about the fold's databases then scores them with
    stages that never saw them (pass the fold's ``adapter`` to the retriever too)."""
    from nl2sql_assets.retrieval import ranking

    shipped = {name: getattr(ranking, name) for name in STAGES.values()}
    try:
        for key, name in STAGES.items():
            setattr(ranking, name, fold["models"][key])  # type: ignore[index]
        yield
    finally:
        for name, model in shipped.items():
            setattr(ranking, name, model)


def parse_bench(spec: str) -> tuple[str, Path, Path]:
    """``name=DATASET:WORK`` -> (name, dataset, work)."""
    try:
        name, rest = spec.split("=", 1)
        dataset, work = rest.split(":", 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--bench {spec!r}: expected NAME=DATASET_DIR:WORK_DIR") from None
    return name, Path(dataset), Path(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=parse_bench, action="append", required=True,
                        help="NAME=DATASET_DIR:WORK_DIR (repeatable; the work folder retrieval_quality.py indexed)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--fold-seed", default="", help="another split of the databases into folds (default: the README's)")
    parser.add_argument("--max-train", type=int, default=MAX_TRAIN,
                        help="training questions per fold (random draw; the default: every question of the other folds)")
    parser.add_argument("--iters", type=int, default=1500, help="optimizer steps per logistic fit")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--save", type=Path, default=None, help="save the held-out outputs (npz) for --load")
    parser.add_argument("--load", type=Path, default=None,
                        help="reuse saved held-out outputs instead of fitting (same benchmarks, same order)")
    parser.add_argument("--save-models", type=Path, default=None,
                        help="save each fold's databases, fitted stages and query adapter (pickle) for "
                             "fit_confidence.py --ranking-models")
    parser.add_argument("--no-word-meaning", action="store_true",
                        help="word-meaning features at zero (the ablation: what they add)")
    parser.add_argument("--thesaurus-strength", type=float, default=None,
                        help="match strength of a thesaurus pair (0: vectors alone; default word_similarity's)")
    parser.add_argument("--thesaurus-cap", type=int, default=None,
                        help="entries listing more synonyms than this link nothing (0: no cap; default word_similarity's)")
    parser.add_argument("--no-query-adapter", action="store_true",
                        help="query texts unmapped (the ablation: what the query adapter adds)")
    parser.add_argument("--no-word-association", action="store_true",
                        help="within-table estimates without the word-association table (the ablation)")
    parser.add_argument("--adapter-cache", type=Path, default=None,
                        help="keep fitted query adapters in this folder and reuse them (same rows, same settings)")
    parser.add_argument("--weights", action="store_true",
                        help="then fit on all databases (at most --max-train questions) and print the weights "
                             "as ranking.py holds them (what fit_ranking_weights.py prints)")
    args = parser.parse_args(argv)

    from nl2sql_assets.config import Settings
    from nl2sql_assets.indexing.embeddings import build_embedding_service

    ranking_fit.ADAPTER_CACHE = args.adapter_cache
    if args.thesaurus_strength is not None:
        word_similarity.THESAURUS_STRENGTH = args.thesaurus_strength
    if args.thesaurus_cap is not None:
        word_similarity.THESAURUS_MAX_SYNONYMS = args.thesaurus_cap or None
    t0 = time.perf_counter()
    rows: list[Row] = []
    embed = None
    for name, dataset, work in args.bench:
        os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
        embed = embed or build_embedding_service(Settings.from_env())
        rows += load_benchmark(name, dataset, work, embed, not args.no_word_meaning)
        print(f"{name}: {len(rows)} rows so far ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    keys = ("cl", "tx", "tp", "wp", "cx")
    if args.load:
        saved = np.load(args.load, allow_pickle=True)
        for i, r in enumerate(rows):
            r.update({k: saved[f"{k}{i}"] for k in keys})
    else:
        fitted = run_folds(rows, args.folds, args.max_train, args.iters,
                           None if args.no_query_adapter else embed.identity.key, args.fold_seed,  # type: ignore[union-attr]
                           association=not args.no_word_association)
        if args.save_models:
            args.save_models.write_bytes(pickle.dumps(fitted))
    if args.save:
        np.savez(args.save, **{f"{k}{i}": r[k] for i, r in enumerate(rows) for k in keys})
    out = {"folds": args.folds, "max_train": args.max_train, "questions": len(rows),
           "held_out": report(rows), "seconds": round(time.perf_counter() - t0, 1)}
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    if args.weights:
        if not args.no_query_adapter:
            cross_fit_adapters(rows, embed.identity.key)  # type: ignore[union-attr]
        train = random.Random(13).sample(rows, args.max_train) if len(rows) > args.max_train else rows
        for name, model in pipeline(train, [], iters=args.iters).items():
            if isinstance(model, MLPModel):  # the within-table network: fit_ranking_weights.py writes it
                continue
            weights = ", ".join(f"{w:.4f}" for w in model.weights)
            print(f"{name.upper()}_MODEL = LinearModel(weights=({weights},), bias={model.bias:.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
