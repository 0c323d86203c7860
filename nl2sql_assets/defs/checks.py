"""Asset checks, partitioned like their assets and evaluated in the asset's own step.

On ``schema_chunks`` (blocking: a failure fails the step, so ``chroma_collection`` never
replaces the live index with that set): every table and column has exactly one chunk; no
chunk shows personal data. On ``chroma_collection`` (after the write, ERROR severity): the
stored model identity and dimension equal the provider's; every table is found by a search
for its own name within the top 3; Chroma holds exactly the ids the snapshot implies. Also on
``chroma_collection``, ``retrieval_quality`` scores the datasource's own gold questions
(:mod:`nl2sql_assets.pipeline.evaluation`) with the severity its ``evaluation`` entry names. The
findings come from the pipeline's outcomes (:mod:`nl2sql_assets.pipeline.steps`); this
module only shapes them for the UI.

Why in the step rather than as separate ``@asset_check`` ops: the checks need the snapshot
and chunk set the asset has just built, so they reuse them instead of loading and rebuilding
them once per check, and a run has 2 steps instead of 9 (each step costs several event-log
writes). The price: a check cannot be re-run alone; re-materialize the partition instead.
"""

import warnings
from collections.abc import Sequence

import dagster as dg

from nl2sql_assets.defs.metadata import datasource_keyed
from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.pipeline import names
from nl2sql_assets.pipeline.evaluation import EvaluationReport
from nl2sql_assets.pipeline.steps import SEARCH_TOP_K, ChunkOutcome, PublishOutcome

MAX_LISTED = 20

_DESCRIPTIONS = {
    names.CHUNKS_COVER_SNAPSHOT: "One table chunk per table and one column chunk per column of the snapshot.",
    names.NO_PII_VALUES: ("No chunk shows personal data: no value of a PII column, nothing that looks like an "
                          "e-mail, phone, card number, IBAN, national id or IP address."),
    names.VECTOR_IDENTITY: ("The collection's stored model identity (provider, model, dimension) equals the "
                            "configured provider's."),
    names.TABLES_FOUND: f"Every table is found by a search for its own name within the top {SEARCH_TOP_K} table chunks.",
    names.CHROMA_MATCHES_STORE: "The chunk ids in Chroma for this version equal those the SchemaStore's snapshot implies.",
    names.RETRIEVAL_QUALITY: ("The datasource's evaluation questions (datasources file), asked of this version: the "
                              "share whose gold tables were all sent meets min_table_recall (and column recall "
                              "min_column_recall). Severity as configured: warn or error."),
}


def check_specs(asset: str) -> list[dg.AssetCheckSpec]:
    """The partitioned check specs of one asset; blocking on ``schema_chunks``."""
    with warnings.catch_warnings():  # partitioned checks are a preview feature in Dagster 1.13
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        return [dg.AssetCheckSpec(name, asset=asset, description=_DESCRIPTIONS[name],
                                  blocking=asset == names.SCHEMA_CHUNKS, partitions_def=datasource_versions_partitions)
                for name, on in names.CHECK_ASSETS.items() if on == asset]


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" (+{len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else "")


def _result(name: str, passed: bool, metadata: dict[str, object]) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(asset_key=names.CHECK_ASSETS[name], check_name=name, passed=passed,
                               severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


def per_datasource(datasource_id: str, results: Sequence[dg.AssetCheckResult]) -> list[dg.AssetCheckResult]:
    """The results with their numeric metadata also under ``<datasource>/<key>``: a check's plot
    across partitions then has one line per datasource instead of one mixing them all."""
    return [dg.AssetCheckResult(passed=r.passed, asset_key=r.asset_key, check_name=r.check_name,
                                severity=r.severity, description=r.description,
                                metadata=datasource_keyed(datasource_id, dict(r.metadata)))
            for r in results]


def chunk_check_results(checked: ChunkOutcome, pii_columns: int) -> list[dg.AssetCheckResult]:
    """The two blocking checks of ``schema_chunks``."""
    report = checked.coverage
    coverage: dict[str, object] = {
        "tables": report.tables, "columns": report.columns,
        "table_chunks": report.table_chunks, "column_chunks": report.column_chunks,
    }
    problems = {
        "missing_tables": report.missing_tables, "missing_columns": report.missing_columns,
        "duplicate_tables": report.duplicate_tables, "duplicate_columns": report.duplicate_columns,
        "extra_tables": report.extra_tables, "extra_columns": report.extra_columns,
    }
    coverage.update({k: _listed(v) for k, v in problems.items() if v})
    pii: dict[str, object] = {"chunks_scanned": len(checked.chunk_set.chunks), "pii_columns": pii_columns,
                              "findings": len(checked.pii)}
    if checked.pii:  # which chunk and why; never the value itself
        pii["first_findings"] = dg.MetadataValue.json([f.model_dump() for f in checked.pii[:MAX_LISTED]])
    return [_result(names.CHUNKS_COVER_SNAPSHOT, report.ok, coverage),
            _result(names.NO_PII_VALUES, not checked.pii, pii)]


def publish_check_results(published: PublishOutcome) -> list[dg.AssetCheckResult]:
    """The three checks of ``chroma_collection``, after the write."""
    configured, stored = published.configured_identity, published.stored_identity
    identity = _result(names.VECTOR_IDENTITY, stored is not None and stored == configured, {
        "configured": configured.key,
        "stored": stored.key if stored is not None else "(none)",
        "configured_dimension": configured.dimension,
        "stored_dimension": stored.dimension if stored is not None else 0,
    })
    found = published.tables_found
    if found.error is not None:
        tables = _result(names.TABLES_FOUND, False, {"error": found.error})
    else:
        meta: dict[str, object] = {"tables": found.tables, "found": found.tables - len(found.missed),
                                   "top_k": found.top_k}
        if found.missed:
            meta["missed"] = _listed(found.missed)
        tables = _result(names.TABLES_FOUND, found.ok, meta)
    comparison = published.ids
    ids: dict[str, object] = {"expected": comparison.expected, "present": comparison.present}
    if comparison.missing:
        ids["missing"] = _listed(comparison.missing)
    if comparison.unexpected:
        ids["unexpected"] = _listed(comparison.unexpected)
    return [identity, tables, _result(names.CHROMA_MATCHES_STORE, comparison.ok, ids)]


def retrieval_figures(report: EvaluationReport) -> dict[str, object]:
    """The numeric figures, as floats and ints under stable keys, so the UI plots them version after version."""
    figures: dict[str, object] = {
        "questions": report.questions, "questions_passed": report.questions_passed,
        "table_recall": dg.MetadataValue.float(report.table_recall),
        "table_hit_rate": dg.MetadataValue.float(report.table_hit_rate),
        "tables_sent_avg": dg.MetadataValue.float(report.tables_sent_avg),
        "columns_sent_avg": dg.MetadataValue.float(report.columns_sent_avg),
        "fallbacks": report.fallbacks,
    }
    if report.column_recall is not None:
        figures["column_recall"] = dg.MetadataValue.float(report.column_recall)
    return figures


def retrieval_quality_result(report: EvaluationReport | None) -> dg.AssetCheckResult:
    """``retrieval_quality``: WARN or ERROR severity as configured; passed with ``questions=0`` when
    the datasource has no evaluation questions (every declared check must be yielded)."""
    name = names.RETRIEVAL_QUALITY
    if report is None:
        return dg.AssetCheckResult(asset_key=names.CHECK_ASSETS[name], check_name=name, passed=True,
                                   severity=dg.AssetCheckSeverity.WARN,
                                   description="no evaluation questions for this datasource in the datasources file",
                                   metadata={"questions": 0})
    metadata: dict[str, object] = {
        **retrieval_figures(report),
        "min_table_recall": dg.MetadataValue.float(report.min_table_recall),
        "severity": report.severity,
        "seconds": dg.MetadataValue.float(report.seconds),
    }
    if report.min_column_recall is not None:
        metadata["min_column_recall"] = dg.MetadataValue.float(report.min_column_recall)
    misses = report.misses_markdown()
    if misses:
        metadata["misses"] = dg.MetadataValue.md(misses)
    if report.error is not None:
        metadata["error"] = report.error
        description = f"evaluation failed: {report.error}"
    else:
        description = (f"{report.questions_passed}/{report.questions} questions found every gold table "
                       f"(table recall {report.table_recall:.2f}, minimum {report.min_table_recall:.2f})")
    severity = dg.AssetCheckSeverity.WARN if report.severity == "warn" else dg.AssetCheckSeverity.ERROR
    return dg.AssetCheckResult(asset_key=names.CHECK_ASSETS[name], check_name=name, passed=report.passed,
                               severity=severity, description=description, metadata=metadata)
