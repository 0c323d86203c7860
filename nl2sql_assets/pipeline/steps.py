"""The indexing pipeline: capture -> enrich -> chunk (checked) -> publish, as plain functions.

Each Dagster asset calls one step and turns its outcome into a materialization; scripts,
benchmarks and tests call :func:`nl2sql_assets.pipeline.index.index_datasource`, which runs
the same steps in the same order. Every guard is here and raises a domain error
(:class:`~nl2sql_assets.errors.Nl2SqlError`): a partition's structure must match its
fingerprint, a new version must have been observed by drift detection, the blocking checks'
verdict is re-checked before the vector store is touched, and an older version is never made
live again. Nothing here holds state: the stores are passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from time import perf_counter
from typing import Literal

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.config import DatasourceConfig, EvaluationConfig
from nl2sql_assets.errors import (
    PersonalDataInSnapshotError,
    RedundantVersionError,
    SchemaDriftError,
    StaleVersionError,
    UncheckedChunksError,
    UnobservedVersionError,
)
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.enrichment import ChatClient, EnrichmentRecord, enrich_schema_snapshot
from nl2sql_assets.indexing.models import ChunkSet, ModelIdentity, RefreshReport
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.pipeline.evaluation import EvaluationReport, gate_version, require_quality
from nl2sql_assets.pipeline.keys import fingerprint_prefix
from nl2sql_assets.pipeline.verify import (
    CoverageReport,
    IdComparison,
    PiiFinding,
    TablesFound,
    chunk_coverage,
    chunk_set_hash,
    compare_ids,
    pii_findings,
    recorded_value_findings,
    tables_found,
)
from nl2sql_assets.schema.diff import SchemaDiff, diff_snapshots
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.protocol import SchemaStore

log = logging.getLogger(__name__)

LLMFactory = Callable[[], ChatClient | None]
#: How many table chunks a table's own name must be found within (the post-write check).
SEARCH_TOP_K = 3


class _Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class SnapshotOutcome(_Outcome):
    """The registered snapshot, the store's verdict and what changed against the previous one."""

    snapshot: SchemaSnapshot
    status: Literal["new", "metadata_updated", "unchanged"]
    previous_version: str | None
    diff: SchemaDiff
    warnings: int
    read_seconds: float


class EnrichOutcome(_Outcome):
    """The (maybe enriched and re-registered) snapshot; ``status`` and ``reason`` say why."""

    snapshot: SchemaSnapshot
    status: str
    reason: str | None
    record: EnrichmentRecord | None
    seconds: float


class ChunkOutcome(_Outcome):
    """A chunk set and the two blocking checks' findings on it."""

    chunk_set: ChunkSet
    coverage: CoverageReport
    pii: list[PiiFinding]
    chunk_set_hash: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.coverage.ok and not self.pii

    def refusal(self) -> str | None:
        """Why the set must not be written, or None."""
        if not self.coverage.ok:
            return "chunks do not cover the snapshot"
        if self.pii:
            return f"{len(self.pii)} chunk(s) show personal data"
        return None


class PublishOutcome(_Outcome):
    """What publishing a chunk set did, and the post-write checks' findings."""

    report: RefreshReport
    keep_versions: int
    kept_versions: list[str]
    evicted_versions: list[str]
    evicted_chunks_deleted: int
    configured_identity: ModelIdentity
    stored_identity: ModelIdentity | None
    tables_found: TablesFound
    ids: IdComparison
    chunk_set_hash: str


def read_snapshot(config: DatasourceConfig, *, now: datetime | None = None, stats_budget_s: float | None = None,
                  previous: SchemaSnapshot | None = None) -> SchemaSnapshot:
    """A full snapshot of the datasource (structure, statistics, PII flags), captured at ``now``;
    the tables ``previous`` has with the same structure keep its statistics while they are young
    (``statistics.reuse_max_age_hours``); ``stats_budget_s`` overrides ``statistics.budget_seconds``.

    Raises:
        DatasourceError: the datasource cannot be read (the message names it, never the password).
    """
    budget = config.statistics.budget_seconds if stats_budget_s is None else stats_budget_s
    adapter = open_adapter(config, stats_budget_s=budget)
    try:
        return adapter.read_snapshot(now or datetime.now(UTC), previous=previous)
    finally:
        adapter.close()


def check_observed(datasource_id: str, schema_version: str, fingerprint: str, *, registered: bool,
                   detected_fingerprint: str | None) -> None:
    """A partition's structure must be the one its version names, and observed by drift detection.

    A version neither registered nor requested by drift detection (a partition key typed into
    the UI) is refused as unknown first: the database did not "move", the version never existed.

    Raises:
        SchemaDriftError: the database moved since the version was proposed.
        UnobservedVersionError: the version is neither registered nor what drift detection saw.
    """
    if not registered and detected_fingerprint is None:
        raise UnobservedVersionError(datasource_id, schema_version, "it is not in the schema store and this "
                                     "run was not requested by drift detection")
    expected = fingerprint_prefix(schema_version)
    if fingerprint[:8] != expected:
        raise SchemaDriftError(datasource_id, expected, fingerprint)
    if registered or detected_fingerprint == fingerprint:
        return
    raise UnobservedVersionError(datasource_id, schema_version,
                                 "it is not in the schema store and drift detection observed another structure for it")


def capture_snapshot(config: DatasourceConfig, store: SchemaStore, schema_version: str | None = None, *,
                     detected_fingerprint: str | None = None, now: datetime | None = None,
                     stats_budget_s: float | None = None) -> SnapshotOutcome:
    """Read the database and register the snapshot.

    With ``schema_version`` (a partition) the structure must match it and have been observed;
    without, the store names the version (a new one for a new structure).

    Raises:
        DatasourceError, SchemaStoreError, SchemaDriftError, UnobservedVersionError,
        RedundantVersionError, PersonalDataInSnapshotError (the snapshot records values the blocking
        PII check refuses: nothing is registered).
    """
    ds = config.id
    registered = {v.schema_version for v in store.list_versions(ds)}
    previous = store.get_latest(ds)
    if schema_version in registered:
        previous = store.get_snapshot(ds, schema_version)  # a refresh: diff against what it was
    started = perf_counter()
    snapshot = read_snapshot(config, now=now, stats_budget_s=stats_budget_s, previous=previous)
    read_s = perf_counter() - started
    if schema_version is not None:
        check_observed(ds, schema_version, snapshot.fingerprint, registered=schema_version in registered,
                       detected_fingerprint=detected_fingerprint)
    refused = recorded_value_findings(snapshot)  # the last line of defence: the adapters withhold these
    if refused:
        raise PersonalDataInSnapshotError(ds, sorted({f.column for f in refused if f.column is not None}))
    result = store.register_snapshot(snapshot, schema_version=schema_version)
    if schema_version is not None and result.schema_version != schema_version:
        raise RedundantVersionError(ds, schema_version, result.schema_version)
    return SnapshotOutcome(snapshot=result.snapshot, status=result.status, previous_version=result.previous_version,
                           diff=diff_snapshots(previous, result.snapshot), warnings=len(snapshot.warnings),
                           read_seconds=read_s)


def enrich(store: SchemaStore, snapshot: SchemaSnapshot, llm: LLMFactory | None) -> EnrichOutcome:
    """LLM descriptions where the database has none (re-registered in place), else a pass-through.

    Never fails on the LLM's account (the enrichment module guards every call); a schema
    store failure while re-registering raises SchemaStoreError.
    """
    started = perf_counter()
    outcome = enrich_schema_snapshot(snapshot, llm)
    enriched = snapshot
    if outcome.status == "enriched":
        enriched = store.register_snapshot(outcome.snapshot, schema_version=snapshot.schema_version).snapshot
    return EnrichOutcome(snapshot=enriched, status=outcome.status, reason=outcome.reason,
                         record=outcome.snapshot.enrichment, seconds=perf_counter() - started)


def build_checked_chunks(snapshot: SchemaSnapshot) -> ChunkOutcome:
    """The chunk set of a registered snapshot with the blocking checks' findings (coverage, PII)."""
    started = perf_counter()
    chunk_set = build_chunks(snapshot)
    return ChunkOutcome(chunk_set=chunk_set, coverage=chunk_coverage(snapshot, chunk_set),
                        pii=pii_findings(snapshot, chunk_set), chunk_set_hash=chunk_set_hash(chunk_set),
                        seconds=perf_counter() - started)


def quality_gate(store: SchemaStore, embeddings: Embeddings, checked: ChunkOutcome,
                 evaluation: EvaluationConfig | None) -> EvaluationReport | None:
    """Under ``evaluation.severity: block``, the gold questions asked before publishing; None otherwise.

    Raises:
        QualityGateError: the version misses the thresholds (nothing was written).
    """
    if evaluation is None or evaluation.severity != "block" or not evaluation.questions or not checked.ok:
        return None  # a refused chunk set is publish's to report
    report = gate_version(store, embeddings, checked.chunk_set, evaluation)
    require_quality(report)
    return report


def versions_to_keep(store: SchemaStore, datasource_id: str, schema_version: str, retention: int) -> list[str]:
    """The other versions whose chunks stay in the vector store: the newest ``retention - 1`` besides this one."""
    if retention < 1:
        raise ValueError(f"datasource '{datasource_id}': retention must be >= 1, got {retention}")
    newest_first = [v.schema_version for v in reversed(store.list_versions(datasource_id))]
    others = [v for v in newest_first if v != schema_version]
    return others[: retention - 1]


def publish(store: SchemaStore, vectors: VectorStore, snapshot: SchemaSnapshot, checked: ChunkOutcome, *,
            retention: int, approved_hash: str | None = None) -> PublishOutcome:
    """Embed the checked chunk set into the vector store, make it live, apply retention, verify.

    Refuses (before anything is written) a version that is not the latest registered one, a
    set the blocking checks reject, and a set other than ``approved_hash`` (the set a separate
    ``schema_chunks`` run approved). A failure in the vector store leaves the previously live
    chunks serving.

    Raises:
        StaleVersionError, UncheckedChunksError, EmbeddingError, VectorStoreError, SchemaStoreError.
    """
    chunk_set = checked.chunk_set
    ds, version = chunk_set.datasource_id, chunk_set.schema_version
    if retention < 1:
        raise ValueError(f"datasource '{ds}': retention must be >= 1, got {retention}")
    registered = store.list_versions(ds)  # not the latest snapshot: 76 MB at 3,000 tables, held through the write
    if registered and registered[-1].schema_version != version:
        raise StaleVersionError(ds, version, registered[-1].schema_version)
    refusal = checked.refusal()
    if refusal is not None:
        raise UncheckedChunksError(ds, version, f"{refusal}; the live index was not replaced")
    if approved_hash is not None and approved_hash != checked.chunk_set_hash:
        raise UncheckedChunksError(ds, version, "the stored snapshot changed since schema_chunks was checked; "
                                                "materialize schema_chunks (and its checks) again")
    kept = versions_to_keep(store, ds, version, retention)
    report = vectors.refresh_schema_chunks(ds, version, chunk_set.chunks, tenant_id=chunk_set.tenant_id,
                                           keep_versions=kept)
    evicted = store.apply_retention(ds, retention)
    deleted = vectors.delete_versions(ds, evicted) if evicted else 0
    outcome = PublishOutcome(
        report=report, keep_versions=retention, kept_versions=kept, evicted_versions=evicted,
        evicted_chunks_deleted=deleted, configured_identity=vectors.identity,
        stored_identity=vectors.stored_identity(),
        tables_found=tables_found(vectors, snapshot, version, SEARCH_TOP_K),
        ids=compare_ids([c.id for c in chunk_set.chunks], vectors.list_ids(ds, version)),
        chunk_set_hash=checked.chunk_set_hash)
    log.info("%s@%s live: %d upserted, %d unchanged, %d deleted, %d embedded, %d from cache%s", ds, version,
             report.upserted, report.unchanged, report.deleted, report.embedded, report.from_cache,
             f"; evicted {', '.join(evicted)}" if evicted else "")
    return outcome
