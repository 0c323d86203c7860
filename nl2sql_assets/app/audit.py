"""Lineage and consistency per datasource, from the Dagster instance and the two stores.

What ``nl2sql-assets audit`` prints: the live version, the version history (schema store,
vector store, Dagster partitions), the run and time of each asset of the live version, chunk
counts, the embedding model, and whether Chroma holds exactly the chunks the SchemaStore's
snapshot implies: the live version and every other retained version (their records are shared,
``indexing.refresh_plan``), and that no record is orphaned (used by no retained version).
Problems (disagreements) make the audit fail; warnings do not. Each version's
state (live, pending, retained, evicted, never indexed) is decided by the same function as the
UI's ``index_status`` (:func:`nl2sql_assets.defs.status.version_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import dagster as dg
from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.app.runner import IndexResources
from nl2sql_assets.config import Settings, load_datasources
from nl2sql_assets.defs.status import datasource_versions, registered_partitions
from nl2sql_assets.errors import Nl2SqlError, UnknownDatasourceError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import CHUNK_TYPES, IndexState
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.pipeline.keys import partition_key, versions_of
from nl2sql_assets.pipeline.names import ASSET_NAMES, CHROMA_COLLECTION, PARTITIONS_NAME
from nl2sql_assets.pipeline.verify import chunk_set_hash, compare_ids
from nl2sql_assets.schema.protocol import SchemaStore

MAX_IDS_SHOWN = 10


class AssetRun(BaseModel):
    """The latest materialization of one asset for one partition."""

    model_config = ConfigDict(frozen=True)

    asset: str
    partition: str
    run_id: str | None = None
    materialized_at: str | None = None


class VersionEntry(BaseModel):
    """One version of a datasource, wherever it is known."""

    model_config = ConfigDict(frozen=True)

    schema_version: str
    #: live, pending, retained, evicted or never_indexed (``pipeline.names.VERSION_STATES``)
    state: str
    live: bool = False
    in_schema_store: bool = False
    in_vector_store: bool = False
    partition: bool = False
    indexed_at: str | None = None
    index_run_id: str | None = None


class DatasourceAudit(BaseModel):
    model_config = ConfigDict(frozen=True)

    datasource_id: str
    tenant: str | None = None
    live_version: str | None = None
    latest_version: str | None = None
    versions: list[VersionEntry] = Field(default_factory=list)
    lineage: list[AssetRun] = Field(default_factory=list)
    chunk_counts: dict[str, int] = Field(default_factory=dict)
    expected_chunks: int = 0
    present_chunks: int = 0
    embedding_model: str | None = None
    problems: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems


class AuditReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    generated_at: str
    embedding_model: str | None
    stored_embedding_model: str | None
    datasources: list[DatasourceAudit]
    problems: list[str] = Field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems and all(d.consistent for d in self.datasources)

    def to_json_dict(self) -> dict[str, object]:
        data = self.model_dump(mode="json")
        data["consistent"] = self.consistent
        for entry, audit in zip(data["datasources"], self.datasources, strict=True):  # type: ignore[arg-type]
            entry["consistent"] = audit.consistent
        return data


def _latest_materialization(instance: dg.DagsterInstance, asset: str, key: str) -> AssetRun:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1,
    ).records
    if not records:
        return AssetRun(asset=asset, partition=key)
    record = records[0]
    when = datetime.fromtimestamp(record.timestamp, UTC).isoformat(timespec="seconds")
    return AssetRun(asset=asset, partition=key, run_id=record.run_id, materialized_at=when)


def build_audit(
    settings: Settings,
    instance: dg.DagsterInstance,
    datasource_ids: Sequence[str] = (),
    *,
    resources: IndexResources | None = None,
) -> AuditReport:
    """Audit every datasource known to the datasources file, the schema store or the vector store.

    Raises:
        UnknownDatasourceError: a named datasource is known nowhere.
    """
    own = resources is None
    res = resources or IndexResources(settings)
    try:
        store = res.schema_store.get_store()
        service = res.embeddings.get_service()
        vectors = res.vector_store.get_store(service)
        configured = service.identity
        stored_identity = vectors.stored_identity()
        states = vectors.index_states()
        try:
            file_ids = [c.id for c in load_datasources(settings.datasources_path)]
        except Nl2SqlError:
            file_ids = []
        known = sorted(set(file_ids) | set(store.list_datasources()) | set(states))
        for ds in datasource_ids:
            if ds not in known:
                raise UnknownDatasourceError(ds, known)
        selected = [ds for ds in known if not datasource_ids or ds in datasource_ids]
        partitions = instance.get_dynamic_partitions(PARTITIONS_NAME)
        registered = registered_partitions(instance)
        report_problems: list[str] = []
        if stored_identity is not None and stored_identity != configured:
            report_problems.append(f"the vector store holds vectors of {stored_identity.key}, "
                                   f"the configured provider is {configured.key}")
        audits = [_audit_one(ds, store, vectors, states.get(ds), instance, partitions, registered,
                             in_file=ds in file_ids) for ds in selected]
        return AuditReport(
            generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
            embedding_model=configured.key,
            stored_embedding_model=stored_identity.key if stored_identity else None,
            datasources=audits, problems=report_problems,
        )
    finally:
        if own:
            res.close()


def _audit_one(ds: str, store: SchemaStore, vectors: VectorStore, state: IndexState | None,
               instance: dg.DagsterInstance, partitions: Sequence[str], registered: dict[str, set[str]], *,
               in_file: bool) -> DatasourceAudit:
    problems: list[str] = []
    warnings: list[str] = []
    stored = store.list_versions(ds)
    latest = stored[-1].schema_version if stored else None
    live = state.live_version if state is not None else None
    partition_versions = versions_of(ds, list(partitions))
    if not in_file:
        warnings.append("not in the datasources file")

    if latest is None and live is None:
        warnings.append("never indexed: no version in the schema store, nothing in the vector store")
    elif live is None:
        problems.append(f"schema store has version {latest} but nothing is live in the vector store")
    elif latest is None:
        problems.append(f"vector store serves version {live} that the schema store does not know")
    elif live != latest:
        problems.append(f"vector store serves version {live} but the schema store's latest is {latest}")

    chunk_counts: dict[str, int] = {}
    expected_n = present_n = 0
    lineage: list[AssetRun] = []
    if live is not None and any(v.schema_version == live for v in stored):
        expected_set = build_chunks(store.get_snapshot(ds, live))
        present = vectors.list_ids(ds, live)
        comparison = compare_ids([c.id for c in expected_set.chunks], present)
        expected_n, present_n = comparison.expected, comparison.present
        if comparison.missing:
            problems.append(f"{len(comparison.missing)} chunk(s) missing from the vector store, e.g. "
                            + ", ".join(comparison.missing[:MAX_IDS_SHOWN]))
        if comparison.unexpected:
            problems.append(f"{len(comparison.unexpected)} unexpected chunk(s) in the vector store, e.g. "
                            + ", ".join(comparison.unexpected[:MAX_IDS_SHOWN]))
        if comparison.ok and state is not None and state.content_digest \
                and state.content_digest != chunk_set_hash(expected_set):
            problems.append("chunk texts in the vector store differ from those the schema store implies "
                            "(a metadata refresh was not applied)")
        chunk_counts = {t.split(".", 1)[1]: 0 for t in CHUNK_TYPES}
        for chunk_id in present:
            short = chunk_id.split(":")[2] if chunk_id.count(":") >= 3 else "other"
            name = {"ds": "datasource", "rel": "relationship"}.get(short, short)
            chunk_counts[name] = chunk_counts.get(name, 0) + 1
        key = partition_key(ds, live)
        lineage = [_latest_materialization(instance, asset, key) for asset in ASSET_NAMES]
        if key not in partitions:
            warnings.append(f"no Dagster partition {key}: indexed outside Dagster")
        elif any(r.run_id is None for r in lineage):
            missing = [r.asset for r in lineage if r.run_id is None]
            warnings.append(f"no materialization of {', '.join(missing)} for {key}")

    store_versions = {v.schema_version for v in stored}
    _check_records(ds, store, vectors, state, store_versions, problems, warnings)
    versions: dict[str, VersionEntry] = {}
    row = datasource_versions(ds, store_versions=store_versions, live=live, partition_versions=partition_versions,
                              registered_versions=registered.get(ds, ()))  # the same states as the UI's index_status
    for version, version_state in row.states.items():
        in_vectors = version == live or bool(vectors.list_ids(ds, version))
        run = _latest_materialization(instance, CHROMA_COLLECTION, partition_key(ds, version)) \
            if version in partition_versions else None
        versions[version] = VersionEntry(
            schema_version=version, state=version_state, live=version == live,
            in_schema_store=version in store_versions, in_vector_store=in_vectors,
            partition=version in partition_versions,
            indexed_at=run.materialized_at if run else None, index_run_id=run.run_id if run else None,
        )
    return DatasourceAudit(
        datasource_id=ds, tenant=state.tenant_id if state is not None else store.datasource_tenant(ds),
        live_version=live, latest_version=latest, versions=list(versions.values()), lineage=lineage,
        chunk_counts=chunk_counts, expected_chunks=expected_n, present_chunks=present_n,
        embedding_model=state.model_key if state is not None else None,
        problems=problems, warnings=warnings,
    )


def _check_records(ds: str, store: SchemaStore, vectors: VectorStore, state: IndexState | None,
                   store_versions: set[str], problems: list[str], warnings: list[str]) -> None:
    """Every retained version other than the live one holds exactly its snapshot's chunks (ids and
    content); no record is orphaned. The live version is checked by the caller."""
    retained: dict[str, int] = getattr(state, "versions", {}) if state is not None else {}
    for version in sorted(v for v in retained if v != state.live_version):  # type: ignore[union-attr]
        if version not in store_versions:
            problems.append(f"version {version}: retained in the vector store, unknown to the schema store")
            continue
        expected = {c.id: c.content_hash for c in build_chunks(store.get_snapshot(ds, version)).chunks}
        present = {c.id: c.metadata.get("content_hash") for c in vectors.get_chunks(ds, version)}
        comparison = compare_ids(expected, present)
        if comparison.missing:
            problems.append(f"version {version}: {len(comparison.missing)} chunk(s) missing from the vector "
                            "store, e.g. " + ", ".join(comparison.missing[:MAX_IDS_SHOWN]))
        if comparison.unexpected:
            problems.append(f"version {version}: {len(comparison.unexpected)} unexpected chunk(s) in the vector "
                            "store, e.g. " + ", ".join(comparison.unexpected[:MAX_IDS_SHOWN]))
        differ = sorted(cid for cid, h in expected.items() if cid in present and present[cid] != h)
        if differ:
            problems.append(f"version {version}: {len(differ)} chunk(s) differ from what the snapshot implies, "
                            "e.g. " + ", ".join(differ[:MAX_IDS_SHOWN]))
    if state is None:
        return
    check = vectors.check_records(ds)
    if check.legacy:
        warnings.append("the vector store holds the previous record layout (one record per chunk and version); "
                        "the next index migrates it")
    if check.orphaned:
        problems.append(f"{len(check.orphaned)} orphaned record(s) in the vector store that no retained version "
                        "uses, e.g. " + ", ".join(check.orphaned[:MAX_IDS_SHOWN]))
    if check.leftovers:
        warnings.append(f"{len(check.leftovers)} record(s) of a refresh in flight or interrupted (invisible to "
                        "readers; the next refresh removes them)")


def format_audit(report: AuditReport) -> str:
    """The human-readable audit."""
    lines = [f"embedding model: {report.embedding_model}"
             + (f" (vector store holds {report.stored_embedding_model})"
                if report.stored_embedding_model and report.stored_embedding_model != report.embedding_model else "")]
    lines += [f"problem: {p}" for p in report.problems]
    for audit in report.datasources:
        verdict = "consistent" if audit.consistent else "INCONSISTENT"
        lines.append("")
        lines.append(f"{audit.datasource_id} (tenant {audit.tenant or '?'}): live {audit.live_version or '-'}, "
                     f"{verdict}")
        if audit.chunk_counts:
            counts = ", ".join(f"{n} {t}" for t, n in audit.chunk_counts.items() if n)
            lines.append(f"  chunks: {audit.present_chunks} present / {audit.expected_chunks} expected ({counts})")
        if audit.embedding_model:
            lines.append(f"  embedding model: {audit.embedding_model}")
        lines.append("  versions:")
        for v in audit.versions:
            where = [w for w, on in (("live", v.live), ("schema store", v.in_schema_store),
                                     ("vector store", v.in_vector_store), ("partition", v.partition)) if on]
            gone = f" ({v.state.replace('_', ' ')})" if v.state in ("evicted", "never_indexed") else ""
            indexed = f", indexed {v.indexed_at} run {v.index_run_id[:8]}" if v.index_run_id else ""
            lines.append(f"    {v.schema_version}: {', '.join(where) or 'nowhere'}{gone}{indexed}")
        if audit.lineage:
            lines.append(f"  lineage of {audit.lineage[0].partition}:")
            for run in audit.lineage:
                lines.append(f"    {run.asset:<18} "
                             + (f"run {run.run_id} at {run.materialized_at}" if run.run_id else "not materialized"))
        lines += [f"  problem: {p}" for p in audit.problems]
        lines += [f"  warning: {w}" for w in audit.warnings]
    lines.append("")
    lines.append("audit: " + ("consistent" if report.consistent else "INCONSISTENT: vector store and schema store disagree"))
    return "\n".join(lines)
