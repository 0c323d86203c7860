"""The four schema-index assets, one partition per observed (datasource, schema_version).

``schema_snapshot`` -> ``enriched_snapshot`` -> ``schema_chunks`` -> ``chroma_collection``.
Each calls one step of :mod:`nl2sql_assets.pipeline.steps` (where every guard lives) and
turns its outcome into a ``MaterializeResult`` with check results; a domain error becomes
a ``dg.Failure`` naming the partition.

Storage choice: no asset passes its value through an IO manager. The SchemaStore is the
system of record for snapshots (``schema_snapshot`` registers there, downstream assets load
the partition's version from it), chunks are a pure, deterministic function of the stored
snapshot, and Chroma holds the vectors. So nothing big is pickled into ``DAGSTER_HOME``, and
any asset can be re-materialized on any machine that reaches the stores. ``schema_chunks``
records a hash of the chunk set its blocking checks approved, and ``chroma_collection``
refuses to write a different set.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at definition time.

from collections.abc import Iterator

import dagster as dg

from nl2sql_assets.config import EvaluationConfig
from nl2sql_assets.defs.checks import (
    check_specs,
    chunk_check_results,
    per_datasource,
    publish_check_results,
    retrieval_figures,
    retrieval_quality_result,
)
from nl2sql_assets.defs.metadata import (
    chunks_metadata,
    collection_metadata,
    enriched_metadata,
    snapshot_metadata,
)
from nl2sql_assets.defs.catalog import observation
from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.defs.status import log_index_status
from nl2sql_assets.errors import Nl2SqlError, UnknownDatasourceError
from nl2sql_assets.pipeline import names, steps
from nl2sql_assets.pipeline.evaluation import evaluate_version
from nl2sql_assets.pipeline.keys import parse_partition_key
from nl2sql_assets.schema.models import SchemaSnapshot
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

SCHEMA_SNAPSHOT = dg.AssetKey(names.SCHEMA_SNAPSHOT)
ENRICHED_SNAPSHOT = dg.AssetKey(names.ENRICHED_SNAPSHOT)
SCHEMA_CHUNKS = dg.AssetKey(names.SCHEMA_CHUNKS)
CHROMA_COLLECTION = dg.AssetKey(names.CHROMA_COLLECTION)
#: Failure metadata taken from a domain error's attributes: (label, attribute, characters kept).
_ERROR_DETAILS = (("expected_fingerprint", "expected_fingerprint", 8), ("found_fingerprint", "actual_fingerprint", 8),
                  ("registered_as", "registered_as", 64), ("latest_version", "latest_version", 64))


def _partition(context: dg.AssetExecutionContext) -> tuple[str, str]:
    """(datasource_id, schema_version) of the running partition; Failure on a malformed key."""
    key = context.partition_key
    try:
        return parse_partition_key(key)
    except Nl2SqlError as exc:
        raise dg.Failure(description=str(exc), metadata={"partition": key}) from None


def _failure(exc: Nl2SqlError, datasource_id: str, schema_version: str) -> dg.Failure:
    """A domain error as a step failure whose text and metadata name the partition."""
    metadata: dict[str, object] = {"datasource": datasource_id, "schema_version": schema_version,
                                   "error": type(exc).__name__}
    metadata.update({label: str(getattr(exc, attr))[:n] for label, attr, n in _ERROR_DETAILS
                     if getattr(exc, attr, None)})
    return dg.Failure(description=str(exc), metadata=metadata)


def _tag_run(context: dg.AssetExecutionContext, datasource_id: str, schema_version: str) -> None:
    """Add the datasource/schema_version tags to runs launched without them (UI, backfills)."""
    wanted = {names.DATASOURCE_TAG: datasource_id, names.SCHEMA_VERSION_TAG: schema_version}
    missing = {k: v for k, v in wanted.items() if context.run.tags.get(k) != v}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)


def _approved_chunk_hash(context: dg.AssetExecutionContext) -> str | None:
    """The chunk-set hash recorded by the partition's latest ``schema_chunks`` materialization."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=SCHEMA_CHUNKS, asset_partitions=[context.partition_key]), limit=1,
    ).records
    materialization = records[0].asset_materialization if records else None
    value = materialization.metadata.get(names.CHUNK_SET_HASH_KEY) if materialization else None
    return getattr(value, "value", None) if value is not None else None


def _evaluation(datasources: DatasourcesResource, datasource_id: str) -> EvaluationConfig | None:
    """The datasource's evaluation questions; None when its entry has left the datasources file since."""
    try:
        return datasources.get(datasource_id).evaluation
    except UnknownDatasourceError:
        return None


def _spec(key: dg.AssetKey, kind: str, description: str, deps: list[dg.AssetKey]) -> dg.AssetSpec:
    return dg.AssetSpec(key, deps=deps, group_name=names.ASSET_GROUP, kinds={kind}, description=description)


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
    check_specs=check_specs(names.SCHEMA_CHUNKS),
    partitions_def=datasource_versions_partitions,
    can_subset=True,
    description="Snapshot, enrich and chunk one (datasource, schema_version) partition, in one step.",
)
def schema_index(
    context: dg.AssetExecutionContext,
    datasources: DatasourcesResource,
    schema_store: SchemaStoreResource,
    llm: LLMResource,
) -> Iterator[dg.MaterializeResult]:
    """``schema_snapshot``, ``enriched_snapshot`` and ``schema_chunks`` in one step, in lineage order.

    One step instead of three: each Dagster step costs a dozen event-log writes and storage
    reads, which dominated a small datasource's run (benchmarks/dagster_overhead.py). The UI
    still shows each asset with its own lineage, metadata, checks and partitions, and any
    subset can be materialized (``can_subset``): an asset not selected is read from the
    SchemaStore. ``chroma_collection`` stays its own step because it alone holds the
    ``nl2sql_index`` pool slot: a run waiting for the embedded Chroma store's single writer
    slot must not also keep the daemon from starting other datasources' runs.
    """
    ds, version = _partition(context)
    _tag_run(context, ds, version)
    selected = context.selected_asset_keys
    try:
        store = schema_store.get_store()
        snapshot: SchemaSnapshot | None = None
        if SCHEMA_SNAPSHOT in selected:
            captured = steps.capture_snapshot(datasources.get(ds), store, version,
                                              detected_fingerprint=context.run.tags.get(names.DETECTED_FINGERPRINT_TAG))
            snapshot = captured.snapshot
            context.log_event(observation(  # the datasource asset shows the structure last read
                ds, fingerprint=snapshot.fingerprint, schema_version=version, observed_by=names.SCHEMA_SNAPSHOT,
                checked_at=snapshot.captured_at, extra={"tables": len(snapshot.tables)}))
            yield dg.MaterializeResult(asset_key=SCHEMA_SNAPSHOT, metadata=snapshot_metadata(captured))
        if ENRICHED_SNAPSHOT in selected:
            enriched = steps.enrich(store, snapshot or store.get_snapshot(ds, version), llm.factory())
            snapshot = enriched.snapshot
            yield dg.MaterializeResult(asset_key=ENRICHED_SNAPSHOT, metadata=enriched_metadata(enriched))
        if SCHEMA_CHUNKS in selected:
            if snapshot is None or ENRICHED_SNAPSHOT not in selected:
                snapshot = store.get_snapshot(ds, version)  # what enrichment registered earlier
            checked = steps.build_checked_chunks(snapshot)
            pii_columns = sum(c.pii for t in snapshot.tables for c in t.columns)
            # the blocking checks travel with it: a failure fails the step, before chroma_collection
            yield dg.MaterializeResult(asset_key=SCHEMA_CHUNKS, metadata=chunks_metadata(checked),
                                       check_results=per_datasource(ds, chunk_check_results(checked, pii_columns)))
    except Nl2SqlError as exc:
        raise _failure(exc, ds, version) from None


@dg.asset(
    partitions_def=datasource_versions_partitions,
    group_name=names.ASSET_GROUP,
    deps=[SCHEMA_CHUNKS],
    kinds={"chroma"},
    pool=names.INDEX_POOL,
    check_specs=check_specs(names.CHROMA_COLLECTION),
    description=(
        "The chunks embedded into Chroma and made the datasource's live version; keeps the last N "
        "versions per datasource (older versions' chunks are deleted, their records stay)."
    ),
)
def chroma_collection(
    context: dg.AssetExecutionContext,
    datasources: DatasourcesResource,
    schema_store: SchemaStoreResource,
    embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource,
) -> dg.MaterializeResult:
    ds, version = _partition(context)
    try:
        store = schema_store.get_store()
        snapshot = store.get_snapshot(ds, version)
        checked = steps.build_checked_chunks(snapshot)
        evaluation = _evaluation(datasources, ds)  # read before writing: a broken file writes nothing
        vectors = vector_store.get_store(embeddings.get_service())
        gated = steps.quality_gate(store, embeddings.get_service(), checked, evaluation)
        published = steps.publish(store, vectors, snapshot, checked, retention=vector_store.retention(),
                                  approved_hash=_approved_chunk_hash(context))
    except Nl2SqlError as exc:
        raise _failure(exc, ds, version) from None
    metadata = collection_metadata(checked, published)
    # the process's counters (all runs of this process): what an operator graphs across runs
    metadata["vector_store_metrics"] = dg.MetadataValue.json(vector_store.metrics.as_dict())
    log_index_status(context, store, vectors, ds)  # index_status: which version of each datasource is live now
    report = gated  # under severity: block, asked before the version went live
    if report is None and evaluation is not None and evaluation.questions:  # asked of the version just made live
        report = evaluate_version(store, vectors, embeddings.get_service(), ds, version, evaluation,
                                  tenant=snapshot.datasource.tenant)
        # also on the materialization, whose numeric metadata the UI plots across partitions
        metadata.update({f"retrieval_{key}": value for key, value in retrieval_figures(report).items()})
    return dg.MaterializeResult(asset_key=CHROMA_COLLECTION, metadata=metadata,
                                check_results=per_datasource(ds, [*publish_check_results(published),
                                                                  retrieval_quality_result(report)]))


schema_index_assets = [schema_index, chroma_collection]
