"""Index one datasource without Dagster: the pipeline's steps, in the order the assets run them.

For scripts, benchmarks and tests. The Dagster assets call the same steps
(:mod:`nl2sql_assets.pipeline.steps`) one per asset, so what is measured here is what
production runs; only the partition guards differ, because no partition exists here: the
schema store names the version.
"""

from __future__ import annotations

import logging
from datetime import datetime
from time import perf_counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.indexing.models import RefreshReport
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.pipeline.steps import (
    LLMFactory,
    build_checked_chunks,
    capture_snapshot,
    enrich,
    publish,
    quality_gate,
)
from nl2sql_assets.schema.protocol import SchemaStore

log = logging.getLogger(__name__)


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


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def index_datasource(config: DatasourceConfig, store: SchemaStore, vectors: VectorStore, *,
                     now: datetime | None = None, retention: int = 3,
                     llm: LLMFactory | None = None, stats_budget_s: float | None = None) -> IndexOutcome:
    """Index one datasource end to end: capture, enrich, checked chunks, publish with retention.

    Args:
        config: the datasources-file entry.
        store: the schema store (authoritative versions).
        vectors: where the chunks go.
        now: the capture time (default: the current UTC time).
        retention: versions kept per datasource, in both stores (>= 1).
        llm: builds the enrichment chat client (None: enrichment off).
        stats_budget_s: the adapter's statistics time budget (default: ``statistics.budget_seconds``).

    Raises:
        DatasourceError, SchemaStoreError, EmbeddingError, VectorStoreError, UncheckedChunksError:
        the failing step's error. A failure in the vector store leaves the previously live chunks serving.
    """
    if retention < 1:
        raise ValueError(f"datasource '{config.id}': retention must be >= 1, got {retention}")
    timings: dict[str, float] = {}
    started = t = perf_counter()
    captured = capture_snapshot(config, store, now=now, stats_budget_s=stats_budget_s)
    timings["read"] = _ms(captured.read_seconds)
    timings["register"] = _ms(perf_counter() - t - captured.read_seconds)
    snapshot = captured.snapshot
    if llm is not None:
        t = perf_counter()
        snapshot = enrich(store, snapshot, llm).snapshot
        timings["enrich"] = _ms(perf_counter() - t)
    t = perf_counter()
    checked = build_checked_chunks(snapshot)
    timings["chunk"] = _ms(perf_counter() - t)
    quality_gate(store, vectors.embeddings, checked, config.evaluation)
    t = perf_counter()
    published = publish(store, vectors, snapshot, checked, retention=retention)
    timings["refresh"] = _ms(published.report.seconds)
    timings["retention"] = _ms(max(perf_counter() - t - published.report.seconds, 0.0))
    timings["total"] = _ms(perf_counter() - started)
    chunk_set = checked.chunk_set
    report = published.report
    log.info("indexed %s@%s (%s): %d chunks, %d embedded, %d evicted versions, %.0f ms", config.id,
             chunk_set.schema_version, captured.status, report.total, report.embedded,
             len(published.evicted_versions), timings["total"])
    return IndexOutcome(
        datasource_id=config.id, tenant_id=chunk_set.tenant_id, schema_version=chunk_set.schema_version,
        previous_version=captured.previous_version, status=captured.status, chunk_counts=chunk_set.counts(),
        refresh=report, kept_versions=published.kept_versions, evicted_versions=published.evicted_versions,
        evicted_chunks_deleted=published.evicted_chunks_deleted, timings_ms=timings)
