"""``nl2sql-assets retrieve``: one question (human-readable or ``--json``) or a JSONL batch.

Batch mode (``--batch IN.jsonl --out OUT.jsonl``) loads the models once and answers in chunks
with :meth:`SchemaRetriever.retrieve_batch`. It writes exactly one line per input line, in the
same order, each with the input's ``"id"``. A line that cannot be answered (not JSON, no
question, unknown datasource/tenant/version) gets an error line
``{"id": ..., "line": N, "error": "..."}`` instead of a result, and the run goes on (a blank line
is such a line too, so output line N always answers input line N). The exit status is 0, as
the command line table of the README says, with the count of error lines on stderr. A missing input file, or ``--batch``
without ``--out``, is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import Nl2SqlError, RetrievalError
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrievalResult
from nl2sql_assets.retrieval.retriever import SchemaRetriever

BATCH_CHUNK = 64
_BATCH_FIELDS = ("question", "datasource", "tenant", "schema_version", "evidence")


def format_result(result: RetrievalResult) -> str:
    """The human-readable form of a result."""
    lines = []
    version = f" (version {result.schema_version})" if result.schema_version else ""
    lines.append(f"datasource: {result.datasource or '-'}{version}")
    if len(result.datasources) > 1:
        ranked = ", ".join(f"{d.id} {d.score:.2f}" for d in result.datasources[:5])
        lines.append(f"routing: {ranked}")
    lines.append("tables:")
    for table in result.tables:
        name = f"{table.schema_}.{table.name}" if table.schema_ else table.name
        lines.append(f"  {name} ({table.score:.2f}): {', '.join(table.columns)}")
    if result.relationships:
        lines.append("joins:")
        for rel in result.relationships:
            pairs = " AND ".join(f"{rel.from_table}.{a} = {rel.to_table}.{b}"
                                 for a, b in zip(rel.from_columns, rel.to_columns, strict=False))
            lines.append(f"  {pairs} ({rel.cardinality})")
    if result.fallback:
        lines.append(f"fallback: {result.fallback}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    t = result.timings_ms
    lines.append(f"timings: embed {t.get('embed', 0):.1f} ms, vector {t.get('vector', 0):.1f} ms, "
                 f"total {t.get('total', 0):.1f} ms")
    return "\n".join(lines)


def _parse_line(text: str, number: int) -> tuple[object, RetrievalRequest | str]:
    """The line's id and its request, or its id and an error message."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, f"line {number}: not valid JSON ({exc.msg})"
    if not isinstance(data, dict):
        return None, f"line {number}: expected a JSON object"
    ident = data.get("id")
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        return ident, f"line {number}: 'question' is missing or empty"
    for key in _BATCH_FIELDS[1:]:
        if data.get(key) is not None and not isinstance(data[key], str):
            return ident, f"line {number}: '{key}' must be a string"
    return ident, RetrievalRequest(**{k: data.get(k) for k in _BATCH_FIELDS})


def _answer(retriever, requests: list[RetrievalRequest]) -> list[RetrievalResult | str]:  # type: ignore[no-untyped-def]
    """Results for a chunk; when the chunk fails, each request alone so one bad line costs one line."""
    try:
        return list(retriever.retrieve_batch(requests))
    except Nl2SqlError:
        out: list[RetrievalResult | str] = []
        for request in requests:
            try:
                out.append(retriever.retrieve_batch([request])[0])
            except Nl2SqlError as exc:
                out.append(str(exc))
        return out


def run_batch(retriever, source: TextIO, sink: TextIO) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Answer every line of ``source`` into ``sink``, one output line each; returns (answered, errors)."""
    answered = errors = 0
    pending: list[tuple[int, object, RetrievalRequest | str]] = []

    def flush() -> None:
        nonlocal answered, errors
        good = [(n, i, r) for n, i, r in pending if isinstance(r, RetrievalRequest)]
        results = iter(_answer(retriever, [r for _, _, r in good]))  # type: ignore[misc]
        for number, ident, item in pending:
            outcome = next(results) if isinstance(item, RetrievalRequest) else item
            if isinstance(outcome, str):
                sink.write(json.dumps({"id": ident, "line": number, "error": outcome}) + "\n")
                errors += 1
            else:
                sink.write(json.dumps({"id": ident, **outcome.to_json_dict()}) + "\n")
                answered += 1
        pending.clear()

    for number, text in enumerate(source, start=1):
        if not text.strip():
            pending.append((number, None, f"line {number}: empty line"))
            continue
        ident, item = _parse_line(text, number)
        pending.append((number, ident, item))
        if len(pending) >= BATCH_CHUNK:
            flush()
    flush()
    return answered, errors


def run(args: argparse.Namespace) -> int:
    if args.batch:
        if args.question:
            print("nl2sql-assets retrieve: error: give a question or --batch, not both", file=sys.stderr)
            return 2
        if not args.out:
            print("nl2sql-assets retrieve: error: --batch needs --out OUT.jsonl", file=sys.stderr)
            return 2
        source_path = Path(args.batch)
        if not source_path.is_file():
            print(f"nl2sql-assets retrieve: error: batch input {source_path} not found", file=sys.stderr)
            return 2
        with SchemaRetriever.from_settings(Settings.from_env()) as retriever, \
                source_path.open(encoding="utf-8") as source, Path(args.out).open("w", encoding="utf-8") as sink:
            answered, errors = run_batch(retriever, source, sink)
        print(f"{answered} answered, {errors} error lines -> {args.out}", file=sys.stderr)
        return 0
    if args.question is None or not args.question.strip():
        raise RetrievalError("the question is empty (give a question, or --batch IN.jsonl --out OUT.jsonl)")
    with SchemaRetriever.from_settings(Settings.from_env()) as retriever:
        result = retriever.retrieve(args.question, datasource=args.datasource, tenant=args.tenant,
                                    schema_version=args.schema_version, evidence=args.evidence)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(format_result(result))
    return 0
