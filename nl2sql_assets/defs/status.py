"""``index_status``: which version of each datasource serves queries, and what became of the others.

Every partition of the index assets shows green once materialized, whether its version serves
queries, is kept for rollback or was evicted by retention. So each ``chroma_collection``
materialization also records ``index_status``, an unpartitioned external asset whose metadata is
a markdown table of datasource -> live, pending, retained, evicted and never-indexed versions,
and logs an observation on each ``chroma_collection`` partition whose state just changed
(``status: retained`` / ``evicted``), so the partition itself says it no longer serves.

One source of truth, shared with ``nl2sql-assets audit`` (:func:`version_state`): the vector
store's manifest names the live version, the schema store the registered ones, the Dagster
partitions the versions ever proposed, and a ``schema_snapshot`` materialization tells a
version that was registered once (now evicted) from one that never was (a key typed into the UI).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import dagster as dg
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.pipeline import names
from nl2sql_assets.pipeline.keys import parse_partition_key, partition_key
from nl2sql_assets.schema.protocol import SchemaStore

INDEX_STATUS = dg.AssetKey(names.INDEX_STATUS)
#: Metadata key of the machine-readable status ({datasource: {version: state}}), read back to find transitions.
VERSIONS_KEY = "versions"
#: Versions shown per datasource and state in the table; the JSON entry has them all.
MAX_SHOWN = 3

INDEX_STATUS_SPEC = dg.AssetSpec(
    INDEX_STATUS,
    deps=[dg.AssetKey(names.CHROMA_COLLECTION)],
    group_name=names.ASSET_GROUP,
    kinds={"python"},
    description=(
        "Which schema version of each datasource serves queries (live), which are registered but not yet "
        "live (pending), kept for rollback (retained), deleted by retention (evicted) or never indexed. "
        "Recorded by every chroma_collection materialization; `nl2sql-assets audit` reads the same stores."
    ),
)


def version_state(version: str, *, live: str | None, in_store: bool, ever_registered: bool) -> str:
    """The state of one version (one of ``names.VERSION_STATES``).

    >>> version_state("20250102000000_bb", live="20250101000000_aa", in_store=True, ever_registered=True)
    'pending'
    >>> version_state("20240101000000_cc", live="20250101000000_aa", in_store=False, ever_registered=False)
    'never_indexed'
    """
    if version == live:
        return "live"
    if in_store:
        return "pending" if live is None or version > live else "retained"
    return "evicted" if ever_registered else "never_indexed"


class DatasourceVersions(BaseModel):
    """One datasource's row of the status table."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    tenant: str | None = None
    live: str | None = None
    states: dict[str, str]

    def of(self, state: str) -> list[str]:
        """Versions in ``state``, newest first."""
        return sorted((v for v, s in self.states.items() if s == state), reverse=True)


def datasource_versions(datasource_id: str, *, store_versions: Iterable[str], live: str | None,
                        partition_versions: Iterable[str], registered_versions: Iterable[str],
                        tenant: str | None = None) -> DatasourceVersions:
    """Every version known for a datasource, with its state (``registered_versions``: those whose
    ``schema_snapshot`` was ever materialized)."""
    stored = set(store_versions)
    registered = set(registered_versions)
    known = stored | set(partition_versions) | ({live} if live else set())
    states = {v: version_state(v, live=live, in_store=v in stored, ever_registered=v in registered)
              for v in sorted(known)}
    return DatasourceVersions(datasource_id=datasource_id, tenant=tenant, live=live, states=states)


def registered_partitions(instance: dg.DagsterInstance) -> dict[str, set[str]]:
    """Per datasource, the versions whose ``schema_snapshot`` was ever materialized (registered once)."""
    return versions_by_datasource(instance.get_materialized_partitions(dg.AssetKey(names.SCHEMA_SNAPSHOT)))


def versions_by_datasource(keys: Iterable[str]) -> dict[str, set[str]]:
    """Partition keys grouped by datasource, each parsed once; malformed keys (typed into the UI) skipped.

    >>> versions_by_datasource(["s@20261130031522_3fa9c2e1", "s@bad", "t@20261130031522_3fa9c2e1"])["s"]
    {'20261130031522_3fa9c2e1'}
    """
    out: dict[str, set[str]] = {}
    for key in keys:
        try:
            ds, version = parse_partition_key(key)
        except Nl2SqlError:
            continue
        out.setdefault(ds, set()).add(version)
    return out


def read_status(instance: dg.DagsterInstance, store: SchemaStore, vectors: VectorStore) -> list[DatasourceVersions]:
    """The status of every datasource the stores or the partitions know, by datasource id."""
    states = vectors.index_states()
    partitions = versions_by_datasource(instance.get_dynamic_partitions(names.PARTITIONS_NAME))
    registered = registered_partitions(instance)
    stored = store.all_versions()  # one read, not one per datasource: every run of `index` writes this status
    rows = []
    for ds in sorted(set(stored) | set(states) | set(partitions)):
        state, versions = states.get(ds), stored.get(ds, [])
        rows.append(datasource_versions(
            ds, store_versions=[v.schema_version for v in versions],
            live=state.live_version if state is not None else None, partition_versions=partitions.get(ds, ()),
            registered_versions=registered.get(ds, ()),
            tenant=state.tenant_id if state is not None else (versions[-1].tenant if versions else None)))
    return rows


def status_markdown(rows: Sequence[DatasourceVersions]) -> str:
    """The table the UI shows: one line per (datasource, version), the live one first and in bold;
    narrow on purpose, so the asset page shows it without scrolling."""
    lines = ["| datasource | version | state |", "|---|---|---|"]
    for row in rows:
        for state in names.VERSION_STATES:
            versions = row.of(state)
            label = f"**{state}**" if state == "live" else state.replace("_", " ")
            lines += [f"| {row.datasource_id} | `{v}` | {label} |" for v in versions[:MAX_SHOWN]]
            if len(versions) > MAX_SHOWN:
                lines.append(f"| {row.datasource_id} | +{len(versions) - MAX_SHOWN} older | {label} |")
        if not row.states:
            lines.append(f"| {row.datasource_id} | - | no version |")
    return "\n".join(lines)


def status_metadata(rows: Sequence[DatasourceVersions], trigger: str) -> dict[str, object]:
    """``status`` (markdown), ``versions`` (JSON) and ``<datasource>/live_version`` for each datasource."""
    metadata: dict[str, object] = {
        "status": dg.MetadataValue.md(status_markdown(rows)),
        VERSIONS_KEY: dg.MetadataValue.json({r.datasource_id: r.states for r in rows}),
        "datasources": len(rows),
        "live_datasources": sum(r.live is not None for r in rows),
        "updated_by": trigger,
    }
    metadata.update({f"{r.datasource_id}/live_version": r.live or "" for r in rows})
    return metadata


def _previous_states(instance: dg.DagsterInstance) -> Mapping[str, Mapping[str, str]]:
    event = instance.get_latest_materialization_event(INDEX_STATUS)
    materialization = event.asset_materialization if event is not None else None
    value = materialization.metadata.get(VERSIONS_KEY) if materialization is not None else None
    data = getattr(value, "data", None)
    return data if isinstance(data, dict) else {}


def status_events(instance: dg.DagsterInstance, store: SchemaStore, vectors: VectorStore,
                  datasource_id: str, trigger: str) -> list[dg.AssetMaterialization | dg.AssetObservation]:
    """The ``index_status`` materialization, and an observation on each of ``datasource_id``'s
    ``chroma_collection`` partitions whose state changed since the last status (live -> retained,
    retained -> evicted, ...)."""
    rows = read_status(instance, store, vectors)
    events: list[dg.AssetMaterialization | dg.AssetObservation] = [
        dg.AssetMaterialization(asset_key=INDEX_STATUS, metadata=status_metadata(rows, trigger))]
    row = next((r for r in rows if r.datasource_id == datasource_id), None)
    if row is None:
        return events
    before = _previous_states(instance).get(datasource_id, {})
    partitions = set(instance.get_dynamic_partitions(names.PARTITIONS_NAME))
    serving = row.live or "no version"
    for version, state in row.states.items():
        key = partition_key(datasource_id, version)
        if key != trigger and key in partitions and before.get(version, state) != state:
            events.append(dg.AssetObservation(
                asset_key=dg.AssetKey(names.CHROMA_COLLECTION), partition=key,
                description=f"{key} is now {state.replace('_', ' ')}; {serving} serves queries",
                metadata={"status": state, "live_version": row.live or "", "changed_by": trigger}))
    return events


def log_index_status(context: dg.AssetExecutionContext, store: SchemaStore, vectors: VectorStore,
                     datasource_id: str) -> None:
    """Record ``index_status`` from the running ``chroma_collection`` step; a store that cannot be
    read is logged, never fails the step (the index itself was published)."""
    try:
        events = status_events(context.instance, store, vectors, datasource_id, context.partition_key)
    except Nl2SqlError as exc:
        context.log.warning(f"index_status not updated: {exc}")
        return
    for event in events:
        context.log_event(event)
