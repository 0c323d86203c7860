"""Retrieval quality of one schema version: a datasource's own gold questions, scored.

The datasources file may give an entry ``evaluation.questions`` (each with the tables, and
optionally the columns, a planner needs). After a version is made live, the
``retrieval_quality`` check asks the real retriever every question, scoped to that datasource
and version, and scores what it sent against the gold names. The figures are recorded per
partition, so a team sees retrieval quality version after version and, with
``severity: error``, a version whose retrieval got worse fails its check with ERROR severity.
With ``severity: block`` the questions are asked *before* the version goes live
(:func:`gate_version`, on a scratch copy of its index) and a failing version is never made live.

Plain Python (no Dagster): :func:`evaluate_retrieval` takes anything with ``retrieve_batch``,
so the scoring is testable without stores, and :func:`evaluate_version` wires the real
:class:`~nl2sql_assets.retrieval.retriever.SchemaRetriever` over a run's stores.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from time import perf_counter
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.config import EvaluationConfig, EvaluationQuestion, Settings
from nl2sql_assets.errors import QualityGateError
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.models import ChunkSet
from nl2sql_assets.indexing.vector_store import VectorStore, build_vector_store
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrievalResult, RetrievedTable
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.protocol import SchemaStore

log = logging.getLogger(__name__)

#: Fallbacks that send a schema the retriever chose; any other fallback sends the full schema
#: because selection failed, and would "find" every table by sending all of them.
_SELECTED_FALLBACKS = frozenset({None, "small_schema"})
#: Misses listed in the markdown at most (the figures still count every question).
MAX_MISSES_SHOWN = 25


class Retrieves(Protocol):
    """What the evaluation needs from a retriever (:class:`SchemaRetriever` has it)."""

    def retrieve_batch(self, requests: Sequence[RetrievalRequest]) -> list[RetrievalResult]: ...


class QuestionOutcome(BaseModel):
    """One gold question: what the retriever sent, and which gold names it left out."""

    model_config = ConfigDict(frozen=True)

    question: str
    gold_tables: list[str]
    gold_columns: list[str]
    missed_tables: list[str]
    missed_columns: list[str]
    tables_sent: list[str]
    columns_sent: int
    fallback: str | None = None

    @property
    def tables_ok(self) -> bool:
        """Every gold table was sent (on its own merit, not through a full-schema fallback)."""
        return not self.missed_tables


class EvaluationReport(BaseModel):
    """The scored questions of one (datasource, version) and the verdict against the thresholds.

    ``table_recall`` is the share of questions whose gold tables were all sent (the thresholded
    figure); ``table_hit_rate`` the share of all gold tables sent; ``column_recall`` the share of
    gold columns sent (None when no question names columns).
    """

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    severity: Literal["warn", "error", "block"]
    min_table_recall: float
    min_column_recall: float | None
    questions: int
    questions_passed: int
    table_recall: float
    table_hit_rate: float
    gold_columns: int
    column_recall: float | None
    tables_sent_avg: float
    columns_sent_avg: float
    fallbacks: int
    outcomes: list[QuestionOutcome]
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """No error, and every threshold met (a column threshold only when columns are named)."""
        if self.error is not None or self.table_recall < self.min_table_recall:
            return False
        return self.min_column_recall is None or self.column_recall is None or self.column_recall >= self.min_column_recall

    def misses_markdown(self) -> str:
        """The questions that missed a gold table or column, as a markdown table ('' when none)."""
        missed = [o for o in self.outcomes if o.missed_tables or o.missed_columns]
        if not missed:
            return ""
        lines = ["| question | missed tables | missed columns | tables sent |", "|---|---|---|---|"]
        for o in missed[:MAX_MISSES_SHOWN]:
            sent = ", ".join(o.tables_sent) or "-"
            if o.fallback not in _SELECTED_FALLBACKS:
                sent = f"full schema ({o.fallback})"
            lines.append(f"| {_cell(o.question)} | {_cell(', '.join(o.missed_tables) or '-')} | "
                         f"{_cell(', '.join(o.missed_columns) or '-')} | {_cell(sent)} |")
        if len(missed) > MAX_MISSES_SHOWN:
            lines.append(f"\n(+{len(missed) - MAX_MISSES_SHOWN} more)")
        return "\n".join(lines)


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _table_matches(gold: str, table: RetrievedTable) -> bool:
    """``orders`` matches a sent table of that name in any schema; ``main.orders`` only in ``main``."""
    schema, _, name = gold.lower().rpartition(".")
    if name != table.name.lower():
        return False
    return not schema or schema == (table.schema_ or "").lower()


def score_question(question: EvaluationQuestion, result: RetrievalResult) -> QuestionOutcome:
    """Which gold tables and columns the result left out.

    A full-schema fallback (selection failed) earns no credit: every gold name counts as missed.

    >>> from nl2sql_assets.retrieval.models import RetrievedTable as T
    >>> q = EvaluationQuestion(question="q", tables=["orders", "customers"], columns=["orders.total"])
    >>> r = RetrievalResult(question="q", tables=[T(name="orders", schema="main", score=0.9, columns=["total"])])
    >>> o = score_question(q, r)
    >>> (o.missed_tables, o.missed_columns, o.tables_sent)
    (['customers'], [], ['main.orders'])
    """
    selected = result.fallback in _SELECTED_FALLBACKS
    tables = result.tables if selected else []
    missed_tables = [g for g in question.tables if not any(_table_matches(g, t) for t in tables)]
    missed_columns = []
    for gold in question.columns:
        table_name, _, column = gold.rpartition(".")
        if not any(_table_matches(table_name, t) and column.lower() in {c.lower() for c in t.columns}
                   for t in tables):
            missed_columns.append(gold)
    return QuestionOutcome(
        question=question.question, gold_tables=list(question.tables), gold_columns=list(question.columns),
        missed_tables=missed_tables, missed_columns=missed_columns,
        tables_sent=[f"{t.schema_}.{t.name}" if t.schema_ else t.name for t in result.tables],
        columns_sent=sum(len(t.columns) for t in result.tables), fallback=result.fallback)


def _share(part: int, whole: int) -> float:
    """``part / whole``; 0.0 when nothing was scored (a failed evaluation found nothing)."""
    return round(part / whole, 4) if whole else 0.0


def summarize(datasource_id: str, schema_version: str, config: EvaluationConfig,
              outcomes: Sequence[QuestionOutcome], *, error: str | None = None, seconds: float = 0.0) -> EvaluationReport:
    """The report's figures from scored questions (an ``error`` fails it whatever the figures)."""
    n = len(outcomes)
    gold_tables = sum(len(o.gold_tables) for o in outcomes)
    gold_columns = sum(len(o.gold_columns) for o in outcomes)
    return EvaluationReport(
        datasource_id=datasource_id, schema_version=schema_version, severity=config.severity,
        min_table_recall=config.min_table_recall, min_column_recall=config.min_column_recall,
        questions=n, questions_passed=sum(o.tables_ok for o in outcomes),
        table_recall=_share(sum(o.tables_ok for o in outcomes), n),
        table_hit_rate=_share(gold_tables - sum(len(o.missed_tables) for o in outcomes), gold_tables),
        gold_columns=gold_columns,
        column_recall=(_share(gold_columns - sum(len(o.missed_columns) for o in outcomes), gold_columns)
                       if gold_columns else None),
        tables_sent_avg=round(sum(len(o.tables_sent) for o in outcomes) / n, 3) if n else 0.0,
        columns_sent_avg=round(sum(o.columns_sent for o in outcomes) / n, 3) if n else 0.0,
        fallbacks=sum(o.fallback is not None for o in outcomes), outcomes=list(outcomes),
        error=error, seconds=round(seconds, 3))


def evaluate_retrieval(retriever: Retrieves, datasource_id: str, schema_version: str, config: EvaluationConfig,
                       *, tenant: str | None = None) -> EvaluationReport:
    """Ask every gold question (one batch) scoped to the datasource and version, and score the answers.

    Never raises: the version is already live when this runs, so a retrieval that fails is
    reported (``error``, a failed check) rather than losing the materialization's record.
    """
    started = perf_counter()
    requests = [RetrievalRequest(question=q.question, datasource=datasource_id, tenant=tenant,
                                 schema_version=schema_version) for q in config.questions]
    try:
        results = retriever.retrieve_batch(requests) if requests else []
    except Exception as exc:  # noqa: BLE001 - any failure is the check's finding, not the step's
        log.warning("retrieval evaluation of %s@%s failed: %s", datasource_id, schema_version, exc)
        return summarize(datasource_id, schema_version, config, [], error=f"{type(exc).__name__}: {exc}",
                         seconds=perf_counter() - started)
    outcomes = [score_question(q, r) for q, r in zip(config.questions, results, strict=True)]
    report = summarize(datasource_id, schema_version, config, outcomes, seconds=perf_counter() - started)
    log.info("%s@%s retrieval quality: %d/%d questions found every gold table, column recall %s",
             datasource_id, schema_version, report.questions_passed, report.questions, report.column_recall)
    return report


def evaluate_version(store: SchemaStore, vectors: VectorStore, embeddings: Embeddings, datasource_id: str,
                     schema_version: str, config: EvaluationConfig, *, tenant: str | None = None) -> EvaluationReport:
    """:func:`evaluate_retrieval` through the real retriever over these stores (what ``retrieve`` runs);
    never raises either."""
    try:
        retriever = SchemaRetriever(store, vectors, embeddings)
    except Exception as exc:  # noqa: BLE001 - as in evaluate_retrieval: a finding, not a step failure
        log.warning("retriever for %s@%s unavailable: %s", datasource_id, schema_version, exc)
        return summarize(datasource_id, schema_version, config, [], error=f"{type(exc).__name__}: {exc}")
    return evaluate_retrieval(retriever, datasource_id, schema_version, config, tenant=tenant)


def gate_version(store: SchemaStore, embeddings: Embeddings, chunk_set: ChunkSet,
                 config: EvaluationConfig) -> EvaluationReport:
    """The gold questions asked of a version *before* it goes live, on a scratch copy of its index.

    ``severity: block`` must keep a version whose retrieval got worse from ever serving, so the
    questions cannot be asked of the real store (readers would see the version). The scratch
    store is a real Chroma in a temporary folder, filled from the embedding cache; the schema
    store already holds the version (it is registered before publishing).
    """
    ds, version = chunk_set.datasource_id, chunk_set.schema_version
    with tempfile.TemporaryDirectory(prefix="nl2sql-gate-") as scratch_home:
        scratch = build_vector_store(Settings.of(home=scratch_home), embeddings, collection_name="quality_gate")
        try:
            scratch.refresh_schema_chunks(ds, version, chunk_set.chunks, tenant_id=chunk_set.tenant_id,
                                          keep_versions=[])
            return evaluate_version(store, scratch, embeddings, ds, version, config, tenant=chunk_set.tenant_id)
        finally:
            scratch.close()


def require_quality(report: EvaluationReport) -> None:
    """Raise :class:`QualityGateError` for a failed gate report, with the figures that failed it."""
    if report.passed:
        return
    if report.error is not None:
        reason = f"the gold questions could not be asked ({report.error})"
    else:
        reason = (f"{report.questions_passed}/{report.questions} gold questions found every table "
                  f"(table recall {report.table_recall:.0%}, minimum {report.min_table_recall:.0%})")
        if report.min_column_recall is not None and report.column_recall is not None:
            reason += f", column recall {report.column_recall:.0%} (minimum {report.min_column_recall:.0%})"
    raise QualityGateError(report.datasource_id, report.schema_version,
                           f"retrieval quality gate (severity: block): {reason}; the version was not made "
                           "live and the previous live version keeps serving")
