"""Indexing without Dagster: read -> (enrich) -> register -> chunk -> refresh -> retention.

Each step is its own function so the Dagster assets can call them one by one;
:func:`index_datasource` composes them for tests, the demo and the overhead benchmark.
Nothing here holds state: the schema store and the vector store are passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.adapters.base import open_adapter
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, RefreshReport

if TYPE_CHECKING:
    from nl2sql_assets.config import DatasourceConfig
    from nl2sql_assets.indexing.vector_store import ChromaVectorStore
    from nl2sql_assets.schema.models import SchemaSnapshot
    from nl2sql_assets.schema.protocol import RegisterResult, SchemaStore

log = logging.getLogger(__name__)

Enricher = Callable[["SchemaSnapshot"], "SchemaSnapshot"]


class IndexOutcome(BaseModel):
    """What indexing one datasource did.

    ``status`` is the schema store's verdict (``new`` version, ``metadata_updated`` in place,
    ``unchanged``); ``refresh`` the vector store's report; ``evicted_versions`` the versions
    retention removed from both stores; ``timings_ms`` per step and in total.
    """

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    tenant_id: str
    schema_version: str
    previous_version: str | None
    status: Literal["new", "metadata_updated", "unchanged"]
    chunk_counts: dict[str, int]
    refresh: RefreshReport
    kept_versions: list[str]
    evicted_versions: list[str]
    evicted_chunks_deleted: int
    timings_ms: dict[str, float] = Field(default_factory=dict)


def read_snapshot(config: DatasourceConfig, *, now: datetime | None = None,
                  stats_budget_s: float = 30.0) -> SchemaSnapshot:
    """A full snapshot of the datasource (structure, statistics, PII flags), captured at ``now``.

    Raises:
        DatasourceError: the datasource cannot be read (the message names it, never the password).
    """
    adapter = open_adapter(config, stats_budget_s=stats_budget_s)
    try:
        return adapter.read_snapshot(now or datetime.now(UTC))
    finally:
        adapter.close()


def register(store: SchemaStore, snapshot: SchemaSnapshot) -> RegisterResult:
    """Store the snapshot (idempotent per structure); the result carries the versioned snapshot."""
    return store.register_snapshot(snapshot)


def chunks_for(snapshot: SchemaSnapshot) -> ChunkSet:
    """The chunk set of a registered snapshot."""
    return build_chunks(snapshot)


def versions_to_keep(store: SchemaStore, datasource_id: str, schema_version: str, retention: int) -> list[str]:
    """The other versions whose chunks stay in the vector store: the newest ``retention - 1`` besides this one."""
    if retention < 1:
        raise ValueError(f"datasource '{datasource_id}': retention must be >= 1, got {retention}")
    newest_first = [v.schema_version for v in reversed(store.list_versions(datasource_id))]
    others = [v for v in newest_first if v != schema_version]
    return others[: retention - 1]


def refresh_index(vector_store: ChromaVectorStore, chunk_set: ChunkSet, *,
                  keep_versions: list[str] | None = None, make_live: bool = True) -> RefreshReport:
    """Make the chunk set its datasource's live set (incremental and atomic; see the vector store)."""
    return vector_store.refresh_schema_chunks(chunk_set.datasource_id, chunk_set.schema_version, chunk_set.chunks,
                                              tenant_id=chunk_set.tenant_id, keep_versions=keep_versions,
                                              make_live=make_live)


def apply_retention(store: SchemaStore, vector_store: ChromaVectorStore, datasource_id: str,
                    retention: int) -> tuple[list[str], int]:
    """Evict all but the newest ``retention`` versions from the schema store, then their chunks.

    Returns:
        The evicted versions (oldest first) and how many chunks of theirs were still deleted.
    """
    evicted = store.apply_retention(datasource_id, retention)
    deleted = vector_store.delete_versions(datasource_id, evicted) if evicted else 0
    return evicted, deleted


def index_datasource(config: DatasourceConfig, store: SchemaStore, vector_store: ChromaVectorStore, *,
                     now: datetime | None = None, retention: int = 3, enrich: Enricher | None = None,
                     stats_budget_s: float = 30.0) -> IndexOutcome:
    """Index one datasource end to end.

    Args:
        config: the datasources-file entry.
        store: the schema store (authoritative versions).
        vector_store: where the chunks go.
        now: the capture time (default: the current UTC time).
        retention: versions kept per datasource, in both stores (>= 1).
        enrich: optional snapshot -> snapshot pass (LLM enrichment); structure must not change.
        stats_budget_s: the adapter's statistics time budget.

    Raises:
        DatasourceError, SchemaStoreError, EmbeddingError, VectorStoreError: the failing step's
        error. A failure in the vector store leaves the previously live chunks serving.
    """
    if retention < 1:
        raise ValueError(f"datasource '{config.id}': retention must be >= 1, got {retention}")
    timings: dict[str, float] = {}
    started = perf_counter()

    def lap(name: str, t0: float) -> float:
        t1 = perf_counter()
        timings[name] = round((t1 - t0) * 1000, 2)
        return t1

    t = perf_counter()
    snapshot = read_snapshot(config, now=now, stats_budget_s=stats_budget_s)
    t = lap("read", t)
    if enrich is not None:
        snapshot = enrich(snapshot)
        if snapshot.datasource.id != config.id:
            raise ValueError(f"datasource '{config.id}': enrichment returned a snapshot of "
                             f"'{snapshot.datasource.id}'")
        t = lap("enrich", t)
    result = register(store, snapshot)
    t = lap("register", t)
    chunk_set = chunks_for(result.snapshot)
    t = lap("chunk", t)
    keep = versions_to_keep(store, config.id, result.schema_version, retention)
    report = refresh_index(vector_store, chunk_set, keep_versions=keep)
    t = lap("refresh", t)
    evicted, deleted = apply_retention(store, vector_store, config.id, retention)
    lap("retention", t)
    timings["total"] = round((perf_counter() - started) * 1000, 2)
    outcome = IndexOutcome(
        datasource_id=config.id, tenant_id=chunk_set.tenant_id, schema_version=result.schema_version,
        previous_version=result.previous_version, status=result.status, chunk_counts=chunk_set.counts(),
        refresh=report, kept_versions=keep, evicted_versions=evicted, evicted_chunks_deleted=deleted,
        timings_ms=timings)
    log.info("indexed %s@%s (%s): %d chunks, %d embedded, %d evicted versions, %.0f ms", config.id,
             result.schema_version, result.status, report.total, report.embedded, len(evicted), timings["total"])
    return outcome
