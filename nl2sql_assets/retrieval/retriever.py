"""The staged schema retriever: question -> datasource, tables, columns and join paths.

Stages (``../shared/design/seed-indexing.md``, with the fixes of issue 5):

1. ``_build_semantic_query``: the question, each evidence clause and each hint become the
   query texts; proper nouns and quoted strings become entity texts. All are embedded in one
   call (one batch call for :meth:`SchemaRetriever.retrieve_batch`).
2. Routing (no datasource given): one vector search over the tenant's datasource, table and
   column chunks; datasources are ranked by their best hits per query text, then the best few
   are re-scored with lexical evidence (identifiers the question names, shared vocabulary).
3. + 4. Schema context and column candidates: one vector search over the chosen datasource's
   table, metric and column chunks gives every chunk's similarity to every query text; a column
   hit counts for its table, so tables only a column names are found too. The search reads back
   chunk ids and scores only: the chunk builder names every chunk of the snapshot, so the hits
   are placed without Chroma's metadata (reading it was most of the query's cost).
5. Planning context: :mod:`ranking` turns similarities and lexical evidence into probabilities,
   keeps tables above an adaptive cut-off, adds bridge and link tables over the join graph, and
   picks key, join and likely columns per table; relationships come from the join graph.
6. Authoritative resolution: tables, columns and keys come from the SchemaStore snapshot (the
   version asked for, else the vector store's live version, else the latest); a hit naming a
   table or column the snapshot lacks is dropped.

Failures never produce an empty answer: no candidates -> the datasource's full schema
(``fallback: "no_candidates"``); vector store down, breaker open or a model mismatch -> the full
schema from the SchemaStore with a warning (``"vector_store_unavailable"``). Unknown datasource,
tenant or version raise :class:`UnknownDatasourceError`, :class:`UnknownTenantError` or
:class:`SchemaVersionNotFoundError`; an empty question raises :class:`RetrievalError`.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from nl2sql_assets.errors import (
    EmbeddingDimensionMismatchError,
    RetrievalError,
    SchemaVersionNotFoundError,
    UnknownDatasourceError,
    UnknownTenantError,
    VectorStoreUnavailableError,
)
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkScore, SearchFilter, SearchHit
from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.entity_kinds import EntityKinds, EntityKindScorer
from nl2sql_assets.retrieval.lexical import QueryTerms, build_query_terms
from nl2sql_assets.retrieval.models import (
    QueryHints,
    RankedDatasource,
    RetrievalRequest,
    RetrievalResult,
    RetrievedTable,
    RetrieverConfig,
)

if TYPE_CHECKING:
    from nl2sql_assets.config import Settings
    from nl2sql_assets.schema.models import SchemaSnapshot

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_SCHEMA_CHUNKS = ["schema.table", "schema.metric", "schema.column"]
_ROUTE_CHUNKS = ["schema.datasource", "schema.table", "schema.column"]
# routing: dense evidence + identifiers the question names + shared vocabulary
_ROUTE_WEIGHTS = {"dense_mean": 1.0, "dense_table": 1.0, "mention": 0.2, "overlap": 0.05}


class SchemaStoreLike(Protocol):
    def get_snapshot(self, datasource_id: str, schema_version: str | None = None) -> SchemaSnapshot: ...

    def get_latest(self, datasource_id: str) -> SchemaSnapshot | None: ...

    def list_datasources(self, tenant: str | None = None) -> list[str]: ...

    def datasource_tenant(self, datasource_id: str) -> str | None: ...


class VectorStoreLike(Protocol):
    def search_many(self, queries: Sequence[str | np.ndarray], *, k: int, where: SearchFilter | None = None,
                    mmr: bool = False, documents: bool = True) -> list[list[SearchHit]]: ...

    def search_scores_many(self, queries: Sequence[str | np.ndarray], *, k: int,
                           where: SearchFilter | None = None) -> list[list[ChunkScore]]: ...

    def live_versions(self, tenant_id: str | None = None) -> dict[str, str]: ...


class EmbeddingsLike(Protocol):
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class _Cached:
    """What the retriever keeps per (datasource, version)."""

    snapshot: SchemaSnapshot
    index: ranking.SchemaIndex
    table_pos: dict[tuple[str, str], int]
    # chunk id -> ("table", (table index,)), ("column", (column index,)) or ("metric", its tables):
    # a search hit needs no metadata from the vector store to find its place
    chunk_pos: dict[str, tuple[str, tuple[int, ...]]]


@dataclass
class _Query:
    """One request on its way through the stages."""

    request: RetrievalRequest
    terms: QueryTerms
    texts: list[str]
    n_segments: int
    vectors: np.ndarray | None = None
    route_hits: list[list[SearchHit]] | Exception | None = None
    schema_hits: list[list[ChunkScore]] | Exception | None = None
    timings: dict[str, float] = field(default_factory=lambda: {"embed": 0.0, "vector": 0.0, "total": 0.0})
    warnings: list[str] = field(default_factory=list)


class SchemaRetriever:
    """Finds the datasource, tables, columns and join paths a question needs.

    Args:
        schema_store: the authoritative snapshots (``build_schema_store``).
        vector_store: the chunk index (``build_vector_store``).
        embeddings: the embedding service the index was built with (``build_embedding_service``).
        config: cut-offs, shortcut and cache size (:class:`RetrieverConfig`).
    """

    def __init__(self, schema_store: SchemaStoreLike, vector_store: VectorStoreLike, embeddings: EmbeddingsLike, *,
                 config: RetrieverConfig | None = None) -> None:
        self.schema_store = schema_store
        self.vector_store = vector_store
        self.embeddings = embeddings
        self.config = config or RetrieverConfig()
        self._cache: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._live_cache: dict[str | None, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()
        self._owned: list[object] = []
        self._kinds = EntityKindScorer(embeddings.embed_queries)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(cls, settings: Settings, *, config: RetrieverConfig | None = None) -> SchemaRetriever:
        """A retriever over the stores ``settings`` configure; :meth:`close` (or ``with``) releases them."""
        from nl2sql_assets.indexing.embeddings import build_embedding_service
        from nl2sql_assets.indexing.vector_store import build_vector_store
        from nl2sql_assets.schema.store import build_schema_store

        store = build_schema_store(settings)
        embeddings = build_embedding_service(settings)
        vector_store = build_vector_store(settings, embeddings)
        retriever = cls(store, vector_store, embeddings, config=config)
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
        queries = [self._build_semantic_query(r) for r in requests]
        for q in queries:
            self._check_scope(q.request)
        self._embed(queries)
        live: dict[str | None, tuple[dict[str, str] | None, str]] = {}
        t0 = perf_counter()
        for q in queries:
            self._live_versions(q.request.tenant, live, q)
        self._prefetch_routes(queries, live)
        targets = [self._target(q, live) for q in queries]
        self._prefetch_schemas(queries, targets, live)
        shared = (perf_counter() - t0) * 1000 / max(1, len(queries))
        results = []
        for q, target in zip(queries, targets, strict=True):
            t1 = perf_counter()
            result = target if isinstance(target, RetrievalResult) else self._retrieve_in(q, *target)
            q.timings["total"] = round((perf_counter() - t1) * 1000 + shared + q.timings["embed"], 2)
            results.append(result.model_copy(update={"timings_ms": dict(q.timings)}))
        log.debug("retrieved %d questions in %.1f ms", len(requests), (perf_counter() - started) * 1000)
        return results

    # ------------------------------------------------------------------ stage 1: the semantic query

    def _build_semantic_query(self, request: RetrievalRequest) -> _Query:
        """Question, evidence clauses and hints as query texts; entities as extra texts."""
        if not isinstance(request.question, str) or not request.question.strip():
            raise RetrievalError("the question is empty")
        if request.schema_version and not request.datasource:
            raise RetrievalError("a schema version needs a datasource (--datasource)")
        hints = request.hints.texts() if request.hints else []
        terms = build_query_terms(request.question, request.evidence, hints)
        texts = list(terms.segments) + [e for e in terms.entities if e not in terms.segments]
        return _Query(request=request, terms=terms, texts=texts, n_segments=len(terms.segments))

    def _embed(self, queries: list[_Query]) -> None:
        texts = list(dict.fromkeys(t for q in queries for t in q.texts))
        t0 = perf_counter()
        vectors = np.asarray(self.embeddings.embed_queries(texts), dtype=np.float32)
        per_question = (perf_counter() - t0) * 1000 / max(1, len(queries))
        where = {t: i for i, t in enumerate(texts)}
        for q in queries:
            q.vectors = vectors[[where[t] for t in q.texts]]
            q.timings["embed"] = round(per_question, 2)

    # ------------------------------------------------------------------ scope checks

    def _check_scope(self, request: RetrievalRequest) -> None:
        if request.tenant is not None and not self.schema_store.list_datasources(request.tenant):
            raise UnknownTenantError(request.tenant)
        if request.datasource is not None:
            visible = self.schema_store.list_datasources(request.tenant)
            if request.datasource not in visible:
                raise UnknownDatasourceError(request.datasource, visible)
            if request.schema_version is not None:
                self.schema_store.get_snapshot(request.datasource, request.schema_version)

    # ------------------------------------------------------------------ cache

    def _resolve(self, datasource: str, version: str | None, live: str | None) -> _Cached:
        """The snapshot (asked version, else live, else latest) and its indexes, from the LRU."""
        if version is None:
            version = live
        if version is not None:
            key = (datasource, version)
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    return hit
            try:
                snapshot = self.schema_store.get_snapshot(datasource, version)
            except SchemaVersionNotFoundError:
                if version != live:
                    raise
                snapshot = self._latest(datasource)
        else:
            snapshot = self._latest(datasource)
        key = (datasource, str(snapshot.schema_version))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        cached = self._build_cached(snapshot)
        with self._lock:
            self._cache[key] = cached
            while len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)
        return cached

    def _latest(self, datasource: str) -> SchemaSnapshot:
        snapshot = self.schema_store.get_latest(datasource)
        if snapshot is None:
            raise SchemaVersionNotFoundError(datasource, None)
        return snapshot

    def _build_cached(self, snapshot: SchemaSnapshot) -> _Cached:
        index = ranking.build_schema_index(snapshot, infer_joins=self.config.infer_joins)
        table_pos: dict[tuple[str, str], int] = {}
        column_pos: dict[tuple[str, str, str], int] = {}
        ci = 0
        for ti, table in enumerate(snapshot.tables):
            table_pos[(table.schema_name or "", table.name)] = ti
            for col in table.columns:
                column_pos[(table.schema_name or "", table.name, col.name)] = ci
                ci += 1
        # the chunk builder names every chunk of this version: the ids the vector store holds
        chunk_pos: dict[str, tuple[str, tuple[int, ...]]] = {}
        try:
            chunks = build_chunks(snapshot).chunks
        except ValueError as exc:  # the indexer refused it too (duplicate ids): nothing is indexed
            log.warning("datasource %s: no chunks for version %s (%s)", snapshot.datasource.id,
                        snapshot.schema_version, exc)
            chunks = []
        for chunk in chunks:
            if chunk.type == "schema.table":
                ti = table_pos.get((chunk.schema_name or "", chunk.table))
                if ti is not None:
                    chunk_pos[chunk.id] = ("table", (ti,))
            elif chunk.type == "schema.column":
                found = column_pos.get((chunk.schema_name or "", chunk.table, chunk.column))
                if found is not None:
                    chunk_pos[chunk.id] = ("column", (found,))
            elif chunk.type == "schema.metric":
                tables = tuple(i for name in chunk.tables for (_, n), i in table_pos.items() if n == name)
                if tables:
                    chunk_pos[chunk.id] = ("metric", tables)
        return _Cached(snapshot, index, table_pos, chunk_pos)

    def _live_versions(self, tenant: str | None, live: dict[str | None, tuple[dict[str, str] | None, str]],
                       q: _Query) -> dict[str, str] | None:
        """The vector store's live versions (once per batch and tenant); None when it is down."""
        if tenant not in live:
            t0 = perf_counter()
            with self._lock:
                recent = self._live_cache.get(tenant)
            if recent is not None and t0 - recent[0] < self.config.live_version_ttl_s:
                live[tenant] = (recent[1], "")
            else:
                try:
                    versions = self.vector_store.live_versions(tenant)
                    live[tenant] = (versions, "")
                    with self._lock:
                        self._live_cache[tenant] = (t0, versions)
                except (VectorStoreUnavailableError, EmbeddingDimensionMismatchError) as exc:
                    live[tenant] = (None, str(exc))
            q.timings["vector"] += round((perf_counter() - t0) * 1000, 2)
        versions, error = live[tenant]
        if versions is None:
            q.warnings.append(f"vector store unavailable ({error}); the answer comes from the schema store alone")
        return versions

    # ------------------------------------------------------------------ one question

    def _target(self, q: _Query, live: dict[str | None, tuple[dict[str, str] | None, str]]
                ) -> RetrievalResult | tuple[str, str | None, dict[str, str] | None, list[RankedDatasource]]:
        """Where the question goes (datasource, version, live versions, ranking), or a fallback result."""
        req = q.request
        versions = live[req.tenant][0]
        if req.datasource is not None:
            return req.datasource, req.schema_version, versions, [RankedDatasource(id=req.datasource, score=1.0)]
        ranked, failure = self._route(q, versions)
        if not ranked:
            raise UnknownTenantError(req.tenant) if req.tenant else RetrievalError(
                "no datasource is registered in the schema store (run `nl2sql-assets index`)")
        if failure is not None:
            return self._full_schema(q, ranked[0].id, None, versions, ranked, failure)
        return ranked[0].id, None, versions, ranked

    def _prefetch_routes(self, queries: list[_Query],
                         live: dict[str | None, tuple[dict[str, str] | None, str]]) -> None:
        """One routing search per tenant for every question without a datasource."""
        groups: dict[str | None, list[_Query]] = {}
        for q in queries:
            if q.request.datasource is None and live[q.request.tenant][0] is not None:
                groups.setdefault(q.request.tenant, []).append(q)
        for tenant, group in groups.items():
            versions = live[tenant][0] or {}
            visible = [d for d in self.schema_store.list_datasources(tenant) if d in versions]
            if not visible:
                continue
            where = SearchFilter(tenant_id=tenant, datasource_ids=visible, chunk_types=_ROUTE_CHUNKS)
            vectors = [v for q in group for v in q.vectors[: q.n_segments]]  # type: ignore[index]
            outcome = self._grouped_search(vectors, self.config.route_k, where, group)
            start = 0
            for q in group:
                if isinstance(outcome, Exception):
                    q.route_hits = outcome
                else:
                    q.route_hits = outcome[start:start + q.n_segments]
                    start += q.n_segments

    def _prefetch_schemas(self, queries: list[_Query], targets: list[object],
                          live: dict[str | None, tuple[dict[str, str] | None, str]]) -> None:
        """One schema search per (tenant, datasource, version) for the whole batch."""
        groups: dict[tuple[str | None, str, str], list[_Query]] = {}
        sizes: dict[tuple[str | None, str, str], int] = {}
        for q, target in zip(queries, targets, strict=True):
            if isinstance(target, RetrievalResult):
                continue
            datasource, version, versions, _ = target  # type: ignore[misc]
            if versions is None:
                continue
            cached = self._resolve(datasource, version, versions.get(datasource))
            snap = cached.snapshot
            key = (q.request.tenant, datasource, str(snap.schema_version))
            groups.setdefault(key, []).append(q)
            sizes[key] = len(snap.tables) + snap.column_count + len(snap.datasource.metrics)
        for key, group in groups.items():
            tenant, datasource, version = key
            where = SearchFilter(tenant_id=tenant, datasource_ids=[datasource], versions={datasource: version},
                                 chunk_types=_SCHEMA_CHUNKS)
            k = max(1, min(sizes[key], self.config.dense_k))
            vectors = [v for q in group for v in q.vectors]  # type: ignore[union-attr]
            outcome = self._grouped_scores(vectors, k, where, group)
            start = 0
            for q in group:
                if isinstance(outcome, Exception):
                    q.schema_hits = outcome
                else:
                    q.schema_hits = outcome[start:start + len(q.texts)]
                    start += len(q.texts)

    def _grouped_search(self, vectors: list[np.ndarray], k: int, where: SearchFilter,
                        group: list[_Query]) -> list[list[SearchHit]] | Exception:
        """Hits with their metadata (routing: which datasource, which table)."""
        return self._timed(group, lambda: self.vector_store.search_many(  # type: ignore[arg-type]
            vectors, k=k, where=where, documents=False))

    def _grouped_scores(self, vectors: list[np.ndarray], k: int, where: SearchFilter,
                        group: list[_Query]) -> list[list[ChunkScore]] | Exception:
        """Chunk ids and scores only (one datasource's schema: the snapshot knows the chunks)."""
        return self._timed(group, lambda: self.vector_store.search_scores_many(  # type: ignore[arg-type]
            vectors, k=k, where=where))

    @staticmethod
    def _timed(group: list[_Query], search: Callable[[], _T]) -> _T | Exception:
        t0 = perf_counter()
        try:
            return search()
        except (VectorStoreUnavailableError, EmbeddingDimensionMismatchError) as exc:
            return exc
        finally:
            share = round((perf_counter() - t0) * 1000 / max(1, len(group)), 2)
            for q in group:
                q.timings["vector"] += share

    def _retrieve_in(self, q: _Query, datasource: str, version: str | None, versions: dict[str, str] | None,
                     ranked: list[RankedDatasource]) -> RetrievalResult:
        cached = self._resolve(datasource, version, (versions or {}).get(datasource))
        snapshot = cached.snapshot
        cfg = self.config
        if cfg.small_schema_columns and snapshot.column_count <= cfg.small_schema_columns:
            return self._full_schema(q, datasource, cached, versions, ranked, "small_schema")
        if versions is None:
            return self._full_schema(q, datasource, cached, versions, ranked, "vector_store_unavailable")
        hits = q.schema_hits
        if hits is None:
            k = len(snapshot.tables) + snapshot.column_count + len(snapshot.datasource.metrics)
            where = SearchFilter(tenant_id=q.request.tenant, datasource_ids=[datasource],
                                 versions={datasource: str(snapshot.schema_version)}, chunk_types=_SCHEMA_CHUNKS)
            hits = self._grouped_scores(list(q.vectors), max(1, min(k, cfg.dense_k)), where, [q])  # type: ignore[arg-type]
        if isinstance(hits, EmbeddingDimensionMismatchError):
            return self._full_schema(q, datasource, cached, versions, ranked, "vector_store_unavailable", str(hits))
        if isinstance(hits, Exception):
            return self._full_schema(q, datasource, cached, versions, ranked, "vector_store_unavailable",
                                     f"vector store unavailable ({hits}); returning the full schema")
        dense = self._dense_scores(q, cached, hits)
        if dense is None:
            return self._full_schema(q, datasource, cached, versions, ranked, "no_candidates")
        scores = ranking.score_schema(cached.index, q.terms, dense)
        selection = ranking.select(cached.index, scores, table_threshold=cfg.table_threshold,
                                   max_tables=cfg.max_tables, column_threshold=self._column_threshold(snapshot),
                                   min_columns=cfg.min_columns_per_table, primary_keys=True)
        tables = []
        for t in selection.tables:
            table = snapshot.tables[t]
            tables.append(RetrievedTable(
                name=table.name, schema=table.schema_name or snapshot.datasource.default_schema,
                score=round(float(scores.table_prob[t]), 4),
                columns=[cached.index.lexical.columns[ci].name for ci in selection.columns[t]]))
        return RetrievalResult(
            question=q.request.question, datasources=ranked, datasource=datasource,
            schema_version=snapshot.schema_version, tables=tables,
            relationships=cached.index.graph.relationships(selection.tables), fallback=None,
            warnings=list(q.warnings))

    def _column_threshold(self, snapshot: SchemaSnapshot) -> float:
        """A column is worth sending when its probability outweighs its share of the schema."""
        return 1.0 - math.exp(-self.config.column_cost / max(1, snapshot.column_count))

    def _dense_scores(self, q: _Query, cached: _Cached, hits: list[list[ChunkScore]]) -> ranking.DenseScores | None:
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
        return ranking.DenseScores(tables=rows_t[:seg], columns=rows_c[:seg], entities=rows_c[seg:], kinds=kinds)

    # ------------------------------------------------------------------ routing

    def _route(self, q: _Query, versions: dict[str, str] | None) -> tuple[list[RankedDatasource], str | None]:
        """Rank the visible datasources; the second value names a failure (then routing was lexical)."""
        tenant = q.request.tenant
        visible = self.schema_store.list_datasources(tenant)
        if not visible:
            return [], None
        failure = None
        dense: dict[str, dict[str, float]] = {}
        if versions is None:
            failure = "vector_store_unavailable"
            q.warnings.append("routed by words alone; the full schema of the best datasource is returned")
        else:
            outcome = q.route_hits
            if outcome is None:
                where = SearchFilter(tenant_id=tenant, datasource_ids=[d for d in visible if d in versions],
                                     chunk_types=_ROUTE_CHUNKS)
                outcome = self._grouped_search(list(q.vectors[: q.n_segments]), self.config.route_k,  # type: ignore[index]
                                               where, [q])
            hits: list[list[SearchHit]] = []
            if isinstance(outcome, EmbeddingDimensionMismatchError):
                failure = "vector_store_unavailable"
                q.warnings.append(str(outcome))
            elif isinstance(outcome, Exception):
                failure = "vector_store_unavailable"
                q.warnings.append(f"vector store unavailable ({outcome}); routed by words alone, full schema returned")
            else:
                hits = outcome
            dense = _route_dense(hits, set(visible))
        scores = {ds: _ROUTE_WEIGHTS["dense_mean"] * f["mean"] + _ROUTE_WEIGHTS["dense_table"] * f["table"]
                  for ds, f in dense.items()}
        candidates = sorted(scores, key=lambda d: -scores[d])[: self.config.route_candidates]
        if not candidates:  # no dense evidence: every visible datasource by words alone
            candidates = sorted(visible)
            scores = {ds: 0.0 for ds in candidates}
        lexical = self._route_lexical(q, candidates, versions)
        for ds, bonus in lexical.items():
            scores[ds] = scores.get(ds, 0.0) + bonus
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        return [RankedDatasource(id=d, score=round(float(scores[d]), 4)) for d in ranked], failure

    def _route_lexical(self, q: _Query, candidates: list[str], versions: dict[str, str] | None) -> dict[str, float]:
        indexes = {}
        for ds in candidates:
            try:
                indexes[ds] = self._resolve(ds, None, (versions or {}).get(ds)).index
            except SchemaVersionNotFoundError:
                continue
        if not indexes:
            return {}
        df: dict[str, int] = {}
        for idx in indexes.values():
            for w in q.terms.words:
                if w in idx.lexical.vocabulary:
                    df[w] = df.get(w, 0) + 1
        n = len(indexes)
        idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}
        out = {}
        for ds, idx in indexes.items():
            mention = float(idx.lexical.column_features(q.terms)["mention"].max(initial=0.0) > 0
                            or idx.lexical.table_features(q.terms)["mention"].max(initial=0.0) > 0)
            out[ds] = (_ROUTE_WEIGHTS["mention"] * mention
                       + _ROUTE_WEIGHTS["overlap"] * idx.lexical.overlap(q.terms, idf))
        return out

    # ------------------------------------------------------------------ fallbacks

    def _full_schema(self, q: _Query, datasource: str, cached: _Cached | None, versions: dict[str, str] | None,
                     ranked: list[RankedDatasource], fallback: str, warning: str | None = None) -> RetrievalResult:
        if cached is None:
            cached = self._resolve(datasource, None, (versions or {}).get(datasource))
        snapshot = cached.snapshot
        if warning:
            q.warnings.append(warning)
        default = snapshot.datasource.default_schema
        tables = [RetrievedTable(name=t.name, schema=t.schema_name or default, score=0.0,
                                 columns=[c.name for c in t.columns])
                  for t in snapshot.tables]
        log.info("datasource %s: full schema returned (%s)", datasource, fallback)
        return RetrievalResult(
            question=q.request.question, datasources=ranked, datasource=datasource,
            schema_version=snapshot.schema_version, tables=tables,
            relationships=cached.index.graph.relationships(list(range(len(snapshot.tables)))),
            fallback=fallback, warnings=list(q.warnings))


def _route_dense(hits: list[list[SearchHit]], visible: set[str]) -> dict[str, dict[str, float]]:
    """Per datasource: the mean over query texts of its best hit, and its best table hit."""
    if not hits:
        return {}
    best: dict[str, list[float]] = {}
    table_best: dict[str, float] = {}
    floors = []
    for r, row in enumerate(hits):
        floors.append(min((h.score for h in row), default=0.0))
        for h in row:
            if h.datasource_id not in visible:
                continue
            per = best.setdefault(h.datasource_id, [math.nan] * len(hits))
            if math.isnan(per[r]) or h.score > per[r]:
                per[r] = h.score
            if h.chunk_type in ("schema.table", "schema.datasource"):
                table_best[h.datasource_id] = max(table_best.get(h.datasource_id, -1.0), h.score)
    out = {}
    for ds, per in best.items():
        filled = [floors[r] if math.isnan(v) else v for r, v in enumerate(per)]
        out[ds] = {"mean": float(np.mean(filled)), "table": table_best.get(ds, min(floors))}
    return out
