"""How fast does the local embedding service embed chunks, against raw onnxruntime on the same texts?

Prints one JSON object: chunks/s through ``EmbeddingService.embed_documents`` (cache off) and
through a minimal hand-written onnxruntime loop on the same model, tokenizer, threads and texts:
``raw_same_batches`` cuts batches as the service does (the overhead comparison; target: the
service within 10%), ``raw_sorted`` uses fixed batches of length-sorted texts, ``raw_unsorted``
fixed batches in input order. Also the warm latency of ``embed_query`` for one short question.

Usage::

    python benchmarks/embed_throughput.py [--texts FILE] [--count N] [--threads T]
                                          [--rounds R] [--model PATH.onnx]

``--texts``: one text per line (a line that is a JSON string is decoded); default: N synthetic
chunk texts shaped like the chunk builder's (tables, columns, relationships, questions).
``--model``: another ONNX export of the model (e.g. an fp32 build), for comparisons.
Runs alternate service and raw rounds so background load hits both alike; the best round counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.onnx_minilm import (
    OnnxMiniLMEmbedder,
    default_tokenizer_path,
    mean_pool_normalize,
    plan_batches,
)

WORDS = ("order customer invoice payment product shipment address account employee department "
         "salary region store campaign event session subscription refund discount supplier").split()
TYPES = ("INTEGER", "BIGINT", "VARCHAR(255)", "TEXT", "DATE", "TIMESTAMP", "NUMERIC(12,2)", "BOOLEAN")


def synthetic_texts(count: int, seed: int = 7) -> list[str]:
    """Chunk-like texts with a realistic spread of lengths (10 to ~200 tokens)."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        table = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}s_{i}"
        kind = rng.random()
        if kind < 0.15:
            cols = [f"{rng.choice(WORDS)}_{rng.choice(['id', 'name', 'date', 'amount', 'status'])}"
                    for _ in range(rng.randint(4, 30))]
            texts.append(
                f"Table {table} ({table.replace('_', ' ')}). Primary key: {cols[0]}. Columns: "
                + ", ".join(f"{c} ({c.replace('_', ' ')}) {rng.choice(TYPES)}" for c in cols)
                + f". References {rng.choice(WORDS)}s. About {rng.randint(10, 10**7):,} rows.")
        elif kind < 0.8:
            col = f"{rng.choice(WORDS)}_{rng.choice(['id', 'name', 'date', 'amount', 'status', 'code'])}"
            texts.append(
                f"Column {col} ({col.replace('_', ' ')}) of table {table}: {rng.choice(TYPES)}, "
                f"{rng.randint(0, 40)}% null, {rng.randint(2, 90000)} distinct values; "
                f"examples {rng.choice(WORDS)}, {rng.choice(WORDS)}, {rng.choice(WORDS)}.")
        elif kind < 0.95:
            other = f"{rng.choice(WORDS)}s"
            texts.append(f"Relationship: {table}.{other[:-1]}_id -> {other}.{other[:-1]}_id (many-to-one). "
                         f"Joins {table.replace('_', ' ')} to {other}.")
        else:
            texts.append(f"How many {rng.choice(WORDS)}s per {rng.choice(WORDS)} in {rng.randint(2019, 2026)}?")
    return texts


def read_texts(path: Path) -> list[str]:
    texts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        if line.startswith('"'):
            line = json.loads(line)
        texts.append(line)
    return texts


class RawOnnx:
    """The baseline: tokenizer + session.run + mean pooling, nothing else."""

    def __init__(self, embedder: OnnxMiniLMEmbedder) -> None:
        from tokenizers import Tokenizer

        embedder.load()
        self.session = embedder._session  # the same loaded model: the comparison is about our overhead
        self.tokenizer = Tokenizer.from_file(str(default_tokenizer_path()))
        self.tokenizer.enable_truncation(embedder.max_tokens)
        self.tokenizer.no_padding()
        self.batch_size = embedder.batch_size
        self.names = {i.name for i in self.session.get_inputs()}

    def embed(self, texts: list[str], sort: bool = True, plan: bool = False) -> np.ndarray:
        """``sort``: by token count, fixed batches; ``plan``: also the service's padding-aware cuts."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids)) if sort else list(range(len(texts)))
        out = np.empty((len(texts), 384), dtype=np.float32)
        cuts = (plan_batches([len(encodings[i].ids) for i in order], self.batch_size) if plan else
                [(s, s + self.batch_size) for s in range(0, len(order), self.batch_size)])
        for start, stop in cuts:
            idx = order[start:stop]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.names:
                feed["token_type_ids"] = np.zeros_like(ids)
            out[idx] = mean_pool_normalize(self.session.run(None, feed)[0], mask)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=Path, help="one text per line; default: synthetic chunk texts")
    parser.add_argument("--count", type=int, default=1000, help="synthetic texts to make (default 1000)")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: CPUs)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", type=Path, default=None, help="another ONNX export to measure")
    parser.add_argument("--spinning", action="store_true", help="let onnxruntime threads spin (dedicated CPU)")
    args = parser.parse_args(argv)

    texts = read_texts(args.texts) if args.texts else synthetic_texts(args.count)
    embedder = OnnxMiniLMEmbedder(model_path=args.model, threads=args.threads, batch_size=args.batch_size,
                                  spinning=args.spinning)
    started = time.perf_counter()
    embedder.load()
    load_seconds = time.perf_counter() - started
    service = EmbeddingService(embedder, cache=None, query_cache_size=0)
    raw = RawOnnx(embedder)
    tokens = [len(e.ids) for e in raw.tokenizer.encode_batch(texts)]

    service.embed_documents(texts[:64])  # warm-up
    timings: dict[str, list[float]] = {"service": [], "raw_same_batches": [], "raw_sorted": [],
                                       "raw_unsorted": []}
    for _ in range(args.rounds):
        for name, run in (("service", lambda: service.embed_documents(texts).vectors),
                          ("raw_same_batches", lambda: raw.embed(texts, plan=True)),
                          ("raw_sorted", lambda: raw.embed(texts)),
                          ("raw_unsorted", lambda: raw.embed(texts, sort=False))):
            t0 = time.perf_counter()
            vectors = run()
            timings[name].append(time.perf_counter() - t0)
            assert vectors.shape == (len(texts), 384)

    questions = [f"How many orders were shipped to region {i} last month?" for i in range(60)]
    latencies = []
    for question in questions:
        t0 = time.perf_counter()
        service.embed_query(question)
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies = latencies[10:]

    rate = {name: len(texts) / min(values) for name, values in timings.items()}
    result = {
        "question": "local embedding throughput: service vs raw onnxruntime",
        "model": embedder.identity.key,
        "model_file": str(embedder.model_path),
        "texts": len(texts),
        "source": str(args.texts) if args.texts else f"synthetic({args.count})",
        "tokens_mean": round(statistics.mean(tokens), 1),
        "tokens_max": max(tokens),
        "threads": embedder.threads,
        "spinning": embedder.spinning,
        "batch_size": embedder.batch_size,
        "rounds": args.rounds,
        "load_seconds": round(load_seconds, 3),
        "chunks_per_s": {name: round(value, 1) for name, value in rate.items()},
        "service_vs_raw": round(rate["service"] / rate["raw_same_batches"], 3),
        "within_10_percent": rate["service"] >= 0.9 * rate["raw_same_batches"],
        "service_vs_raw_fixed_batches": round(rate["service"] / rate["raw_sorted"], 3),
        "sorting_gain": round(rate["raw_sorted"] / rate["raw_unsorted"], 3),
        "query_ms": {"p50": round(statistics.median(latencies), 2),
                     "p95": round(float(np.percentile(latencies, 95)), 2)},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_1m": round(os.getloadavg()[0], 2)},
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
