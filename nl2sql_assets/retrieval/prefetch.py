"""The batched vector prefetch: one search per group of questions instead of one per question.

:meth:`SchemaRetriever.retrieve_batch` runs the routing search once per tenant (every question
without a datasource) and the schema search once per (tenant, datasource, version); each
question then takes its own rows of the answer (``Query.route_hits``, ``Query.schema_hits``).
A failed search hands every question of its group the same exception.
"""

from __future__ import annotations

from collections.abc import Sequence

from nl2sql_assets.indexing.models import SearchFilter
from nl2sql_assets.retrieval.models import RankedDatasource, RetrievalResult, RetrieverConfig
from nl2sql_assets.retrieval.query import Query
from nl2sql_assets.retrieval.schema_cache import SchemaCache
from nl2sql_assets.retrieval.vector_search import ROUTE_CHUNKS, SCHEMA_CHUNKS, LiveVersions, VectorSearch
from nl2sql_assets.schema.protocol import SchemaStore

# where a question goes: datasource, asked version, the live versions (None: store down), ranking
Target = tuple[str, str | None, dict[str, str] | None, list[RankedDatasource]]


def prefetch_routes(queries: list[Query], live: LiveVersions, *, schema_store: SchemaStore,
                    search: VectorSearch, config: RetrieverConfig) -> None:
    """One routing search per tenant for every question without a datasource."""
    groups: dict[str | None, list[Query]] = {}
    for q in queries:
        if q.request.datasource is None and live[q.request.tenant][0] is not None:
            groups.setdefault(q.request.tenant, []).append(q)
    for tenant, group in groups.items():
        versions = live[tenant][0] or {}
        every = schema_store.list_datasources(tenant)
        for q in group:  # routing reads it again otherwise: about 0.5 ms per question
            q.visible = every
        visible = [d for d in every if d in versions]
        if not visible:
            continue
        where = SearchFilter(tenant_id=tenant, datasource_ids=visible, chunk_types=ROUTE_CHUNKS)
        vectors = [v for q in group for v in q.route_vectors]  # type: ignore[union-attr]
        outcome = search.search(vectors, config.route_k, where, group)
        start = 0
        for q in group:
            if isinstance(outcome, Exception):
                q.route_hits = outcome
            else:
                q.route_hits = outcome[start:start + q.n_segments]
                start += q.n_segments


def prefetch_schemas(queries: list[Query], targets: Sequence[RetrievalResult | Target], live: LiveVersions, *,
                     schemas: SchemaCache, search: VectorSearch, config: RetrieverConfig) -> None:
    """One schema search per (tenant, datasource, version) for the whole batch."""
    groups: dict[tuple[str | None, str, str], list[Query]] = {}
    sizes: dict[tuple[str | None, str, str], int] = {}
    for q, target in zip(queries, targets, strict=True):
        if isinstance(target, RetrievalResult):
            continue
        datasource, version, versions, _ = target
        if versions is None:
            continue
        cached = schemas.resolve(datasource, version, versions.get(datasource))
        snap = cached.snapshot
        key = (q.request.tenant, datasource, str(snap.schema_version))
        groups.setdefault(key, []).append(q)
        sizes[key] = len(snap.tables) + snap.column_count + len(snap.datasource.metrics)
    for key, group in groups.items():
        tenant, datasource, version = key
        where = SearchFilter(tenant_id=tenant, datasource_ids=[datasource], versions={datasource: version},
                             chunk_types=SCHEMA_CHUNKS)
        k = max(1, min(sizes[key], config.dense_k))
        vectors = [v for q in group for v in q.vectors]  # type: ignore[union-attr]
        outcome = search.scores(vectors, k, where, group)
        start = 0
        for q in group:
            if isinstance(outcome, Exception):
                q.schema_hits = outcome
            else:
                q.schema_hits = outcome[start:start + len(q.texts)]
                start += len(q.texts)
