"""How should a question's query texts be cut into onnxruntime calls? Measured on BIRD questions.

A question is embedded as several texts: the question, each evidence clause, each entity
("Lewis Hamilton"). Padded into one call, the short ones cost as much as the longest; one call
per text pays the per-call cost each time. This prints one JSON object with the warm embedding
latency per question (p50, p95, mean) for three ways of cutting them:

- ``planned``: ``plan_batches`` (what the product does: the cheapest cut, counting padded tokens
  plus ``CALL_COST_TOKENS`` per call);
- ``one_call``: all texts of a question in one padded call;
- ``one_per_text``: one call per text;

and the per-call and per-padded-token costs fitted (least squares) on the ``one_per_text`` and
``one_call`` timings, which is where ``CALL_COST_TOKENS`` comes from.

Usage::

    python benchmarks/embed_query_batches.py --dataset ../shared/bench/bird [--sample 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nl2sql_assets.indexing.onnx_minilm import CALL_COST_TOKENS, OnnxMiniLMEmbedder, plan_batches
from nl2sql_assets.retrieval.lexical import build_query_terms

Plan = Callable[[list[int]], list[tuple[int, int]]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="folder holding questions.jsonl")
    parser.add_argument("--sample", type=int, default=300, help="questions (every n-th of the file)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    questions = [json.loads(line) for line in (args.dataset / "questions.jsonl").read_text().splitlines() if line]
    questions = questions[:: max(1, len(questions) // args.sample)][: args.sample]
    text_sets = []
    for q in questions:
        terms = build_query_terms(q["question"], q.get("evidence") or None)
        text_sets.append(list(terms.segments) + [e for e in terms.entities if e not in terms.segments])

    model = OnnxMiniLMEmbedder(threads=args.threads)
    model.load()
    tokenizer = model._tokenizer  # the product's own tokenizer and session: only the cuts differ
    assert tokenizer is not None
    plans: dict[str, Plan] = {
        "planned": lambda lengths: plan_batches(lengths, model.batch_size),
        "one_call": lambda lengths: [(0, len(lengths))],
        "one_per_text": lambda lengths: [(i, i + 1) for i in range(len(lengths))],
    }
    calls: list[tuple[int, float]] = []  # (padded tokens, ms) of single calls

    def run(texts: list[str], plan: Plan, record: bool) -> float:
        started = time.perf_counter()
        encodings = tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        for start, stop in plan(lengths[order].tolist()):
            positions = order[start:stop]
            t0 = time.perf_counter()
            model._embed_batch([encodings[i].ids for i in positions], int(lengths[positions[-1]]))
            if record:
                calls.append((len(positions) * int(lengths[positions[-1]]), (time.perf_counter() - t0) * 1000))
        return (time.perf_counter() - started) * 1000

    for texts in text_sets[:30]:  # warm-up
        for plan in plans.values():
            run(texts, plan, False)
    times: dict[str, list[float]] = {name: [] for name in plans}
    for _ in range(args.rounds):
        for texts in text_sets:  # plans interleaved, so background load hits all alike
            for name, plan in plans.items():
                times[name].append(run(texts, plan, record=name != "planned"))
    padded = np.array([c[0] for c in calls], dtype=np.float64)
    ms = np.array([c[1] for c in calls])
    per_token, per_call = np.linalg.lstsq(np.column_stack([padded, np.ones_like(padded)]), ms, rcond=None)[0]
    out: dict[str, object] = {
        "questions": len(text_sets),
        "texts_per_question": round(float(np.mean([len(t) for t in text_sets])), 2),
        "threads": model.threads,
        "call_cost_tokens_shipped": CALL_COST_TOKENS,
        "fitted_ms_per_padded_token": round(float(per_token), 4),
        "fitted_ms_per_call": round(float(per_call), 3),
        "fitted_call_cost_tokens": round(float(per_call / per_token), 1) if per_token > 0 else None,
    }
    for name, values in times.items():
        out[name] = {"p50_ms": round(float(np.percentile(values, 50)), 2),
                     "p95_ms": round(float(np.percentile(values, 95)), 2),
                     "mean_ms": round(float(np.mean(values)), 2)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
