"""Joins in a warehouse without declared keys: are they inferred, and does retrieval bridge along them?

Usage::

    python benchmarks/warehouse_joins.py [--work DIR] [--engine sqlite|duckdb] [--max-tables 5 8 12 20]

Builds the generated warehouse of ``tests/fixtures/warehouse.py`` (104 UPPER_CASE tables, facts
and dimensions on ``*_KEY`` surrogate keys, no declared primary or foreign key), indexes it
through the product (``pipeline.index.index_datasource``: snapshot with statistics and join
inference, chunks, Chroma) and asks its questions, each needing 4 to 6 tables. Prints one JSON
object:

- ``joins``: inferred joins against the generated gold joins (precision, recall: the fraction of
  gold joins found), from the snapshot the retriever reads;
- ``retrieval``: per retriever configuration (the defaults, then other ``max_tables``, and the
  fixed probability cut-off instead of ``recall_target`` where that option exists): the
  share of questions with every gold table, the share of all gold tables found, tables sent,
  the share of questions whose tables come with a connected join path, and whether every
  inferred relationship is marked;
- ``dense_top_k``: plain dense top-k for comparison (one MiniLM vector per table: its name and
  column names), the share of questions with every gold table at k tables.

Uses only the public API.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.warehouse import GOLD_JOINS, QUESTIONS, build_warehouse  # noqa: E402

DATASOURCE = "warehouse"


def _connected(tables: set[str], relationships: list[dict[str, object]]) -> bool:
    """Whether the relationships join all ``tables`` into one component."""
    if len(tables) < 2:
        return True
    adjacent: dict[str, set[str]] = {t: set() for t in tables}
    for r in relationships:
        a, b = str(r["from_table"]), str(r["to_table"])
        if a in adjacent and b in adjacent:
            adjacent[a].add(b)
            adjacent[b].add(a)
    start = next(iter(tables))
    seen, todo = {start}, [start]
    while todo:
        for nxt in adjacent[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen == tables


def _join_quality(snapshot) -> dict[str, object]:  # type: ignore[no-untyped-def]
    found = {(t.name, fk.columns[0], fk.ref_table, fk.ref_columns[0])
             for t in snapshot.tables for fk in t.foreign_keys if fk.source == "inferred" and len(fk.columns) == 1}
    hits = found & GOLD_JOINS
    return {"gold_joins": len(GOLD_JOINS), "inferred": len(found), "correct": len(hits),
            "precision": round(len(hits) / max(1, len(found)), 4),
            "recall": round(len(hits) / len(GOLD_JOINS), 4),
            "false_joins": sorted("{}.{} -> {}.{}".format(*j) for j in found - GOLD_JOINS)[:20]}


def _retrieval(base, config) -> dict[str, object]:  # type: ignore[no-untyped-def]
    from nl2sql_assets.retrieval.models import RetrievalRequest
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    retriever = SchemaRetriever(base.schema_store, base.vector_store, base.embeddings, config=config)
    retriever.retrieve(str(QUESTIONS[0]["question"]), datasource=DATASOURCE)  # warm-up

    every, found, gold_total, sent, connected, marked = 0, 0, 0, 0, 0, True
    misses = []
    started = time.perf_counter()
    results = retriever.retrieve_batch([RetrievalRequest(question=str(q["question"]), datasource=DATASOURCE)
                                        for q in QUESTIONS])
    seconds = time.perf_counter() - started
    for q, result in zip(QUESTIONS, results, strict=True):
        gold = set(q["tables"])  # type: ignore[arg-type]
        names = {t.name for t in result.tables}
        relationships = [r.model_dump() for r in result.relationships]
        every += gold <= names
        found += len(gold & names)
        gold_total += len(gold)
        sent += len(names)
        connected += _connected(names, relationships)
        marked &= all(r["inferred"] and r["source"] == "inferred" for r in relationships)
        if not gold <= names:
            misses.append({"question": q["question"], "missing": sorted(gold - names)})
    n = len(QUESTIONS)
    return {"every_gold_table": round(every / n, 4), "gold_tables_found": round(found / gold_total, 4),
            "avg_tables_sent": round(sent / n, 2), "connected_join_path": round(connected / n, 4),
            "inferred_marked": marked, "seconds": round(seconds, 2), "misses": misses[:8]}


def _dense_top_k(snapshot, embeddings, ks: list[int]) -> dict[str, float]:  # type: ignore[no-untyped-def]
    texts = [f"{t.name}: " + ", ".join(c.name for c in t.columns) for t in snapshot.tables]
    tables = np.asarray(embeddings.embed_documents(texts).vectors, dtype=np.float32)
    queries = np.asarray(embeddings.embed_queries([str(q["question"]) for q in QUESTIONS]), dtype=np.float32)
    order = np.argsort(-(queries @ tables.T), axis=1)
    names = [t.name for t in snapshot.tables]
    out = {}
    for k in ks:
        hits = sum(set(q["tables"]) <= {names[i] for i in order[qi, :k]}  # type: ignore[arg-type]
                   for qi, q in enumerate(QUESTIONS))
        out[f"every_gold_table_at_{k}"] = round(hits / len(QUESTIONS), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/nl2sql_warehouse_joins"))
    parser.add_argument("--engine", choices=("sqlite", "duckdb"), default="sqlite")
    parser.add_argument("--max-tables", type=int, nargs="*", default=[5, 8, 12, 20],
                        help="max_tables values measured besides the default configuration")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.work, args.engine, args.max_tables), indent=2))
    return 0


def run(work: Path, engine: str = "sqlite", max_tables: list[int] | None = None) -> dict[str, object]:
    """Build the warehouse afresh in ``work``, index it and measure (the JSON :func:`main` prints)."""
    max_tables = [5, 8, 12, 20] if max_tables is None else max_tables
    work = work.absolute()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    path = build_warehouse(work / f"warehouse.{engine}", engine)
    os.environ["NL2SQL_HOME"] = str(work / "home")
    from nl2sql_assets.config import DatasourceConfig, Settings
    from nl2sql_assets.pipeline.index import index_datasource
    from nl2sql_assets.retrieval.models import RetrieverConfig
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    settings = Settings.from_env()
    config = DatasourceConfig(id=DATASOURCE, url=f"{engine}:///{path}")
    with SchemaRetriever.from_settings(settings) as retriever:
        started = time.perf_counter()
        index_datasource(config, retriever.schema_store, retriever.vector_store)
        index_s = time.perf_counter() - started
        snapshot = retriever.schema_store.get_latest(DATASOURCE)
        default = RetrieverConfig()
        configs = {"default": default}
        configs.update({f"max_tables_{m}": default.model_copy(update={"max_tables": m}) for m in max_tables})
        if "recall_target" in RetrieverConfig.model_fields:  # the fixed cut-off, for comparison
            configs.update({f"fixed_threshold_max_tables_{m}": default.model_copy(
                update={"recall_target": None, "max_tables": m}) for m in (5, *max_tables)})
        retrieval = {name: _retrieval(retriever, cfg) for name, cfg in configs.items()}
        report = {
            "tables": len(snapshot.tables), "columns": snapshot.column_count, "questions": len(QUESTIONS),
            "avg_gold_tables": round(sum(len(q["tables"]) for q in QUESTIONS)  # type: ignore[arg-type]
                                     / len(QUESTIONS), 2),
            "engine": engine, "index_seconds": round(index_s, 1),
            "default_config": {k: v for k, v in default.model_dump().items()
                               if k in ("max_tables", "table_threshold", "recall_target")},
            "first_question_relationships": len(retriever.retrieve(
                str(QUESTIONS[0]["question"]), datasource=DATASOURCE).relationships),
            "joins": _join_quality(snapshot),
            "retrieval": retrieval,
            "dense_top_k": _dense_top_k(snapshot, retriever.embeddings, [5, 12, 20]),
        }
    return report


if __name__ == "__main__":
    raise SystemExit(main())
