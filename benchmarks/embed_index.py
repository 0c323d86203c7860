"""How long does indexing a 300-table schema take, and how little does a re-index after a small change cost?

Prints one JSON object:

- ``full_index``: a generated SQLite schema (``--tables`` tables, default 300) indexed from
  scratch through the product (adapter -> schema store -> chunks -> embeddings -> Chroma):
  seconds per step, chunks, texts embedded.
- ``reindex``: ``--changed`` of the tables (default 1%, at least one) get a new column, then
  the datasource is indexed again: seconds, texts embedded, and that as a share of the chunks
  (target: at most 2%). ``reindex_cold_cache`` does the same with an empty embedding cache
  (a new machine sharing the Chroma store): the store's own vectors are reused.
- ``chroma_upsert``: raw ``collection.upsert`` rate of the schema's 384-d vectors into a fresh
  collection, and the vector store's whole write path (a refresh into a fresh collection with a
  warm embedding cache), in chunks/s.
- ``embedding_throughput``: chunks/s through ``EmbeddingService.embed_documents`` (cache off)
  against raw onnxruntime on the same chunk texts (the baseline of ``embed_throughput.py``).

Usage::

    python benchmarks/embed_index.py --workdir /tmp/bench [--tables 300] [--changed 0.01]
        [--threads T] [--throughput-texts 800] [--chroma-host H --chroma-port P]

Everything is written under ``--workdir`` (wiped first). With ``--chroma-host`` the vector
store is a Chroma server instead of the embedded one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embedding_cache import EmbeddingCache
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.schema.store import build_schema_store

AREAS = ("sales", "billing", "crm", "inventory", "shipping", "hr", "payroll", "support", "marketing", "finance",
         "procurement", "analytics", "web", "mobile", "partner", "legal", "facility", "fleet", "audit", "risk")
ENTITIES = ("customer", "order", "invoice", "payment", "product", "supplier", "employee", "ticket", "campaign",
            "contract", "asset", "vehicle", "shipment", "account", "event")
T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)


def table_names(count: int) -> list[str]:
    names = [f"{area}_{entity}s" for area in AREAS for entity in ENTITIES]
    names += [f"{area}_{entity}_history" for area in AREAS for entity in ENTITIES]
    if count > len(names):
        raise SystemExit(f"--tables must be at most {len(names)}")
    return names[:count]


def make_schema(path: Path, count: int, rows: int = 20) -> list[str]:
    """``count`` tables of 8-9 columns; every table after the first references an earlier one."""
    names = table_names(count)
    con = sqlite3.connect(path)
    for i, name in enumerate(names):
        entity = name.split("_", 1)[1].rstrip("s")
        cols = [f"{entity}_id INTEGER PRIMARY KEY", "name TEXT", "status TEXT", "created_at TIMESTAMP",
                "amount NUMERIC", "notes TEXT", "owner_email TEXT"]
        if i:
            parent = names[(i * 7) % i]
            cols.append(f"{parent}_ref INTEGER REFERENCES {parent}({parent.split('_', 1)[1].rstrip('s')}_id)")
        con.execute(f'CREATE TABLE "{name}" ({", ".join(cols)})')
        values = []
        for r in range(rows):
            row = [r + 1, f"{entity} {r}", ("active", "closed", "pending")[r % 3],
                   f"2025-{1 + r % 12:02d}-{1 + r % 28:02d} 10:00:00", round(10.5 * r, 2), None,
                   f"user{r}@example.com"]
            if i:
                row.append(1 + r % rows)
            values.append(row)
        marks = ", ".join("?" * len(values[0]))
        con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', values)
    con.commit()
    con.close()
    return names


def change_tables(path: Path, names: list[str], column: str) -> None:
    con = sqlite3.connect(path)
    for name in names:
        con.execute(f'ALTER TABLE "{name}" ADD COLUMN {column} TEXT')
    con.commit()
    con.close()


def outcome_json(outcome: object, total_s: float) -> dict[str, object]:
    refresh = outcome.refresh  # type: ignore[attr-defined]
    return {
        "seconds": round(total_s, 2),
        "status": outcome.status,  # type: ignore[attr-defined]
        "chunks": refresh.total,
        "embedded": refresh.embedded,
        "from_cache": refresh.from_cache,
        "reused_from_store": refresh.reused,
        "upserted": refresh.upserted,
        "unchanged": refresh.unchanged,
        "deleted": refresh.deleted,
        "embedded_share": round(refresh.embedded / refresh.total, 4) if refresh.total else 0.0,
        "step_ms": outcome.timings_ms,  # type: ignore[attr-defined]
    }


def raw_upsert_rate(settings: Settings, vectors: np.ndarray, chunks: list, batch: int = 1000) -> float:  # type: ignore[type-arg]
    """Records/s of plain ``collection.upsert`` with ids, vectors, documents and metadata."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        client = chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings)
    else:
        client = chromadb.PersistentClient(path=str(settings.home / "chroma_raw"), settings=chroma_settings)
    name = f"bench_raw_{int(time.time())}"
    coll = client.create_collection(name, configuration={"hnsw": {"space": "cosine"}},
                                    embedding_function=None)  # type: ignore[arg-type]
    started = time.perf_counter()
    for start in range(0, len(chunks), batch):
        part = chunks[start:start + batch]
        coll.upsert(ids=[c.id for c in part], embeddings=vectors[start:start + batch],
                    documents=[c.get_page_content() for c in part], metadatas=[c.get_metadata() for c in part])
    seconds = time.perf_counter() - started
    client.delete_collection(name)
    return len(chunks) / seconds


def throughput(embedder: OnnxMiniLMEmbedder, texts: list[str], rounds: int) -> dict[str, object]:
    """Service (no cache) vs raw onnxruntime, alternating rounds; the best round counts."""
    sys.path.insert(0, str(Path(__file__).parent))
    from embed_throughput import RawOnnx  # the same baseline as benchmarks/embed_throughput.py

    service = EmbeddingService(embedder, cache=None, query_cache_size=0)
    raw = RawOnnx(embedder)
    service.embed_documents(texts[:32])
    best = {"service": math.inf, "raw_onnxruntime": math.inf}
    for _ in range(rounds):
        for name, run in (("service", lambda: service.embed_documents(texts)), ("raw_onnxruntime", lambda: raw.embed(texts))):
            t0 = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t0)
    rate = {name: round(len(texts) / seconds, 1) for name, seconds in best.items()}
    return {"texts": len(texts), "rounds": rounds, "chunks_per_s": rate,
            "service_vs_raw": round(rate["service"] / rate["raw_onnxruntime"], 3),
            "within_10_percent": rate["service"] >= 0.9 * rate["raw_onnxruntime"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="scratch folder (wiped first)")
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--changed", type=float, default=0.01, help="share of tables changed before the re-index")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: CPUs)")
    parser.add_argument("--throughput-texts", type=int, default=800, help="chunk texts for the throughput part (0: skip)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--chroma-host", default=None)
    parser.add_argument("--chroma-port", type=int, default=8000)
    args = parser.parse_args(argv)

    work = args.workdir.absolute()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = work / "schema.sqlite"
    t0 = time.perf_counter()
    names = make_schema(db, args.tables)
    generate_s = time.perf_counter() - t0
    env = {"NL2SQL_HOME": str(work / "home")}
    if args.chroma_host:
        env.update({"CHROMA_HOST": args.chroma_host, "CHROMA_PORT": str(args.chroma_port)})
    settings = Settings.from_env(env)
    config = DatasourceConfig(id="bench", url=f"sqlite:///{db}")
    embedder = OnnxMiniLMEmbedder(threads=args.threads)
    embedder.load()
    service = EmbeddingService(embedder, EmbeddingCache.in_folder(settings.cache_path))
    schema_store = build_schema_store(settings)
    vectors = build_vector_store(settings, service, collection_name=f"bench_{int(time.time())}")

    t0 = time.perf_counter()
    full = index_datasource(config, schema_store, vectors, now=T0)
    full_s = time.perf_counter() - t0

    n_changed = max(1, round(args.tables * args.changed))
    change_tables(db, names[:n_changed], "added_flag")
    t0 = time.perf_counter()
    again = index_datasource(config, schema_store, vectors, now=T0 + timedelta(hours=1))
    again_s = time.perf_counter() - t0

    cold_service = EmbeddingService(embedder, EmbeddingCache.in_folder(work / "cold_cache"))
    cold_vectors = build_vector_store(settings, cold_service, collection_name=vectors.collection_name)
    change_tables(db, names[n_changed:2 * n_changed], "second_flag")
    t0 = time.perf_counter()
    cold = index_datasource(config, schema_store, cold_vectors, now=T0 + timedelta(hours=2))
    cold_s = time.perf_counter() - t0

    chunk_set = build_chunks(schema_store.get_snapshot("bench", cold.schema_version))
    texts = [c.get_page_content() for c in chunk_set.chunks]
    warm = service.embed_documents(texts)  # all cached by now except cold's new texts
    raw_rate = raw_upsert_rate(settings, warm.vectors, chunk_set.chunks)
    fresh_store = build_vector_store(settings, service, collection_name=f"bench_write_{int(time.time())}")
    t0 = time.perf_counter()
    write = fresh_store.refresh_schema_chunks("bench", chunk_set.schema_version, chunk_set.chunks,
                                              tenant_id=chunk_set.tenant_id)
    write_s = time.perf_counter() - t0

    result: dict[str, object] = {
        "question": "full index vs incremental re-index of a generated schema; Chroma upsert rate; embedding throughput",
        "tables": args.tables,
        "columns": sum(1 for c in chunk_set.chunks if c.type == "schema.column"),
        "chunk_counts": chunk_set.counts(),
        "vector_store": "chroma server" if args.chroma_host else "embedded chroma",
        "model": embedder.identity.key,
        "threads": embedder.threads,
        "generate_schema_s": round(generate_s, 2),
        "full_index": outcome_json(full, full_s),
        "reindex": {**outcome_json(again, again_s), "tables_changed": n_changed,
                    "target_embedded_share_max": 0.02,
                    "meets_target": again.refresh.embedded <= 0.02 * again.refresh.total},
        "reindex_cold_cache": {**outcome_json(cold, cold_s), "tables_changed": n_changed},
        "reindex_speedup": round(full_s / again_s, 1) if again_s else None,
        "chroma_upsert": {
            "records": len(chunk_set.chunks),
            "raw_upsert_per_s": round(raw_rate, 1),
            "store_write_path_per_s": round(len(chunk_set.chunks) / write_s, 1),
            "store_write_embedded": write.embedded,
        },
    }
    if args.throughput_texts:
        result["embedding_throughput"] = throughput(embedder, texts[: args.throughput_texts], args.rounds)
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "load_avg_1m": round(os.getloadavg()[0], 2)}
    schema_store.close()
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
