"""The staged schema retriever: question -> datasource, tables, columns and join paths.

Stages (the result's shape: docs/retrieval-result.md):

1. The semantic query (:mod:`~nl2sql_assets.retrieval.query`): the question, each evidence
   clause and each hint become the query texts; proper nouns and quoted strings become entity
   texts. All are embedded in one call (one batch call for :meth:`SchemaRetriever.retrieve_batch`).
2. Routing, when no datasource is given (:mod:`~nl2sql_assets.retrieval.routing`): one vector
   search over the tenant's datasource, table and column chunks; datasources are ranked by their
   best hits per query text, then the best few are re-scored with lexical evidence (identifiers
   the question names, shared vocabulary).
3. + 4. Schema context and column candidates: one vector search over the chosen datasource's
   table, metric and column chunks gives every chunk's similarity to every query text; a column
   hit counts for its table, so tables only a column names are found too. The search reads back
   chunk ids and scores only: the chunk builder names every chunk of the snapshot, so the hits
   are placed without Chroma's metadata (reading it was most of the query's cost). Both searches
   are batched (:mod:`~nl2sql_assets.retrieval.prefetch`).
5. Planning context: :mod:`~nl2sql_assets.retrieval.ranking` turns similarities and lexical
   evidence into probabilities, keeps tables above an adaptive cut-off, adds bridge and link
   tables over the join graph, and picks key, join and likely columns per table; relationships
   come from the join graph.
6. Authoritative resolution (:mod:`~nl2sql_assets.retrieval.schema_cache`): tables, columns and
   keys come from the SchemaStore snapshot (the version asked for, else the vector store's live
   version, else the latest); a hit naming a table or column the snapshot lacks is dropped.

Failures never produce an empty answer (:mod:`~nl2sql_assets.retrieval.fallback`): no
candidates -> the datasource's full schema (``fallback: "no_candidates"``); vector store down,
breaker open or a model mismatch -> the full schema from the SchemaStore with a warning
(``"vector_store_unavailable"``). Unknown datasource, tenant or version raise
:class:`UnknownDatasourceError`, :class:`UnknownTenantError` or
:class:`SchemaVersionNotFoundError`; an empty question raises :class:`RetrievalError`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from time import perf_counter
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.errors import (
    DatasourceNotVisibleError,
    EmbeddingDimensionMismatchError,
    RetrievalError,
    UnknownDatasourceError,
    UnknownTenantError,
)
from nl2sql_assets.indexing.embeddings import Embeddings, build_embedding_service
from nl2sql_assets.indexing.models import ChunkScore, SearchFilter
from nl2sql_assets.indexing.vector_store import VectorStore, build_vector_store
from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.confidence import estimate as estimate_confidence
from nl2sql_assets.retrieval.confidence import with_warning
from nl2sql_assets.retrieval.entity_kinds import EntityKinds, EntityKindScorer
from nl2sql_assets.retrieval.fallback import full_schema
from nl2sql_assets.retrieval.models import (
    QueryHints,
    RankedDatasource,
    RetrievalRequest,
    RetrievalResult,
    RetrievedTable,
    RetrieverConfig,
)
from nl2sql_assets.retrieval.prefetch import Target, prefetch_routes, prefetch_schemas
from nl2sql_assets.retrieval.query import Query, build_semantic_query, embed_queries
from nl2sql_assets.retrieval.query_adapter import QueryAdapter, shipped_adapter
from nl2sql_assets.retrieval.routing import DatasourceRouter, RouteCandidates
from nl2sql_assets.retrieval.schema_cache import CachedSchema, SchemaCache
from nl2sql_assets.retrieval.vector_search import SCHEMA_CHUNKS, LiveVersions, VectorSearch
from nl2sql_assets.retrieval.word_association import shipped_association
from nl2sql_assets.retrieval.word_similarity import WordVectorCache
from nl2sql_assets.schema.protocol import SchemaStore
from nl2sql_assets.schema.store import build_schema_store

if TYPE_CHECKING:
    from nl2sql_assets.config import Settings
    from nl2sql_assets.schema.models import SchemaSnapshot

log = logging.getLogger(__name__)


class SchemaRetriever:
    """Finds the datasource, tables, columns and join paths a question needs.

    Args:
        schema_store: the authoritative snapshots (``build_schema_store``).
        vector_store: the chunk index (``build_vector_store``).
        embeddings: the embedding service the index was built with (``build_embedding_service``).
        config: cut-offs, shortcut and cache size (:class:`RetrieverConfig`).
        adapter: the query map to use instead of the shipped one (``config.query_adapter`` still
            decides whether one is used; a map fitted without some databases, to measure on them).
    """

    def __init__(self, schema_store: SchemaStore, vector_store: VectorStore, embeddings: Embeddings, *,
                 config: RetrieverConfig | None = None, adapter: QueryAdapter | None = None) -> None:
        self.schema_store = schema_store
        self.vector_store = vector_store
        self.embeddings = embeddings
        self.config = config or RetrieverConfig()
        self._adapter_given = adapter
        self._adapter: QueryAdapter | None = None
        self._adapter_resolved = False
        self._owned: list[object] = []
        self._kinds = EntityKindScorer(embeddings.embed_queries)
        self._words = WordVectorCache() if self.config.word_meaning else None
        self._schemas = SchemaCache(schema_store, self.config,
                                    embed_words=(lambda words: embeddings.embed_documents(words).vectors)
                                    if self.config.word_meaning else None)
        self._search = VectorSearch(vector_store, self.config)
        self._router = DatasourceRouter(schema_store, self._schemas, self._search, self.config)

    # ------------------------------------------------------------------ construction

    def _query_adapter(self) -> QueryAdapter | None:
        """The query map for this retriever's model, or None (turned off, or fitted for another model).

        Resolved on the first question, not at construction: a provider may have to be asked for
        its model's dimension (OpenAI with a model it does not know), which a retriever that is
        only built must not do."""
        if not self._adapter_resolved:
            adapter = (self._adapter_given or shipped_adapter()) if self.config.query_adapter else None
            if adapter is not None and not adapter.fits(key := self.embeddings.identity.key):
                log.info("query adapter not used: it was fitted for %s, the embeddings are %s", adapter.model, key)
                adapter = None
            self._adapter, self._adapter_resolved = adapter, True
        return self._adapter

    @classmethod
    def from_settings(cls, settings: Settings, *, config: RetrieverConfig | None = None,
                      adapter: QueryAdapter | None = None) -> SchemaRetriever:
        """A retriever over the stores ``settings`` configure; :meth:`close` (or ``with``) releases them."""
        store = build_schema_store(settings)
        embeddings = build_embedding_service(settings)
        vector_store = build_vector_store(settings, embeddings)
        retriever = cls(store, vector_store, embeddings, config=config, adapter=adapter)
        retriever._owned = [vector_store, embeddings, store]
        return retriever

    def close(self) -> None:
        """Close what :meth:`from_settings` built (nothing passed in by the caller)."""
        for obj in self._owned:
            close = getattr(obj, "close", None)
            if callable(close):
                close()
        self._owned = []

    def __enter__(self) -> SchemaRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ public API

    def retrieve(self, question: str, *, datasource: str | None = None, tenant: str | None = None,
                 schema_version: str | None = None, evidence: str | None = None,
                 hints: QueryHints | None = None) -> RetrievalResult:
        """Retrieve the schema context for one question.

        Args:
            question: the natural-language question.
            datasource: restrict to this datasource (no routing).
            tenant: only this tenant's datasources and chunks are visible.
            schema_version: resolve against this version (needs ``datasource``).
            evidence: optional domain hints ("eligible rate = free meals / enrollment").
            hints: optional structured hints.

        Raises:
            RetrievalError: empty question, or a version without a datasource.
            UnknownDatasourceError, UnknownTenantError, SchemaVersionNotFoundError.
        """
        request = RetrievalRequest(question=question, datasource=datasource, tenant=tenant,
                                   schema_version=schema_version, evidence=evidence, hints=hints)
        return self.retrieve_batch([request])[0]

    def retrieve_batch(self, requests: Sequence[RetrievalRequest]) -> list[RetrievalResult]:
        """:meth:`retrieve` for many questions: every query text is embedded in one call.

        Raises the first request's error (validate inputs first when mixing good and bad ones;
        the CLI's ``--batch`` answers each line separately).
        """
        started = perf_counter()
        queries = [build_semantic_query(r) for r in requests]
        for q in queries:
            self._check_scope(q.request)
        embed_queries(queries, self.embeddings, self._words, self._query_adapter())
        t0 = perf_counter()
        live = self._route_search(queries)
        targets = [self._target(q, live) for q in queries]
        prefetch_schemas(queries, targets, live, schemas=self._schemas, search=self._search, config=self.config)
        shared = (perf_counter() - t0) * 1000 / max(1, len(queries))
        results = []
        for q, target in zip(queries, targets, strict=True):
            t1 = perf_counter()
            result = target if isinstance(target, RetrievalResult) else self._retrieve_in(q, *target)
            q.timings["total"] = round((perf_counter() - t1) * 1000 + shared + q.timings["embed"], 2)
            results.append(result.model_copy(update={"timings_ms": dict(q.timings)}))
        log.debug("retrieved %d questions in %.1f ms", len(requests), (perf_counter() - started) * 1000)
        return results

    def route_candidates(self, requests: Sequence[RetrievalRequest], count: int | None = None) -> list[RouteCandidates]:
        """Routing's candidates and their feature rows for questions without a datasource, by the
        path :meth:`retrieve_batch` takes (``benchmarks/fit_routing.py`` fits ``ROUTE_MODEL`` on them)."""
        queries = [build_semantic_query(r) for r in requests]
        for q in queries:
            self._check_scope(q.request)
        embed_queries(queries, self.embeddings, self._words, self._query_adapter())
        live = self._route_search(queries)
        out = []
        for q in queries:
            found = self._router.candidates(q, live[q.request.tenant][0], count)
            if found is None:
                raise _nothing_visible(q.request.tenant)
            out.append(found)
        return out

    def _route_search(self, queries: list[Query]) -> LiveVersions:
        """The live versions per tenant, and one routing search per tenant for the questions without a datasource."""
        live: LiveVersions = {}
        for q in queries:
            self._search.live_versions(q.request.tenant, live, q)
        prefetch_routes(queries, live, schema_store=self.schema_store, search=self._search, config=self.config)
        return live

    # ------------------------------------------------------------------ scope checks

    def _check_scope(self, request: RetrievalRequest) -> None:
        if request.tenant is None and request.datasource is None:
            return
        visible = self.schema_store.list_datasources(request.tenant)
        if request.tenant is not None and not visible:
            raise UnknownTenantError(request.tenant)
        if request.datasource is not None:
            if request.datasource not in visible:
                if request.tenant is not None and self.schema_store.datasource_tenant(request.datasource):
                    raise DatasourceNotVisibleError(request.datasource, request.tenant)
                raise UnknownDatasourceError(request.datasource, visible)  # hint: this tenant's only
            if request.schema_version is not None:
                self.schema_store.get_snapshot(request.datasource, request.schema_version)

    # ------------------------------------------------------------------ one question

    def _target(self, q: Query, live: LiveVersions) -> RetrievalResult | Target:
        """Where the question goes (datasource, version, live versions, ranking), or a fallback result."""
        req = q.request
        versions = live[req.tenant][0]
        if req.datasource is not None:
            return req.datasource, req.schema_version, versions, [RankedDatasource(id=req.datasource, score=1.0)]
        ranked, failure = self._router.route(q, versions)
        if not ranked:
            raise _nothing_visible(req.tenant)
        if failure is not None:
            return full_schema(self._schemas, q, ranked[0].id, None, versions, ranked, failure)
        return ranked[0].id, None, versions, ranked

    def _retrieve_in(self, q: Query, datasource: str, version: str | None, versions: dict[str, str] | None,
                     ranked: list[RankedDatasource]) -> RetrievalResult:
        cached = self._schemas.resolve(datasource, version, (versions or {}).get(datasource))
        snapshot = cached.snapshot
        cfg = self.config
        if cfg.small_schema_columns and snapshot.column_count <= cfg.small_schema_columns:
            return full_schema(self._schemas, q, datasource, cached, versions, ranked, "small_schema")
        if versions is None:
            return full_schema(self._schemas, q, datasource, cached, versions, ranked, "vector_store_unavailable")
        hits = q.schema_hits
        if hits is None:
            k = len(snapshot.tables) + snapshot.column_count + len(snapshot.datasource.metrics)
            where = SearchFilter(tenant_id=q.request.tenant, datasource_ids=[datasource],
                                 versions={datasource: str(snapshot.schema_version)}, chunk_types=SCHEMA_CHUNKS)
            hits = self._search.scores(list(q.vectors),  # type: ignore[arg-type]
                                       max(1, min(k, cfg.dense_k)), where, [q])
        if isinstance(hits, EmbeddingDimensionMismatchError):
            return full_schema(self._schemas, q, datasource, cached, versions, ranked, "vector_store_unavailable",
                               str(hits))
        if isinstance(hits, Exception):
            return full_schema(self._schemas, q, datasource, cached, versions, ranked, "vector_store_unavailable",
                               f"vector store unavailable ({hits}); returning the full schema")
        dense = self._dense_scores(q, cached, hits)
        if dense is None:
            return full_schema(self._schemas, q, datasource, cached, versions, ranked, "no_candidates")
        scores = ranking.score_schema(cached.index, q.terms, dense,
                                      shipped_association() if cfg.word_association else None)
        selection = ranking.select(cached.index, scores, table_threshold=cfg.table_threshold,
                                   max_tables=cfg.max_tables, column_threshold=self._column_threshold(snapshot),
                                   min_columns=cfg.min_columns_per_table, primary_keys=True,
                                   recall_target=cfg.recall_target, column_recall_target=cfg.column_recall_target,
                                   column_share_cost=cfg.column_share_cost,
                                   min_columns_sent=cfg.min_columns_sent, budget_sharpness=cfg.budget_sharpness,
                                   sharpen_max_tables=cfg.sharpen_max_tables,
                                   whole_rows=cfg.whole_rows and q.terms.whole_rows)
        tables = []
        for t in selection.tables:
            table = snapshot.tables[t]
            tables.append(RetrievedTable(
                name=table.name, schema=table.schema_name or snapshot.datasource.default_schema,
                score=round(float(scores.table_prob[t]), 4),
                columns=[cached.index.lexical.columns[ci].name for ci in selection.columns[t]]))
        confidence = estimate_confidence(scores.table_prob, selection.tables, dense, ranked)
        return RetrievalResult(
            question=q.request.question, datasources=ranked, datasource=datasource,
            schema_version=snapshot.schema_version, tables=tables,
            relationships=cached.index.graph.relationships(selection.tables), fallback=None,
            confidence=confidence, warnings=with_warning(q.warnings, confidence))

    def _column_threshold(self, snapshot: SchemaSnapshot) -> float:
        """A column is worth sending when its probability outweighs its share of the schema."""
        return 1.0 - math.exp(-self.config.column_cost / max(1, snapshot.column_count))

    def _dense_scores(self, q: Query, cached: CachedSchema,
                      hits: list[list[ChunkScore]]) -> ranking.DenseScores | None:
        """Similarity matrices in snapshot order; hits the snapshot does not know are dropped."""
        n_tables = len(cached.snapshot.tables)
        n_columns = len(cached.index.lexical.columns)
        rows_t = np.zeros((len(hits), n_tables), dtype=np.float64)
        rows_c = np.zeros((len(hits), n_columns), dtype=np.float64)
        found = 0
        for r, row_hits in enumerate(hits):
            floor = min((h.score for h in row_hits), default=0.0) - ranking.FLOOR_MARGIN
            rows_t[r].fill(floor)
            rows_c[r].fill(floor)
            for h in row_hits:
                place = cached.chunk_pos.get(h.record_id) or cached.chunk_pos.get(h.chunk_id)
                if place is None:
                    continue
                kind, positions = place
                found += 1
                if kind == "column":
                    rows_c[r, positions[0]] = h.score
                elif kind == "table":
                    rows_t[r, positions[0]] = h.score
                else:  # a metric speaks for every table it names
                    for ti in positions:
                        rows_t[r, ti] = max(rows_t[r, ti], h.score)
        if not found:
            return None
        seg = q.n_segments
        kinds = self._kinds.scores(q.vectors[seg:]) if len(q.texts) > seg else EntityKinds.none()  # type: ignore[index]
        return ranking.DenseScores(tables=rows_t[:seg], columns=rows_c[:seg], entities=rows_c[seg:], kinds=kinds,
                                   words=self._schemas.word_scores(cached, q.word_vectors, q.words))


def _nothing_visible(tenant: str | None) -> Exception:
    """The error for a tenant (or a store) with no datasource to route to."""
    if tenant:
        return UnknownTenantError(tenant)
    return RetrievalError("no datasource is registered in the schema store (run `nl2sql-assets index`)")
