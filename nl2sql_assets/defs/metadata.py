"""What the UI shows for each asset: the pipeline's outcomes as materialization metadata.

No URL, no credential and no sampled value ever appears here.

The UI plots numeric metadata across partitions, and partitions of every datasource share one
line (156 tables, then 152, then 60: three databases, not a shrinking one). So the figures worth
plotting are also recorded as ``<datasource>/<key>`` (:func:`datasource_keyed`), one line per
datasource; the generic keys stay for whoever reads one partition.
"""

from __future__ import annotations

import dagster as dg

from nl2sql_assets.indexing.models import CHUNK_TYPES, ChunkSet
from nl2sql_assets.pipeline.names import CHUNK_SET_HASH_KEY
from nl2sql_assets.pipeline.steps import ChunkOutcome, EnrichOutcome, PublishOutcome, SnapshotOutcome

#: The materialization figures also recorded per datasource.
PLOTTED = ("tables", "columns", "foreign_keys", "pii_columns", "read_seconds", "chunks_total", "chunks_embedded",
           "chunks_from_cache", "chunks_deleted", "refresh_seconds")


def datasource_keyed(datasource_id: str, metadata: dict[str, object],
                     keys: tuple[str, ...] | None = None) -> dict[str, object]:
    """``metadata`` plus ``<datasource>/<key>`` for its numeric entries (those in ``keys`` when given).

    >>> datasource_keyed("shop", {"tables": 3, "ok": True, "model": "m", "chunks_total": 17}, ("tables",))
    {'tables': 3, 'ok': True, 'model': 'm', 'chunks_total': 17, 'shop/tables': 3}
    """
    extra = {f"{datasource_id}/{k}": v for k, v in metadata.items()
             if (keys is None or k in keys) and _numeric(v)}
    return {**metadata, **extra}


def _numeric(value: object) -> bool:
    if isinstance(value, dg.IntMetadataValue | dg.FloatMetadataValue):
        return True
    return isinstance(value, int | float) and not isinstance(value, bool)


def chunk_count_metadata(chunk_set: ChunkSet) -> dict[str, int]:
    """``chunks_total`` and ``chunks_<type>`` for every chunk type (zeros included)."""
    counts = chunk_set.counts()
    out = {"chunks_total": len(chunk_set.chunks)}
    for chunk_type in CHUNK_TYPES:
        out[f"chunks_{chunk_type.split('.', 1)[1]}"] = counts.get(chunk_type, 0)
    return out


def snapshot_metadata(captured: SnapshotOutcome) -> dict[str, object]:
    """The registered snapshot, the registration verdict and a markdown diff of what changed."""
    snapshot = captured.snapshot
    return datasource_keyed(snapshot.datasource_id, {
        "datasource": snapshot.datasource_id,
        "schema_version": snapshot.schema_version or "",
        "fingerprint": snapshot.fingerprint,
        "metadata_hash": snapshot.metadata_hash,
        "dialect": snapshot.datasource.dialect,
        "tenant": snapshot.datasource.tenant,
        "tables": len(snapshot.tables),
        "columns": snapshot.column_count,
        "foreign_keys": snapshot.foreign_key_count,
        "pii_columns": sum(c.pii for t in snapshot.tables for c in t.columns),
        "captured_at": snapshot.captured_at.isoformat(),
        "registration": captured.status,
        "previous_version": captured.previous_version or "",
        "diff_summary": captured.diff.summary(),
        "diff": dg.MetadataValue.md(captured.diff.to_markdown()),
        "warnings": captured.warnings,
        "read_seconds": round(captured.read_seconds, 3),
    }, PLOTTED)


def enriched_metadata(enriched: EnrichOutcome) -> dict[str, object]:
    record = enriched.record
    return {
        "datasource": enriched.snapshot.datasource_id,
        "schema_version": enriched.snapshot.schema_version or "",
        "enrichment": enriched.status,
        "enrichment_reason": enriched.reason or "",
        "enrichment_model": (record.model if record and record.model else ""),
        "tables_described": record.tables_described if record else 0,
        "columns_described": record.columns_described if record else 0,
        "synonyms_added": record.synonyms_added if record else 0,
        "metadata_hash": enriched.snapshot.metadata_hash,
        "seconds": round(enriched.seconds, 3),
    }


def chunks_metadata(checked: ChunkOutcome) -> dict[str, object]:
    chunk_set = checked.chunk_set
    return datasource_keyed(chunk_set.datasource_id, {
        "datasource": chunk_set.datasource_id,
        "schema_version": chunk_set.schema_version,
        "tenant": chunk_set.tenant_id,
        **chunk_count_metadata(chunk_set),
        "chunk_counts": dg.MetadataValue.json(chunk_set.counts()),
        CHUNK_SET_HASH_KEY: checked.chunk_set_hash,
        "seconds": round(checked.seconds, 4),
    }, PLOTTED)


def collection_metadata(checked: ChunkOutcome, published: PublishOutcome) -> dict[str, object]:
    chunk_set, report = checked.chunk_set, published.report
    version = chunk_set.schema_version
    return datasource_keyed(chunk_set.datasource_id, {
        "datasource": chunk_set.datasource_id,
        "schema_version": version,
        "live_version": version,
        "tenant": chunk_set.tenant_id,
        **chunk_count_metadata(chunk_set),
        "chunks_unchanged": report.unchanged,
        "chunks_upserted": report.upserted,
        "chunks_deleted": report.deleted,
        "chunks_embedded": report.embedded,
        "chunks_from_cache": report.from_cache,
        "chunks_reused": report.reused,
        "generation": report.generation,
        "embedding_provider": report.model.provider,
        "embedding_model": report.model.model,
        "embedding_dimension": report.model.dimension,
        "embedding_identity": report.model.key,
        "keep_versions": published.keep_versions,
        "kept_versions": dg.MetadataValue.json([*published.kept_versions, version]),
        "evicted_versions": dg.MetadataValue.json(list(published.evicted_versions)),
        CHUNK_SET_HASH_KEY: published.chunk_set_hash,
        "refresh_seconds": round(report.seconds, 3),
        "writer_wait_seconds": report.waited_s,  # waited for another writer of the embedded store
    }, PLOTTED)
