"""How ``nl2sql_assets/retrieval/word_association.json`` was fitted: on BIRD and Spider together.

Usage (after ``retrieval_quality.py --dataset D --work W`` has built and indexed each benchmark)::

    python benchmarks/fit_word_association.py --bench bird=../shared/bench/bird:/tmp/h14a_bird \\
        --bench spider=../shared/bench/spider-train:/tmp/h14a_spider [--out FILE]

Every question (BIRD with its evidence and with it blanked, Spider in both wordings, as the
ranking stages are fitted) over its indexed schema is one example for
:func:`nl2sql_assets.retrieval.word_association.fit`: its stemmed words, each column's name words,
which columns its gold SQL uses. No embedding is needed, so this takes seconds. How well the table
carries over to databases it never saw is ``heldout.py``'s job (it fits the table per fold without
the fold's databases). Prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from heldout import parse_bench
from ranking_fit import every_wording

from nl2sql_assets.retrieval.word_association import SHIPPED_FILE, Example, fit


def examples(name: str, dataset: Path, work: Path) -> Iterator[Example]:
    """One benchmark's questions as examples, over the snapshots indexed in ``work``."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval.lexical import LexicalIndex, build_query_terms
    from nl2sql_assets.schema.store import build_schema_store

    os.environ["NL2SQL_HOME"] = str(work.absolute() / "home")
    store = build_schema_store(Settings.from_env())
    try:
        schemas = {}
        for ds in store.list_datasources():
            snap = store.get_snapshot(ds)
            keys = [f"{t.name}.{c.name}".lower() for t in snap.tables for c in t.columns]
            schemas[f"{name}/{ds}"] = (LexicalIndex(snap), keys)
    finally:
        store.close()
    questions = every_wording(dataset, name)
    for q in questions:
        if q["db"] not in schemas:
            continue
        lex, keys = schemas[q["db"]]
        gold = {str(g).lower() for g in q["gold_columns"]}
        terms = build_query_terms(str(q["question"]), str(q.get("evidence") or "") or None)
        yield Example(database=str(q["db"]), question_words=frozenset(terms.words),
                      column_words=[c.name_words for c in lex.columns], needed=[k in gold for k in keys])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=parse_bench, action="append", required=True,
                        help="NAME=DATASET_DIR:WORK_DIR (repeatable; the work folder retrieval_quality.py indexed)")
    parser.add_argument("--out", type=Path, default=SHIPPED_FILE, help="where to write the table (default: shipped)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    exs = [ex for name, dataset, work in args.bench for ex in examples(name, dataset, work)]
    table = fit(exs)
    benches = {name: dataset.name for name, dataset, _ in args.bench}
    args.out.write_text(json.dumps(table.to_json(benchmarks=benches, questions=len(exs)), indent=0) + "\n",
                        encoding="utf-8")
    pairs = sum(len(v) for v in table.pairs.values())
    print(json.dumps({"questions": len(exs), "databases": len({e.database for e in exs}),
                      "question_words": len(table.pairs), "pairs": pairs, "out": str(args.out),
                      "seconds": round(time.perf_counter() - t0, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
