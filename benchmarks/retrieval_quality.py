"""Retrieval quality on BIRD dev (or a gold JSONL set for the demo): does the retriever find the
datasource, the tables and the columns a question needs, and how little else does it send?

Usage::

    python benchmarks/retrieval_quality.py --dataset ../shared/bench/bird [--work DIR] [--limit N]
    python benchmarks/retrieval_quality.py --gold benchmarks/gold/demo_questions.jsonl [--work DIR]
    python benchmarks/retrieval_quality.py --dataset ../shared/bench/spider-train --work /tmp/h14a_spider \\
        --heldout-bench bird=../shared/bench/bird:/tmp/h14a_bird \\
        --heldout-bench spider=../shared/bench/spider-train:/tmp/h14a_spider --warehouse /tmp/h14a_warehouse

``--dataset`` accepts any folder in BIRD's layout (Spider-train too: its ``wording`` field splits
the figures into ``per_wording``). The live figures use the product's shipped weights, which were
fitted on these benchmarks (routing's model too): only latency is free of the fit there.
``--heldout-bench`` adds the held-out table and column figures (``heldout.py``: the ranking stages
refitted per database-grouped fold, per benchmark and wording, the recall/size curve and the plain
dense top-k baselines) and routing held out (``fit_routing.py``: each benchmark's databases indexed
together, the routing model refitted per fold); ``--warehouse DIR`` the generated warehouse
without declared keys (``warehouse_joins.py``: questions needing 4 to 6 tables; no fit ever saw
it).

BIRD mode builds the SQLite files with the dataset's ``make_sqlite.py`` into the work folder,
writes a datasources file (one datasource per ``db_id``; BIRD's column descriptions passed as
``annotations``, the product's data-dictionary feature; no other hand-made text), indexes them
through the product (``pipeline.index.index_datasource``: the pipeline steps the Dagster assets run)
and asks every question (question + evidence) scoped to its database and pooled across all of
them (routing). Gold mode creates the bundled demo datasources (``nl2sql_assets.demo``) and asks
the gold questions the same way.

Prints one JSON object: the share of questions with every gold table returned, the average
number of tables sent, the share with every gold column returned, the average share of the
database's columns sent, routing top-1/top-5, warm single-question latency p50/p95 (scoped to
the question's datasource, and routed over all of them) and
questions per second with ``retrieve_batch``. Uses only the public API.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

# one BLAS thread (before numpy loads): threaded BLAS spins on this shared 2-core machine
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

BATCH_SIZE = 64


def _bird_datasources(dataset: Path, work: Path) -> tuple[Path, list[dict[str, object]]]:
    """Build the SQLite files and the datasources file; returns it and the questions."""
    sqlite_dir = work / "sqlite"
    sqlite_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(dataset / "make_sqlite.py"), str(sqlite_dir)], check=True,
                   stdout=subprocess.DEVNULL)
    schemas = json.loads((dataset / "schemas.json").read_text(encoding="utf-8"))
    entries = []
    for db_id, schema in sorted(schemas.items()):
        columns = {f"{t['name']}.{c['name']}": c["description"]
                   for t in schema["tables"] for c in t["columns"] if c.get("description")}
        entry: dict[str, object] = {"id": db_id.lower(), "url": f"sqlite:///{sqlite_dir / (db_id + '.sqlite')}"}
        if columns:
            entry["annotations"] = {"columns": columns}
        entries.append(entry)
    path = work / "datasources.yaml"
    path.write_text(yaml.safe_dump({"datasources": entries}, sort_keys=False, allow_unicode=True), encoding="utf-8")
    questions = [json.loads(line) for line in (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    for q in questions:
        q["datasource"] = str(q["db_id"]).lower()
    return path, questions


def _demo_datasources(gold: Path, work: Path) -> tuple[Path, list[dict[str, object]]]:
    from nl2sql_assets.demo import create_demo

    path = Path(create_demo(work, datasources_path=work / "datasources.yaml"))
    questions = [json.loads(line) for line in gold.read_text(encoding="utf-8").splitlines() if line.strip()]
    return path, questions


def _index(settings, datasources_path: Path) -> None:  # type: ignore[no-untyped-def]
    from nl2sql_assets.config import load_datasources
    from nl2sql_assets.indexing.embeddings import build_embedding_service
    from nl2sql_assets.pipeline.index import index_datasource
    from nl2sql_assets.indexing.vector_store import build_vector_store
    from nl2sql_assets.schema.store import build_schema_store

    store = build_schema_store(settings)
    embeddings = build_embedding_service(settings)
    vector_store = build_vector_store(settings, embeddings)
    try:
        for config in load_datasources(datasources_path):
            index_datasource(config, store, vector_store)
    finally:
        vector_store.close()
        embeddings.close()
        store.close()


def _sets(result_tables: list[dict[str, object]]) -> tuple[set[str], set[str]]:
    tables = {str(t["name"]).lower() for t in result_tables}
    columns = {f"{str(t['name']).lower()}.{str(c).lower()}" for t in result_tables for c in t["columns"]}  # type: ignore[union-attr]
    return tables, columns


def _score(questions: list[dict[str, object]], scoped: list[dict[str, object]], pooled: list[dict[str, object]],
           column_counts: dict[str, int]) -> dict[str, object]:
    n = len(questions)
    per_db: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_wording: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    totals: dict[str, float] = defaultdict(float)
    for q, res, pool in zip(questions, scoped, pooled, strict=True):
        ds = str(q["datasource"])
        gold_tables = {str(t).lower() for t in q["gold_tables"]}  # type: ignore[union-attr]
        gold_columns = {str(c).lower() for c in q["gold_columns"]}  # type: ignore[union-attr]
        tables, columns = _sets(res["tables"])  # type: ignore[arg-type]
        ranked = [d["id"] for d in pool["datasources"]]  # type: ignore[index, union-attr]
        row = {
            "tables_all": float(gold_tables <= tables),
            "tables_sent": float(len(tables)),
            "columns_all": float(gold_columns <= columns),
            "columns_share": len(columns) / max(1, column_counts[ds]),
            "route_top1": float(bool(ranked) and ranked[0] == ds),
            "route_top5": float(ds in ranked[:5]),
            "fallback": float(res.get("fallback") is not None),
        }
        wording = str(q.get("wording") or ("evidence" if q.get("evidence") else "no_evidence"))
        for key, value in row.items():
            totals[key] += value
            per_db[ds][key] += value
            per_wording[wording][key] += value
        per_db[ds]["questions"] += 1
        per_wording[wording]["questions"] += 1
    out = {k: round(v / n, 4) for k, v in totals.items()}
    out["per_datasource"] = {ds: {k: (round(v / d["questions"], 4) if k != "questions" else int(v))
                                  for k, v in d.items()} for ds, d in sorted(per_db.items())}
    out["per_wording"] = {w: {k: (round(v / d["questions"], 4) if k != "questions" else int(v))
                              for k, v in d.items()} for w, d in sorted(per_wording.items())}
    return out


def _held_out(specs: list[str], folds: int) -> dict[str, object]:
    """Held-out table and column figures (``heldout.py``) over the given indexed benchmarks."""
    import heldout
    from nl2sql_assets.config import Settings
    from nl2sql_assets.indexing.embeddings import build_embedding_service

    home = os.environ.get("NL2SQL_HOME")
    rows: list[dict[str, object]] = []
    embed = build_embedding_service(Settings.from_env())
    try:
        for name, dataset, work in (heldout.parse_bench(s) for s in specs):
            rows += heldout.load_benchmark(name, dataset, work, embed)
    finally:
        embed.close()
        if home:
            os.environ["NL2SQL_HOME"] = home
    heldout.run_folds(rows, folds, max_train=heldout.MAX_TRAIN, iters=600, adapter_model=embed.identity.key)
    return heldout.report(rows)


@contextmanager
def _environment_kept() -> Iterator[None]:
    """The process environment as it was, after a step that points ``NL2SQL_HOME`` elsewhere."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _held_out_routing(specs: list[str], folds: int) -> dict[str, object]:
    """Routing held out (``fit_routing.py``: each benchmark's databases indexed together, the routing
    model refitted per database-grouped fold) over the given indexed benchmarks."""
    import fit_routing
    import heldout

    from nl2sql_assets.retrieval.models import RetrieverConfig

    with _environment_kept():  # collect points NL2SQL_HOME at each benchmark's work folder
        records = [r for name, dataset, work in (heldout.parse_bench(s) for s in specs)
                   for r in fit_routing.collect(name, dataset, work, RetrieverConfig().route_candidates)]
    out = fit_routing.held_out_routing(records, folds)
    return {"questions": len(records), "databases": out["databases"], "held_out": out["held_out"],
            "hand_weights_same_candidates": out["hand_weights_same_candidates"]}


def _warehouse(work: Path) -> dict[str, object]:
    """The generated warehouse of ``warehouse_joins.py`` (built afresh in ``work``): never fitted on."""
    import warehouse_joins

    with _environment_kept():  # the warehouse gets its own home; the benchmark's datasources file is not its
        os.environ.pop("NL2SQL_DATASOURCES", None)
        return warehouse_joins.run(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", type=Path, help="the BIRD folder (schemas.json, questions.jsonl, make_sqlite.py)")
    source.add_argument("--gold", type=Path, help="a gold JSONL file for the demo datasources")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nl2sql_retrieval_quality"),
                        help="work folder (SQLite files, NL2SQL_HOME); reused when present")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--sample", type=int, default=None,
                        help="only about N questions, every k-th (spread over all databases, unlike --limit)")
    parser.add_argument("--latency-sample", type=int, default=300, help="questions timed one by one (warm)")
    parser.add_argument("--fresh", action="store_true", help="delete the work folder first")
    parser.add_argument("--per-datasource", action="store_true", help="include the per-datasource breakdown")
    parser.add_argument("--blank-evidence", action="store_true", help="ask without the evidence text (BIRD)")
    parser.add_argument("--recall-target", type=float, default=None, help="RetrieverConfig.recall_target")
    parser.add_argument("--max-tables", type=int, default=None, help="RetrieverConfig.max_tables")
    parser.add_argument("--column-recall-target", type=float, default=None,
                        help="RetrieverConfig.column_recall_target")
    parser.add_argument("--column-share-cost", type=float, default=None,
                        help="RetrieverConfig.column_share_cost")
    parser.add_argument("--heldout-bench", type=str, action="append", default=[], metavar="NAME=DATASET:WORK",
                        help="also report held-out figures (heldout.py: database-grouped folds) over these "
                             "indexed benchmarks (repeatable)")
    parser.add_argument("--folds", type=int, default=5, help="folds for --heldout-bench")
    parser.add_argument("--warehouse", type=Path, default=None, metavar="DIR",
                        help="also report the generated warehouse (warehouse_joins.py), built afresh in DIR")
    args = parser.parse_args(argv)

    work = args.work.absolute()
    if args.fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    if args.dataset:
        datasources_path, questions = _bird_datasources(args.dataset.absolute(), work)
    else:
        datasources_path, questions = _demo_datasources(args.gold.absolute(), work)
    if args.limit:
        questions = questions[: args.limit]
    if args.sample and len(questions) > args.sample:
        questions = questions[:: -(-len(questions) // args.sample)]
    if args.blank_evidence:
        questions = [{**q, "evidence": "", "wording": "no_evidence"} for q in questions]

    os.environ["NL2SQL_HOME"] = str(work / "home")
    os.environ["NL2SQL_DATASOURCES"] = str(datasources_path)
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    settings = Settings.from_env()
    t0 = time.perf_counter()
    _index(settings, datasources_path)
    index_s = time.perf_counter() - t0

    targets = {k: v for k, v in (("recall_target", args.recall_target),
                                 ("column_recall_target", args.column_recall_target),
                                 ("column_share_cost", args.column_share_cost),
                                 ("max_tables", args.max_tables)) if v is not None}
    config = RetrieverConfig(**targets)
    with SchemaRetriever.from_settings(settings, config=config) as retriever:
        # every question must be embedded when timed: no answers from the query-vector memory
        retriever.embeddings.query_cache_size = 0  # type: ignore[attr-defined]
        column_counts = {ds: retriever.schema_store.get_snapshot(ds).column_count
                         for ds in {str(q["datasource"]) for q in questions}}

        def request(q: dict[str, object], scoped: bool) -> RetrievalRequest:
            return RetrievalRequest(question=str(q["question"]), evidence=str(q.get("evidence") or "") or None,
                                    datasource=str(q["datasource"]) if scoped else None)

        # warm-up: models, caches, Chroma
        retriever.retrieve_batch([request(q, True) for q in questions[:BATCH_SIZE]])
        t0 = time.perf_counter()
        scoped = []
        for start in range(0, len(questions), BATCH_SIZE):
            scoped.extend(retriever.retrieve_batch([request(q, True) for q in questions[start:start + BATCH_SIZE]]))
        batch_s = time.perf_counter() - t0
        pooled = []
        for start in range(0, len(questions), BATCH_SIZE):
            pooled.extend(retriever.retrieve_batch([request(q, False) for q in questions[start:start + BATCH_SIZE]]))
        step = max(1, len(questions) // max(1, args.latency_sample))
        sample = questions[::step][: args.latency_sample]
        latencies, routed_latencies = [], []
        for q in sample:
            t = time.perf_counter()
            retriever.retrieve(str(q["question"]), datasource=str(q["datasource"]),
                               evidence=str(q.get("evidence") or "") or None)
            latencies.append((time.perf_counter() - t) * 1000)
        for q in sample:  # the same questions routed over every indexed datasource
            t = time.perf_counter()
            retriever.retrieve(str(q["question"]), evidence=str(q.get("evidence") or "") or None)
            routed_latencies.append((time.perf_counter() - t) * 1000)

    report = _score(questions, [r.model_dump() for r in scoped], [r.model_dump() for r in pooled], column_counts)
    per_db = report.pop("per_datasource")
    per_wording = report.pop("per_wording")
    latencies.sort()
    routed_latencies.sort()
    out: dict[str, object] = {
        "questions": len(questions),
        "datasources": len(column_counts),
        "every_gold_table": report["tables_all"],
        "avg_tables_sent": report["tables_sent"],
        "every_gold_column": report["columns_all"],
        "avg_column_share_sent": report["columns_share"],
        "routing_top1": report["route_top1"],
        "routing_top5": report["route_top5"],
        "fallback_share": report["fallback"],
        "latency_ms_p50": round(statistics.median(latencies), 2),
        "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "routed_latency_ms_p50": round(statistics.median(routed_latencies), 2),
        "routed_latency_ms_p95": round(routed_latencies[int(0.95 * (len(routed_latencies) - 1))], 2),
        "batch_questions_per_s": round(len(questions) / batch_s, 1),
        "index_seconds": round(index_s, 1),
        "recall_target": config.recall_target,
        "column_recall_target": config.column_recall_target,
        "column_share_cost": config.column_share_cost,
        "per_wording": per_wording,
    }
    if args.per_datasource:
        out["per_datasource"] = per_db
    if args.heldout_bench:
        out["held_out"] = _held_out(args.heldout_bench, args.folds)
        out["held_out_routing"] = _held_out_routing(args.heldout_bench, args.folds)
    if args.warehouse:
        out["warehouse"] = _warehouse(args.warehouse)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
