"""``nl2sql-assets retrieve``: one question (human-readable or ``--json``) or a JSONL batch.

Batch mode (``--batch IN.jsonl --out OUT.jsonl``) loads the models once and answers in chunks
with :meth:`SchemaRetriever.retrieve_batch`. It writes exactly one line per input line, in the
same order, each with the input's ``"id"``. A line that cannot be answered (not JSON, no
question, unknown datasource/tenant/version) gets an error line
``{"id": ..., "line": N, "error": "..."}`` instead of a result, and the run goes on (a blank line
is such a line too, so output line N always answers input line N). The exit status is 0, as
the command line table of the README says, with the count of error lines on stderr. A missing input file, or ``--batch``
without ``--out``, is a usage error (exit 2).

The input is read as bytes and decoded line by line, so a line that is not UTF-8, or that holds
a lone surrogate (``"\\ud800"``), costs that line alone: it gets an error line. Output is
ASCII JSON (surrogates escaped), so no input can break the writer. An output path that cannot
be written (a directory, a missing folder) and a command-line question that is not valid text
(undecodable bytes in argv) are usage errors with one message, exit 2. A line's query texts
are bounded (:mod:`nl2sql_assets.retrieval.query`), so one huge line cannot stall the batch.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import Nl2SqlError, RetrievalError
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrievalResult, RetrieverConfig
from nl2sql_assets.retrieval.query import invalid_text

if TYPE_CHECKING:
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

log = logging.getLogger(__name__)

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
    if result.confidence is not None:
        lines.append(f"confidence: {result.confidence:.2f}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    t = result.timings_ms
    lines.append(f"timings: embed {t.get('embed', 0):.1f} ms, vector {t.get('vector', 0):.1f} ms, "
                 f"total {t.get('total', 0):.1f} ms")
    return "\n".join(lines)


def _decode(raw: bytes, number: int) -> tuple[str | None, object, str | None]:
    """The line as text, or None with the line's id (when it can be read) and an error message."""
    try:
        return raw.decode("utf-8"), None, None
    except UnicodeDecodeError as exc:
        message = f"line {number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start})"
    try:  # the id, when the bad bytes are elsewhere: so the error line can be matched to its input
        data = json.loads(raw.decode("utf-8", errors="replace"))
        ident = data.get("id") if isinstance(data, dict) else None
    except ValueError:
        ident = None
    return None, (None if isinstance(ident, str) and "\ufffd" in ident else ident), message


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
    for key in _BATCH_FIELDS:
        problem = invalid_text(data[key]) if isinstance(data.get(key), str) else None
        if problem:
            return ident, f"line {number}: '{key}' is {problem}"
    return ident, RetrievalRequest(**{k: data.get(k) for k in _BATCH_FIELDS})


def _answer(retriever, requests: list[RetrievalRequest]) -> list[RetrievalResult | str]:  # type: ignore[no-untyped-def]
    """Results for a chunk; when the chunk fails, each request alone so one bad line costs one line.

    Any exception counts, not only the product's own errors: an input the checks did not foresee
    must not sink the other lines. An unexpected one is logged with its traceback.
    """
    try:
        return list(retriever.retrieve_batch(requests))
    except Exception as exc:  # noqa: BLE001 - retried line by line below
        log.debug("a batch chunk failed (%s); answering its %d lines one by one", exc, len(requests))
    out: list[RetrievalResult | str] = []
    for request in requests:
        try:
            out.append(retriever.retrieve_batch([request])[0])
        except Nl2SqlError as exc:
            out.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - one line's failure becomes its error line
            log.exception("retrieval failed on a batch line")
            out.append(f"retrieval failed ({type(exc).__name__}: {exc})")
    return out


def run_batch(retriever, source: Iterable[bytes], sink: TextIO) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Answer every line of ``source`` (raw bytes) into ``sink``, one output line each; returns
    (answered, errors)."""
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

    for number, raw in enumerate(source, start=1):
        text, ident, error = _decode(raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw, number)
        if text is None:
            pending.append((number, ident, error))
        elif not text.strip():
            pending.append((number, None, f"line {number}: empty line"))
        else:
            ident, item = _parse_line(text, number)
            pending.append((number, ident, item))
        if len(pending) >= BATCH_CHUNK:
            flush()
    flush()
    return answered, errors


def _usage_error(message: str) -> int:
    print(f"nl2sql-assets retrieve: error: {message}", file=sys.stderr)
    return 2


def retriever_config(recall_target: float | None) -> RetrieverConfig:
    """The retriever's configuration with ``--recall-target`` applied (tables and columns alike).

    Raises:
        RetrievalError: the target is not strictly between 0 and 1 (or not a number).
    """
    if recall_target is None:
        return RetrieverConfig()
    if not 0.0 < recall_target < 1.0:  # NaN fails this too
        raise RetrievalError(f"--recall-target must be a probability strictly between 0 and 1 "
                             f"(e.g. 0.9), got {recall_target}")
    return RetrieverConfig(recall_target=recall_target, column_recall_target=recall_target)


def _open_retriever(config: RetrieverConfig) -> SchemaRetriever:
    """The retriever on the environment's settings, imported only once the input was checked:
    Chroma's import alone takes most of a second, which a refused command should not spend."""
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    return SchemaRetriever.from_settings(Settings.from_env(), config=config)


def _run_batch_files(source_path: Path, out_path: Path, config: RetrieverConfig) -> int:
    """Open both files before the models load, so a bad path costs one message and no wait."""
    if not source_path.is_file():
        return _usage_error(f"batch input {source_path} not found")
    if out_path.is_dir():
        return _usage_error(f"batch output {out_path} is a directory")
    try:
        source = source_path.open("rb")
    except OSError as exc:
        return _usage_error(f"batch input {source_path} cannot be read ({exc.strerror or exc})")
    try:
        # json.dumps writes ASCII; backslashreplace is the belt to its braces
        sink = out_path.open("w", encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        source.close()
        return _usage_error(f"batch output {out_path} cannot be written ({exc.strerror or exc})")
    with source, sink, _open_retriever(config) as retriever:
        answered, errors = run_batch(retriever, source, sink)
    print(f"{answered} answered, {errors} error lines -> {out_path}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    config = retriever_config(getattr(args, "recall_target", None))
    if args.batch:
        if args.question:
            return _usage_error("give a question or --batch, not both")
        if not args.out:
            return _usage_error("--batch needs --out OUT.jsonl")
        return _run_batch_files(Path(args.batch), Path(args.out), config)
    if args.question is None or not args.question.strip():
        raise RetrievalError("the question is empty (give a question, or --batch IN.jsonl --out OUT.jsonl)")
    for name in ("question", "evidence", "datasource", "tenant", "schema_version"):
        value = getattr(args, name)
        problem = invalid_text(value) if isinstance(value, str) else None
        if problem:  # undecodable bytes in argv: say so before loading the models
            raise RetrievalError(f"the {name.replace('_', ' ')} is {problem}")
    with _open_retriever(config) as retriever:
        result = retriever.retrieve(args.question, datasource=args.datasource, tenant=args.tenant,
                                    schema_version=args.schema_version, evidence=args.evidence)
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        print(format_result(result))
    return 0
