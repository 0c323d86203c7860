"""How the weights in ``nl2sql_assets/retrieval/ranking.py`` were fitted: on BIRD and Spider together.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/fit_ranking_weights.py --bench bird=../shared/bench/bird:/tmp/h14a_bird \\
        --bench spider=../shared/bench/spider-train:/tmp/h14a_spider [--max-train 20000]

Builds the product's features for every question (``ranking_fit.build_rows``: BIRD with its
evidence and with it blanked, Spider in both wordings), fits the three logistic stages (L2, C=1;
weights of evidence features constrained to be >= 0, so more evidence never lowers their score;
the networks are not so constrained) and
the within-table network (``ranking_fit.fit_mlp``), each stage on out-of-fold outputs of the
stages before it, on at most ``--max-train`` questions drawn at random (the context stage is a
logistic model and a network whose logits are averaged); prints the logistic ones as Python, as
``ranking.py`` holds them (``CONTEXT_LINEAR`` for the context stage's), and writes the networks to
``--within-out`` and ``--context-out`` (``nl2sql_assets/retrieval/within_model.json`` and
``context_model.json``, which ``ranking.py`` loads). First it fits the
query adapter on every question (``ranking_fit.fit_adapter``, written to ``--adapter-out``,
``nl2sql_assets/retrieval/query_adapter.json``); the stages are fitted on rows whose query texts
were mapped by adapters fitted without their own database (``ranking_fit.cross_fit_adapters``),
as a new database's will be. How well they carry over to databases never seen is ``heldout.py``'s
job (the same fit per database-grouped fold).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

from heldout import MAX_TRAIN, load_benchmark, parse_bench
from ranking_fit import (ADAPTER_COLUMNS, ADAPTER_L2, ADAPTER_STEPS, ADAPTER_TAU, as_retrieved, cross_fit_adapters,
                         fit_adapter, fit_logistic, pipeline, top_k_with_floor)

from nl2sql_assets.retrieval.mlp import MeanLogitModel, MLPModel

WITHIN_FILE = Path(__file__).resolve().parent.parent / "nl2sql_assets" / "retrieval" / "within_model.json"
CONTEXT_FILE = WITHIN_FILE.with_name("context_model.json")
ADAPTER_FILE = WITHIN_FILE.with_name("query_adapter.json")

__all__ = ["as_retrieved", "fit_logistic", "top_k_with_floor"]  # kept importable from here


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=parse_bench, action="append", required=True,
                        help="NAME=DATASET_DIR:WORK_DIR (repeatable)")
    parser.add_argument("--max-train", type=int, default=MAX_TRAIN,
                        help="training questions drawn for the stages (the default: every question of both benchmarks, 14,867)")
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--within-out", type=Path, default=WITHIN_FILE,
                        help="where the within-table network goes (the file ranking.py loads)")
    parser.add_argument("--context-out", type=Path, default=CONTEXT_FILE,
                        help="where the context stage's network goes (the file ranking.py loads)")
    parser.add_argument("--adapter-out", type=Path, default=ADAPTER_FILE,
                        help="where the query adapter goes (the file the retriever loads)")
    args = parser.parse_args(argv)

    from nl2sql_assets.config import Settings
    from nl2sql_assets.indexing.embeddings import build_embedding_service

    rows = []
    embed = None
    for name, dataset, work in args.bench:
        os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
        embed = embed or build_embedding_service(Settings.from_env())
        rows += load_benchmark(name, dataset, work, embed)
    key = embed.identity.key  # type: ignore[union-attr]
    adapter = fit_adapter(rows, key)
    args.adapter_out.write_text(json.dumps(adapter.to_json(
        questions=len(rows), databases=len({r["db"] for r in rows}), tau=ADAPTER_TAU, l2=ADAPTER_L2,
        column_weight=ADAPTER_COLUMNS, steps=ADAPTER_STEPS, benchmarks=[name for name, _, _ in args.bench])) + "\n",
        encoding="utf-8")
    print(f"QUERY_ADAPTER: written to {args.adapter_out}")
    cross_fit_adapters(rows, key)
    train = random.Random(13).sample(rows, args.max_train) if len(rows) > args.max_train else rows
    models = pipeline(train, [], iters=args.iters)
    for name, model in models.items():
        if isinstance(model, MLPModel):
            args.within_out.write_text(json.dumps(model.to_json()) + "\n", encoding="utf-8")
            print(f"{name.upper()}_MODEL: written to {args.within_out}")
            continue
        label = f"{name.upper()}_MODEL"
        if isinstance(model, MeanLogitModel):
            model, net = model.models
            args.context_out.write_text(json.dumps(net.to_json()) + "\n", encoding="utf-8")  # type: ignore[attr-defined]
            print(f"{label}'s network: written to {args.context_out}")
            label = f"{name.upper()}_LINEAR"
        weights = ", ".join(f"{w:.4f}" for w in model.weights)  # type: ignore[union-attr]
        print(f"{label} = LinearModel(weights=({weights},), bias={model.bias:.4f})")  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    sys.exit(main())
