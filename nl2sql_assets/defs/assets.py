"""The four schema-index assets, one partition per observed (datasource, schema_version).

``schema_snapshot`` -> ``enriched_snapshot`` -> ``schema_chunks`` -> ``chroma_collection``.

Storage choice: no asset passes its value through an IO manager. The SchemaStore is the
system of record for snapshots (``schema_snapshot`` registers there, downstream assets load
the partition's version from it), chunks are a pure, deterministic function of the stored
snapshot (``build_chunks``), and Chroma holds the vectors. So every asset returns a
``MaterializeResult`` with metadata only: nothing big is pickled into ``DAGSTER_HOME``, and any
asset can be re-materialized on any machine that reaches the stores (no shared filesystem).
``schema_chunks`` records a hash of the chunk set its blocking checks approved, and
``chroma_collection`` refuses to write a different set.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at definition time.

import logging
import time
from datetime import UTC, datetime

import dagster as dg

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.defs.checks import (
    check_chroma_ids,
    check_chunks_cover_snapshot,
    check_no_pii_values,
    check_tables_found,
    check_vector_identity,
    chroma_collection_check_specs,
    schema_chunks_check_specs,
)
from nl2sql_assets.defs.partitions import (
    datasource_versions_partitions,
    fingerprint_prefix,
    parse_partition_key,
)
from nl2sql_assets.defs.planning import DETECTED_FINGERPRINT_TAG
from nl2sql_assets.defs.verify import chunk_coverage, chunk_set_hash, pii_findings
from nl2sql_assets.errors import (
    Nl2SqlError,
    PartitionKeyError,
    SchemaDriftError,
    UnobservedVersionError,
)
from nl2sql_assets.indexing.models import CHUNK_TYPES, ChunkSet
from nl2sql_assets.indexing.orchestrator import versions_to_keep
from nl2sql_assets.schema.diff import diff_snapshots
from nl2sql_assets.schema.models import SchemaSnapshot
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

logger = logging.getLogger(__name__)

ASSET_GROUP = "schema_index"
INDEX_POOL = "nl2sql_index"
CHUNK_SET_HASH_KEY = "chunk_set_hash"


def _partition(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> tuple[str, str]:
    """(datasource_id, schema_version) of the running partition; Failure on a malformed key."""
    key = context.partition_key
    try:
        return parse_partition_key(key)
    except PartitionKeyError as exc:
        raise dg.Failure(description=str(exc), metadata={"partition": key}) from None


def _failure(exc: Nl2SqlError, datasource_id: str, schema_version: str, **extra: object) -> dg.Failure:
    """A core error as a step failure whose text and metadata name the partition."""
    metadata: dict[str, object] = {"datasource": datasource_id, "schema_version": schema_version,
                                   "error": type(exc).__name__}
    metadata.update(extra)
    return dg.Failure(description=str(exc), metadata=metadata)


def _tag_run(context: dg.AssetExecutionContext, datasource_id: str, schema_version: str) -> None:
    """Add the datasource/schema_version tags to runs launched without them (UI, backfills)."""
    tags = context.run.tags
    missing = {k: v for k, v in (("datasource", datasource_id), ("schema_version", schema_version))
               if tags.get(k) != v}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)


def _datasource(datasources: DatasourcesResource, datasource_id: str, schema_version: str) -> DatasourceConfig:
    try:
        return datasources.get(datasource_id)
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, schema_version) from None


def _load(schema_store: SchemaStoreResource, datasource_id: str, schema_version: str) -> SchemaSnapshot:
    try:
        return schema_store.get_store().get_snapshot(datasource_id, schema_version)
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, schema_version) from None


def _read_database(config: DatasourceConfig, now: datetime) -> SchemaSnapshot:
    from nl2sql_assets.indexing.orchestrator import read_snapshot

    return read_snapshot(config, now=now)


def _build_chunk_set(snapshot: SchemaSnapshot) -> ChunkSet:
    from nl2sql_assets.indexing.orchestrator import chunks_for

    return chunks_for(snapshot)


def chunk_count_metadata(chunk_set: ChunkSet) -> dict[str, int]:
    """``chunks_total`` and ``chunks_<type>`` for every chunk type (zeros included)."""
    counts = chunk_set.counts()
    out = {"chunks_total": len(chunk_set.chunks)}
    for chunk_type in CHUNK_TYPES:
        out[f"chunks_{chunk_type.split('.', 1)[1]}"] = counts.get(chunk_type, 0)
    return out


def snapshot_metadata(snapshot: SchemaSnapshot) -> dict[str, object]:
    """What a person wants to see about a snapshot; no URL, no credential, no sampled value."""
    return {
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
    }


SCHEMA_SNAPSHOT = dg.AssetKey("schema_snapshot")
ENRICHED_SNAPSHOT = dg.AssetKey("enriched_snapshot")
SCHEMA_CHUNKS = dg.AssetKey("schema_chunks")
CHROMA_COLLECTION = dg.AssetKey("chroma_collection")


def _materialize_snapshot(
    context: dg.AssetExecutionContext, datasources: DatasourcesResource, schema_store: SchemaStoreResource,
    datasource_id: str, version: str,
) -> tuple[SchemaSnapshot, dg.MaterializeResult]:
    """Read the database, check it against the partition's fingerprint, register it."""
    config = _datasource(datasources, datasource_id, version)
    store = schema_store.get_store()
    try:
        stored = {v.schema_version: v for v in store.list_versions(datasource_id)}
        previous = store.get_latest(datasource_id)
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, version) from None
    if version in stored:
        previous = store.get_snapshot(datasource_id, version)  # a refresh: diff against what it was

    started = time.perf_counter()
    try:
        snapshot = _read_database(config, datetime.now(UTC))
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, version) from None
    read_s = time.perf_counter() - started

    expected = fingerprint_prefix(version)
    if snapshot.fingerprint[:8] != expected:
        drift = SchemaDriftError(datasource_id, expected, snapshot.fingerprint)
        raise _failure(drift, datasource_id, version, expected_fingerprint=expected,
                       found_fingerprint=snapshot.fingerprint[:8])
    if version not in stored:
        detected = context.run.tags.get(DETECTED_FINGERPRINT_TAG)
        if detected != snapshot.fingerprint:
            reason = ("it is not in the schema store and this run was not requested by drift detection"
                      if detected is None else
                      "it is not in the schema store and drift detection observed another structure for it")
            raise _failure(UnobservedVersionError(datasource_id, version, reason), datasource_id, version)

    try:
        result = store.register_snapshot(snapshot, schema_version=version)
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, version) from None
    if result.schema_version != version:
        raise dg.Failure(
            description=(f"datasource '{datasource_id}': this structure is already registered as version "
                         f"'{result.schema_version}' (another run got there first); partition '{version}' "
                         "is redundant and was not registered"),
            metadata={"datasource": datasource_id, "schema_version": version,
                      "registered_as": result.schema_version},
        )
    diff = diff_snapshots(previous, result.snapshot)
    metadata = snapshot_metadata(result.snapshot)
    metadata.update({
        "registration": result.status,
        "previous_version": result.previous_version or "",
        "diff_summary": diff.summary(),
        "diff": dg.MetadataValue.md(diff.to_markdown()),
        "warnings": len(snapshot.warnings),
        "read_seconds": round(read_s, 3),
    })
    return result.snapshot, dg.MaterializeResult(asset_key=SCHEMA_SNAPSHOT, metadata=metadata)


def _materialize_enriched(schema_store: SchemaStoreResource, llm: LLMResource, snapshot: SchemaSnapshot,
                          datasource_id: str, version: str) -> tuple[SchemaSnapshot, dg.MaterializeResult]:
    """LLM descriptions where the database has none, or a pass-through that records why."""
    from nl2sql_assets.indexing.enrichment import enrich_schema_snapshot

    started = time.perf_counter()
    outcome = enrich_schema_snapshot(snapshot, llm.factory())
    seconds = time.perf_counter() - started
    enriched = snapshot
    if outcome.status == "enriched":
        try:
            enriched = schema_store.get_store().register_snapshot(outcome.snapshot, schema_version=version).snapshot
        except Nl2SqlError as exc:
            raise _failure(exc, datasource_id, version) from None
    record = outcome.snapshot.enrichment
    return enriched, dg.MaterializeResult(asset_key=ENRICHED_SNAPSHOT, metadata={
        "datasource": datasource_id,
        "schema_version": version,
        "enrichment": outcome.status,
        "enrichment_reason": outcome.reason or "",
        "enrichment_model": (record.model if record and record.model else ""),
        "tables_described": record.tables_described if record else 0,
        "columns_described": record.columns_described if record else 0,
        "synonyms_added": record.synonyms_added if record else 0,
        "metadata_hash": outcome.snapshot.metadata_hash,
        "seconds": round(seconds, 3),
    })


def _materialize_chunks(snapshot: SchemaSnapshot, datasource_id: str,
                        version: str) -> tuple[ChunkSet, list[dg.AssetCheckResult], dg.MaterializeResult]:
    """The chunk set, its two blocking checks, and the result recording the approved set's hash."""
    started = time.perf_counter()
    chunk_set = _build_chunk_set(snapshot)
    seconds = time.perf_counter() - started
    checks = [check_chunks_cover_snapshot(snapshot, chunk_set), check_no_pii_values(snapshot, chunk_set)]
    return chunk_set, checks, dg.MaterializeResult(
        asset_key=SCHEMA_CHUNKS,
        metadata={
            "datasource": datasource_id,
            "schema_version": version,
            "tenant": chunk_set.tenant_id,
            **chunk_count_metadata(chunk_set),
            "chunk_counts": dg.MetadataValue.json(chunk_set.counts()),
            CHUNK_SET_HASH_KEY: chunk_set_hash(chunk_set),
            "seconds": round(seconds, 4),
        },
        check_results=checks,
    )


def _approved_chunk_hash(context: dg.AssetExecutionContext) -> str | None:
    """The chunk-set hash recorded by the partition's latest ``schema_chunks`` materialization."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=SCHEMA_CHUNKS, asset_partitions=[context.partition_key]),
        limit=1,
    ).records
    if not records:
        return None
    materialization = records[0].asset_materialization
    value = materialization.metadata.get(CHUNK_SET_HASH_KEY) if materialization else None
    return getattr(value, "value", None) if value is not None else None


def _refuse_unchecked(datasource_id: str, version: str, snapshot: SchemaSnapshot, chunk_set: ChunkSet,
                      approved: str | None) -> None:
    """Never write a set the blocking checks would reject, nor one other than the checked set.

    ``chroma_collection`` can be materialized alone (UI), after a ``schema_chunks`` whose
    blocking checks failed; so the two pure checks are repeated here before anything is written.
    """
    metadata = {"datasource": datasource_id, "schema_version": version}
    coverage = chunk_coverage(snapshot, chunk_set)
    findings = pii_findings(snapshot, chunk_set)
    if not coverage.ok or findings:
        what = "chunks do not cover the snapshot" if not coverage.ok else f"{len(findings)} chunk(s) show personal data"
        raise dg.Failure(description=(f"datasource '{datasource_id}' version '{version}': {what}; "
                                      "the live index was not replaced"), metadata=metadata)
    actual = chunk_set_hash(chunk_set)
    if approved is not None and approved != actual:
        raise dg.Failure(
            description=(f"datasource '{datasource_id}' version '{version}': the stored snapshot changed since "
                         "schema_chunks was checked; materialize schema_chunks (and its checks) again"),
            metadata={**metadata, "approved_chunk_set_hash": approved, "chunk_set_hash": actual},
        )


def _materialize_collection(
    context: dg.AssetExecutionContext, schema_store: SchemaStoreResource, embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource, snapshot: SchemaSnapshot, chunk_set: ChunkSet, approved: str | None,
    datasource_id: str, version: str,
) -> dg.MaterializeResult:
    """Embed the approved chunk set into Chroma, make it live, apply retention, check the result."""
    store = schema_store.get_store()
    latest = store.get_latest(datasource_id)
    if latest is not None and latest.schema_version != version:
        raise dg.Failure(
            description=(f"datasource '{datasource_id}': version '{version}' is not the latest registered "
                         f"version ('{latest.schema_version}'); an older version is never made live again"),
            metadata={"datasource": datasource_id, "schema_version": version,
                      "latest_version": latest.schema_version or ""},
        )
    _refuse_unchecked(datasource_id, version, snapshot, chunk_set, approved)
    keep = vector_store.retention()
    try:
        # the newest keep-1 other versions stay in Chroma; the refresh deletes every other one
        kept = versions_to_keep(store, datasource_id, version, keep)
        service = embeddings.get_service()
        vectors = vector_store.get_store(service)
        report = vectors.refresh_schema_chunks(datasource_id, version, chunk_set.chunks,
                                               tenant_id=chunk_set.tenant_id, keep_versions=kept)
        evicted = store.apply_retention(datasource_id, keep)
        if evicted:
            vectors.delete_versions(datasource_id, evicted)
        checks = [
            check_vector_identity(service.identity, vectors.stored_identity()),
            check_tables_found(vectors, snapshot, version),
            check_chroma_ids(chunk_set, vectors.list_ids(datasource_id, version)),
        ]
    except Nl2SqlError as exc:
        raise _failure(exc, datasource_id, version) from None
    # the module logger, not context.log: each context.log line is one more event-log write per run,
    # and the materialization's metadata already carries these figures for the UI
    logger.info(
        f"{datasource_id}@{version} live: {report.upserted} upserted, {report.unchanged} unchanged, "
        f"{report.deleted} deleted, {report.embedded} embedded, {report.from_cache} from cache"
        + (f"; evicted {', '.join(evicted)}" if evicted else "")
    )
    return dg.MaterializeResult(
        asset_key=CHROMA_COLLECTION,
        metadata={
            "datasource": datasource_id,
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
            "keep_versions": keep,
            "kept_versions": dg.MetadataValue.json([*kept, version]),
            "evicted_versions": dg.MetadataValue.json(list(evicted)),
            CHUNK_SET_HASH_KEY: chunk_set_hash(chunk_set),
            "refresh_seconds": round(report.seconds, 3),
        },
        check_results=checks,
    )


def _spec(key: dg.AssetKey, kind: str, description: str, deps: list[dg.AssetKey]) -> dg.AssetSpec:
    return dg.AssetSpec(key, deps=deps, group_name=ASSET_GROUP, kinds={kind}, description=description)


SCHEMA_INDEX_SPECS = [
    _spec(SCHEMA_SNAPSHOT, "sql",
          "The partition's schema as read from the database now, checked against the version's "
          "fingerprint and registered in the SchemaStore under that version.", []),
    _spec(ENRICHED_SNAPSHOT, "openai",
          "The snapshot with LLM-written descriptions and synonyms where the database has none "
          "(ENRICHMENT=openai); a pass-through that records why when enrichment is off or fails.",
          [SCHEMA_SNAPSHOT]),
    _spec(SCHEMA_CHUNKS, "python",
          "Typed retrieval chunks (datasource, table, column, relationship, metric) built from the stored "
          "snapshot; blocking checks: full coverage and no personal data.", [ENRICHED_SNAPSHOT]),
]


@dg.multi_asset(
    name="schema_index",
    specs=SCHEMA_INDEX_SPECS,
    check_specs=schema_chunks_check_specs(),
    partitions_def=datasource_versions_partitions,
    can_subset=True,
    description="Snapshot, enrich and chunk one (datasource, schema_version) partition, in one step.",
)
def schema_index(
    context: dg.AssetExecutionContext,
    datasources: DatasourcesResource,
    schema_store: SchemaStoreResource,
    llm: LLMResource,
):  # noqa: ANN201 (a generator of MaterializeResults)
    """``schema_snapshot``, ``enriched_snapshot`` and ``schema_chunks`` in one step, in lineage order.

    One step instead of three: each Dagster step costs a dozen event-log writes and storage
    reads (start, outputs, success, data-version lookups), which dominated a small datasource's
    run (benchmarks/dagster_overhead.py). The UI still shows each asset with its own lineage,
    metadata, checks and partitions, and any subset can be materialized (``can_subset``): an
    asset not selected is read from the SchemaStore. ``chroma_collection`` stays its own step
    because it alone holds the ``nl2sql_index`` pool slot: a run waiting for the embedded
    Chroma store's single writer slot must not also keep the daemon from starting other
    datasources' runs (a pool on a run's first step holds the run in the queue).
    """
    datasource_id, version = _partition(context)
    _tag_run(context, datasource_id, version)
    selected = context.selected_asset_keys

    snapshot: SchemaSnapshot | None = None
    if SCHEMA_SNAPSHOT in selected:
        snapshot, result = _materialize_snapshot(context, datasources, schema_store, datasource_id, version)
        yield result
    if ENRICHED_SNAPSHOT in selected:
        snapshot, result = _materialize_enriched(schema_store, llm, snapshot or _load(schema_store, datasource_id,
                                                                                        version),
                                                 datasource_id, version)
        yield result
    if SCHEMA_CHUNKS in selected:
        if snapshot is None or ENRICHED_SNAPSHOT not in selected:
            snapshot = _load(schema_store, datasource_id, version)  # what enrichment registered earlier
        _, _, result = _materialize_chunks(snapshot, datasource_id, version)
        yield result  # the blocking checks travel with it: a failure fails the step, before chroma_collection


@dg.asset(
    partitions_def=datasource_versions_partitions,
    group_name=ASSET_GROUP,
    deps=[SCHEMA_CHUNKS],
    kinds={"chroma"},
    pool=INDEX_POOL,
    check_specs=chroma_collection_check_specs(),
    description=(
        "The chunks embedded into Chroma and made the datasource's live version; keeps the last N "
        "versions per datasource (older versions' chunks are deleted, their records stay)."
    ),
)
def chroma_collection(
    context: dg.AssetExecutionContext,
    schema_store: SchemaStoreResource,
    embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource,
) -> dg.MaterializeResult:
    datasource_id, version = _partition(context)
    snapshot = _load(schema_store, datasource_id, version)
    chunk_set = _build_chunk_set(snapshot)
    return _materialize_collection(context, schema_store, embeddings, vector_store, snapshot, chunk_set,
                                   _approved_chunk_hash(context), datasource_id, version)


schema_index_assets = [schema_index, chroma_collection]
