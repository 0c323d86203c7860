"""Every name the Dagster shell, the CLI and the audit share: assets, checks, tags, pool.

Defined once here (no Dagster import), so the code location, the in-process runner and the
audit cannot drift apart; the ``defs`` package turns them into ``AssetKey``s.
"""

from __future__ import annotations

from typing import Final

SCHEMA_SNAPSHOT: Final = "schema_snapshot"
ENRICHED_SNAPSHOT: Final = "enriched_snapshot"
SCHEMA_CHUNKS: Final = "schema_chunks"
CHROMA_COLLECTION: Final = "chroma_collection"
#: The four index assets in lineage order.
ASSET_NAMES: Final = (SCHEMA_SNAPSHOT, ENRICHED_SNAPSHOT, SCHEMA_CHUNKS, CHROMA_COLLECTION)
ASSET_GROUP: Final = "schema_index"
INDEX_JOB: Final = "index_job"
DRIFT_SENSOR: Final = "schema_drift_sensor"
#: The pool whose slot ``chroma_collection`` holds: the embedded Chroma store takes one writer at a time.
INDEX_POOL: Final = "nl2sql_index"
PARTITIONS_NAME: Final = "datasource_versions"
#: The five resource keys of the code location.
RESOURCE_KEYS: Final = ("datasources", "schema_store", "embeddings", "vector_store", "llm")

# Asset checks: name -> the asset it checks.
CHUNKS_COVER_SNAPSHOT: Final = "chunks_cover_snapshot"
NO_PII_VALUES: Final = "no_pii_values_in_chunks"
VECTOR_IDENTITY: Final = "vector_dimension_matches_provider"
TABLES_FOUND: Final = "tables_found_by_name"
CHROMA_MATCHES_STORE: Final = "chroma_matches_schema_store"
#: The datasource's own gold questions (``evaluation`` in the datasources file), asked of the new live version.
RETRIEVAL_QUALITY: Final = "retrieval_quality"
CHECK_ASSETS: Final = {
    CHUNKS_COVER_SNAPSHOT: SCHEMA_CHUNKS,
    NO_PII_VALUES: SCHEMA_CHUNKS,
    VECTOR_IDENTITY: CHROMA_COLLECTION,
    TABLES_FOUND: CHROMA_COLLECTION,
    CHROMA_MATCHES_STORE: CHROMA_COLLECTION,
    RETRIEVAL_QUALITY: CHROMA_COLLECTION,
}

# Run tags.
DATASOURCE_TAG: Final = "datasource"
SCHEMA_VERSION_TAG: Final = "schema_version"
DETECTED_FINGERPRINT_TAG: Final = "nl2sql/fingerprint"
REQUEST_KIND_TAG: Final = "nl2sql/request"
JOB_TAG: Final = "nl2sql/job"
HOST_TAG: Final = "nl2sql/host"
PID_TAG: Final = "nl2sql/pid"

#: Metadata key under which ``schema_chunks`` records the chunk set its blocking checks approved.
CHUNK_SET_HASH_KEY: Final = "chunk_set_hash"

# What the asset graph shows besides the four index assets (the UI, `audit`).
#: The unpartitioned status asset: per datasource the live, retained, pending, evicted and never-indexed versions.
INDEX_STATUS: Final = "index_status"
#: Each datasource is the external asset ``[DATASOURCE_KEY_PREFIX, <id>]``, upstream of ``schema_snapshot``.
DATASOURCE_KEY_PREFIX: Final = "datasource"
#: The states a (datasource, version) pair can be in, in the order the status table lists them.
VERSION_STATES: Final = ("live", "pending", "retained", "evicted", "never_indexed")
