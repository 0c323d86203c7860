"""Asset checks, partitioned like their assets and evaluated in the asset's own step.

On ``schema_chunks`` (blocking: a failure fails the step, so ``chroma_collection`` never
replaces the live index with that set): every table and column has exactly one chunk; no
chunk shows personal data. On ``chroma_collection`` (after the write, ERROR severity): the
stored model identity and dimension equal the provider's; every table is found by a search
for its own name within the top 3; Chroma holds exactly the ids the snapshot implies.

Why in the step rather than as separate ``@asset_check`` ops: the checks need the snapshot
and chunk set the asset has just built, so they reuse them instead of loading and rebuilding
them once per check, and a run has 2 steps instead of 9 (each step costs several event-log
writes). The price: a check cannot be re-run alone; re-materialize the partition instead.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.defs.verify import chunk_coverage, compare_ids, pii_findings
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.models import ChunkSet, ModelIdentity, SearchFilter
from nl2sql_assets.schema.models import SchemaSnapshot

if TYPE_CHECKING:
    from nl2sql_assets.indexing.vector_store import ChromaVectorStore

SEARCH_TOP_K = 3
MAX_LISTED = 20


def _spec(name: str, asset: str, description: str, *, blocking: bool) -> dg.AssetCheckSpec:
    import warnings

    with warnings.catch_warnings():  # partitioned checks are a preview feature in Dagster 1.13
        warnings.simplefilter("ignore", category=dg.PreviewWarning)
        return dg.AssetCheckSpec(name, asset=asset, description=description, blocking=blocking,
                                 partitions_def=datasource_versions_partitions)


def schema_chunks_check_specs() -> list[dg.AssetCheckSpec]:
    return [
        _spec("chunks_cover_snapshot", "schema_chunks",
              "One table chunk per table and one column chunk per column of the snapshot.", blocking=True),
        _spec("no_pii_values_in_chunks", "schema_chunks",
              "No chunk shows personal data: no value of a PII column, nothing that looks like an e-mail, "
              "phone, card number, IBAN, national id or IP address.", blocking=True),
    ]


def chroma_collection_check_specs() -> list[dg.AssetCheckSpec]:
    return [
        _spec("vector_dimension_matches_provider", "chroma_collection",
              "The collection's stored model identity (provider, model, dimension) equals the configured "
              "provider's.", blocking=False),
        _spec("tables_found_by_name", "chroma_collection",
              f"Every table is found by a search for its own name within the top {SEARCH_TOP_K} table chunks.",
              blocking=False),
        _spec("chroma_matches_schema_store", "chroma_collection",
              "The chunk ids in Chroma for this version equal those the SchemaStore's snapshot implies.",
              blocking=False),
    ]


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" (+{len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else "")


CHECK_ASSETS = {
    "chunks_cover_snapshot": "schema_chunks",
    "no_pii_values_in_chunks": "schema_chunks",
    "vector_dimension_matches_provider": "chroma_collection",
    "tables_found_by_name": "chroma_collection",
    "chroma_matches_schema_store": "chroma_collection",
}


def _result(name: str, passed: bool, metadata: dict[str, object]) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(asset_key=CHECK_ASSETS[name], check_name=name, passed=passed,
                               severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


def check_chunks_cover_snapshot(snapshot: SchemaSnapshot, chunk_set: ChunkSet) -> dg.AssetCheckResult:
    report = chunk_coverage(snapshot, chunk_set)
    metadata: dict[str, object] = {
        "tables": report.tables, "columns": report.columns,
        "table_chunks": report.table_chunks, "column_chunks": report.column_chunks,
    }
    problems = {
        "missing_tables": report.missing_tables, "missing_columns": report.missing_columns,
        "duplicate_tables": report.duplicate_tables, "duplicate_columns": report.duplicate_columns,
        "extra_tables": report.extra_tables, "extra_columns": report.extra_columns,
    }
    metadata.update({k: _listed(v) for k, v in problems.items() if v})
    return _result("chunks_cover_snapshot", report.ok, metadata)


def check_no_pii_values(snapshot: SchemaSnapshot, chunk_set: ChunkSet) -> dg.AssetCheckResult:
    findings = pii_findings(snapshot, chunk_set)
    metadata: dict[str, object] = {
        "chunks_scanned": len(chunk_set.chunks),
        "pii_columns": sum(c.pii for t in snapshot.tables for c in t.columns),
        "findings": len(findings),
    }
    if findings:  # which chunk and why; never the value itself
        metadata["first_findings"] = dg.MetadataValue.json([f.model_dump() for f in findings[:MAX_LISTED]])
    return _result("no_pii_values_in_chunks", not findings, metadata)


def check_vector_identity(configured: ModelIdentity, stored: ModelIdentity | None) -> dg.AssetCheckResult:
    return _result("vector_dimension_matches_provider", stored is not None and stored == configured, {
        "configured": configured.key,
        "stored": stored.key if stored is not None else "(none)",
        "configured_dimension": configured.dimension,
        "stored_dimension": stored.dimension if stored is not None else 0,
    })


def check_tables_found(vectors: "ChromaVectorStore", snapshot: SchemaSnapshot,
                       schema_version: str) -> dg.AssetCheckResult:
    """Search each table's own name among the version's table chunks (one batched query)."""
    ds = snapshot.datasource_id
    where = SearchFilter(datasource_ids=[ds], versions={ds: schema_version}, chunk_types=["schema.table"])
    missed: list[str] = []
    try:
        hits_per_table = vectors.search_many([t.name for t in snapshot.tables], k=SEARCH_TOP_K,
                                             where=where) if snapshot.tables else []
    except Nl2SqlError as exc:
        return _result("tables_found_by_name", False, {"error": str(exc)})
    for table, hits in zip(snapshot.tables, hits_per_table, strict=True):
        found = {((h.metadata.get("schema_name") or None), h.metadata.get("table")) for h in hits}
        if (table.schema_name, table.name) not in found:
            missed.append(table.qualified_name)
    metadata: dict[str, object] = {"tables": len(snapshot.tables), "found": len(snapshot.tables) - len(missed),
                                   "top_k": SEARCH_TOP_K}
    if missed:
        metadata["missed"] = _listed(missed)
    return _result("tables_found_by_name", not missed, metadata)


def check_chroma_ids(chunk_set: ChunkSet, present: set[str]) -> dg.AssetCheckResult:
    comparison = compare_ids([c.id for c in chunk_set.chunks], present)
    metadata: dict[str, object] = {"expected": comparison.expected, "present": comparison.present}
    if comparison.missing:
        metadata["missing"] = _listed(comparison.missing)
    if comparison.unexpected:
        metadata["unexpected"] = _listed(comparison.unexpected)
    return _result("chroma_matches_schema_store", comparison.ok, metadata)
