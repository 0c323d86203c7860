"""Asset checks, partitioned like their assets.

On ``schema_chunks`` (blocking: a failure stops the run before ``chroma_collection`` replaces
the live index): every table and column has exactly one chunk; no chunk shows personal data.
On ``chroma_collection`` (after the write, ERROR severity): the stored vectors' dimension and
model equal the provider's; every table is found by a search for its own name within the top
3; the ids in Chroma equal the ids the SchemaStore's snapshot implies.
"""


import warnings

import dagster as dg

from nl2sql_assets.defs.assets import (
    _build_chunk_set,
    _load,
    _partition,
    chroma_collection,
    schema_chunks,
)
from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.defs.verify import chunk_coverage, compare_ids, pii_findings
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.models import SearchFilter
from resources.embeddings import EmbeddingsResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

SEARCH_TOP_K = 3
MAX_LISTED = 20

# Partitioned asset checks are a preview feature in Dagster 1.13; we rely on them knowingly.
warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*")


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" (+{len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else "")


@dg.asset_check(
    asset=schema_chunks,
    blocking=True,
    partitions_def=datasource_versions_partitions,
    description="One table chunk per table and one column chunk per column of the snapshot.",
)
def chunks_cover_snapshot(
    context: dg.AssetCheckExecutionContext, schema_store: SchemaStoreResource,
) -> dg.AssetCheckResult:
    datasource_id, version = _partition(context)
    snapshot = _load(schema_store, datasource_id, version)
    report = chunk_coverage(snapshot, _build_chunk_set(snapshot))
    problems = {
        "missing_tables": report.missing_tables, "missing_columns": report.missing_columns,
        "duplicate_tables": report.duplicate_tables, "duplicate_columns": report.duplicate_columns,
        "extra_tables": report.extra_tables, "extra_columns": report.extra_columns,
    }
    metadata: dict[str, object] = {
        "tables": report.tables, "columns": report.columns,
        "table_chunks": report.table_chunks, "column_chunks": report.column_chunks,
    }
    metadata.update({k: _listed(v) for k, v in problems.items() if v})
    return dg.AssetCheckResult(passed=report.ok, severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


@dg.asset_check(
    asset=schema_chunks,
    blocking=True,
    partitions_def=datasource_versions_partitions,
    description=(
        "No chunk shows personal data: no value of a PII column, nothing that looks like an e-mail, "
        "phone, card number, IBAN, national id or IP address."
    ),
)
def no_pii_values_in_chunks(
    context: dg.AssetCheckExecutionContext, schema_store: SchemaStoreResource,
) -> dg.AssetCheckResult:
    datasource_id, version = _partition(context)
    snapshot = _load(schema_store, datasource_id, version)
    chunk_set = _build_chunk_set(snapshot)
    findings = pii_findings(snapshot, chunk_set)
    metadata: dict[str, object] = {
        "chunks_scanned": len(chunk_set.chunks),
        "pii_columns": sum(c.pii for t in snapshot.tables for c in t.columns),
        "findings": len(findings),
    }
    if findings:  # which chunk and why; never the value itself
        metadata["first_findings"] = dg.MetadataValue.json(
            [f.model_dump() for f in findings[:MAX_LISTED]])
    return dg.AssetCheckResult(passed=not findings, severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


@dg.asset_check(
    asset=chroma_collection,
    partitions_def=datasource_versions_partitions,
    description="The collection's stored model identity (provider, model, dimension) equals the configured provider's.",
)
def vector_dimension_matches_provider(
    context: dg.AssetCheckExecutionContext, embeddings: EmbeddingsResource, vector_store: VectorStoreResource,
) -> dg.AssetCheckResult:
    service = embeddings.get_service()
    configured = service.identity
    stored = vector_store.get_store(service).stored_identity()
    passed = stored is not None and stored == configured
    return dg.AssetCheckResult(passed=passed, severity=dg.AssetCheckSeverity.ERROR, metadata={
        "configured": configured.key,
        "stored": stored.key if stored is not None else "(none)",
        "configured_dimension": configured.dimension,
        "stored_dimension": stored.dimension if stored is not None else 0,
    })


@dg.asset_check(
    asset=chroma_collection,
    partitions_def=datasource_versions_partitions,
    description=f"Every table is found by a search for its own name within the top {SEARCH_TOP_K} table chunks.",
)
def tables_found_by_name(
    context: dg.AssetCheckExecutionContext,
    schema_store: SchemaStoreResource,
    embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource,
) -> dg.AssetCheckResult:
    datasource_id, version = _partition(context)
    snapshot = _load(schema_store, datasource_id, version)
    vectors = vector_store.get_store(embeddings.get_service())
    where = SearchFilter(datasource_ids=[datasource_id], versions={datasource_id: version},
                         chunk_types=["schema.table"])
    missed: list[str] = []
    try:
        for table in snapshot.tables:
            hits = vectors.search(table.name, k=SEARCH_TOP_K, where=where)
            names = {(h.metadata.get("schema_name") or None, h.metadata.get("table")) for h in hits}
            if (table.schema_name, table.name) not in names and (None, table.name) not in names:
                missed.append(table.qualified_name)
    except Nl2SqlError as exc:
        return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.ERROR,
                                   metadata={"error": str(exc)})
    metadata: dict[str, object] = {"tables": len(snapshot.tables), "found": len(snapshot.tables) - len(missed)}
    if missed:
        metadata["missed"] = _listed(missed)
    return dg.AssetCheckResult(passed=not missed, severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


@dg.asset_check(
    asset=chroma_collection,
    partitions_def=datasource_versions_partitions,
    description="The chunk ids in Chroma for this version equal those the SchemaStore's snapshot implies.",
)
def chroma_matches_schema_store(
    context: dg.AssetCheckExecutionContext,
    schema_store: SchemaStoreResource,
    embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource,
) -> dg.AssetCheckResult:
    datasource_id, version = _partition(context)
    snapshot = _load(schema_store, datasource_id, version)
    expected = [c.id for c in _build_chunk_set(snapshot).chunks]
    present = vector_store.get_store(embeddings.get_service()).list_ids(datasource_id, version)
    comparison = compare_ids(expected, present)
    metadata: dict[str, object] = {"expected": comparison.expected, "present": comparison.present}
    if comparison.missing:
        metadata["missing"] = _listed(comparison.missing)
    if comparison.unexpected:
        metadata["unexpected"] = _listed(comparison.unexpected)
    return dg.AssetCheckResult(passed=comparison.ok, severity=dg.AssetCheckSeverity.ERROR, metadata=metadata)


schema_index_checks = [
    chunks_cover_snapshot,
    no_pii_values_in_chunks,
    vector_dimension_matches_provider,
    tables_found_by_name,
    chroma_matches_schema_store,
]
