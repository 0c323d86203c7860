"""What does a new schema version cost in the vector store once records are shared between versions?

Prints one JSON object:

- ``full``: a generated SQLite schema (``--tables`` tables x ``--columns`` columns, default
  300 x 14, foreign keys, a few rows each) indexed from scratch through
  ``nl2sql_assets.pipeline.index.index_datasource`` (the production steps): seconds, chunks,
  per-step timings.
- ``reindex``: ``--changed`` tables (default 3) get a new column, then the datasource is indexed
  again: seconds, texts embedded, records written, and ``ratio`` = re-index / full (target <= 0.10).
- ``third``: ``--changed`` other tables change, indexed again (3 versions retained).
- ``records``: Chroma records after each version against the chunk count of the live version
  (target after 3 versions: about 1x, not 3x).
- ``profile`` (with ``--profile``): the re-index's top functions by cumulative time (cProfile),
  to show what bounds it when the vector store no longer does.

Usage::

    python benchmarks/shared_records.py --workdir /tmp/bench_shared [--tables 300] [--columns 14]
        [--changed 3] [--retention 3] [--profile]

Everything is written under ``--workdir`` (wiped first).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from embed_index import change_tables, table_names  # benchmarks/ is on sys.path when run as a script

from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.indexing.embedding_cache import EmbeddingCache
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.pipeline.index import IndexOutcome, index_datasource
from nl2sql_assets.schema.store import build_schema_store

COLUMNS = ("name", "status", "created_at", "updated_at", "amount", "currency", "notes", "owner_email", "region",
           "category", "priority", "quantity", "discount", "due_date", "closed_at", "source", "rating")
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)


def make_schema(path: Path, count: int, columns: int, rows: int = 10) -> list[str]:
    """``count`` tables of ``columns`` columns (id, a reference to an earlier table, the rest plain)."""
    names = table_names(count)
    con = sqlite3.connect(path)
    for i, name in enumerate(names):
        cols = ["id INTEGER PRIMARY KEY"]
        if i:
            parent = names[(i * 7) % i]
            cols.append(f"{parent}_id INTEGER REFERENCES {parent}(id)")
        cols += [f"{COLUMNS[j % len(COLUMNS)]}{'' if j < len(COLUMNS) else j} TEXT"
                 for j in range(columns - len(cols))]
        con.execute(f'CREATE TABLE "{name}" ({", ".join(cols)})')
        con.executemany(f'INSERT INTO "{name}" (id) VALUES (?)', [(r,) for r in range(rows)])
    con.commit()
    con.close()
    return names


def summary(outcome: IndexOutcome, seconds: float) -> dict[str, object]:
    r = outcome.refresh
    return {"seconds": round(seconds, 3), "status": outcome.status, "chunks": r.total, "embedded": r.embedded,
            "from_cache": r.from_cache, "reused": r.reused, "written": r.upserted, "unchanged": r.unchanged,
            "deleted": r.deleted, "timings_ms": outcome.timings_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--columns", type=int, default=14)
    parser.add_argument("--changed", type=int, default=3)
    parser.add_argument("--retention", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the re-index")
    args = parser.parse_args()

    work: Path = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = work / "bench.db"
    names = make_schema(db, args.tables, args.columns)
    settings = Settings.from_env({"NL2SQL_HOME": str(work / "home")})
    config = DatasourceConfig(id="bench", url=f"sqlite:///{db}")
    embedder = OnnxMiniLMEmbedder()
    embedder.load()
    service = EmbeddingService(embedder, EmbeddingCache.in_folder(settings.cache_path))
    schema_store = build_schema_store(settings)
    vectors = build_vector_store(settings, service)
    records: list[dict[str, int]] = []

    def run(hours: int) -> tuple[IndexOutcome, float]:
        t0 = time.perf_counter()
        outcome = index_datasource(config, schema_store, vectors, now=T0 + timedelta(hours=hours),
                                   retention=args.retention)
        seconds = time.perf_counter() - t0
        records.append({"version": len(records) + 1, "records": vectors.count(), "chunks": outcome.refresh.total})
        return outcome, seconds

    full, full_s = run(0)
    change_tables(db, names[:args.changed], "added_flag")
    profile_text = None
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
    again, again_s = run(1)
    if args.profile:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        profile_text = out.getvalue().splitlines()
    change_tables(db, names[args.changed:2 * args.changed], "second_flag")
    third, third_s = run(2)
    state = vectors.index_state("bench")
    check = vectors.check_records("bench")
    result = {
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "schema": {"tables": args.tables, "columns_per_table": args.columns, "changed_per_version": args.changed,
                   "retention": args.retention},
        "full": summary(full, full_s),
        "reindex": {**summary(again, again_s), "ratio": round(again_s / full_s, 3)},
        "third": {**summary(third, third_s), "ratio": round(third_s / full_s, 3)},
        "records": records,
        "records_per_chunk_after_3_versions": round(records[-1]["records"] / records[-1]["chunks"], 4),
        "retained_versions": sorted(state.versions) if state is not None else [],  # type: ignore[attr-defined]
        "orphaned_records": len(check.orphaned),
    }
    if profile_text is not None:
        result["profile"] = profile_text
    print(json.dumps(result, indent=2))
    vectors.close()


if __name__ == "__main__":
    main()
