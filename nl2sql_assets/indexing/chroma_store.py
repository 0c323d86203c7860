"""The Chroma vector store: versioned, tenant-scoped schema chunks with atomic refreshes.

This class is the public face; the parts live beside it: ``refresh_plan`` decides what a
refresh writes, retires and deletes (and explains the generations that make it atomic),
``chroma_refresh`` executes such a plan, ``manifest`` reads and writes the per-datasource
record readers start from, ``chroma_queries`` builds the filters, and ``chroma_connection``
owns the client, the collections and the breaker.

A failure before the manifest flips leaves readers at the old generation; the partial records
are removed at once (best effort) and, should that fail too, by the next refresh. An embedded
store's writes take its writer lock (``writer_lock``: one writer across processes); a server's
refreshes of one datasource must not overlap (the Dagster job serializes them).

Model identity: searching a collection whose recorded provider/model/dimension differs from
the configured embeddings raises ``EmbeddingDimensionMismatchError`` (a re-index fixes it);
pointer, id and chunk reads still work, for audits. A refresh with the new model recreates
the collection and its manifest, so every datasource must be re-indexed.

Records are shared between versions (``refresh_plan``): a refresh writes and embeds only the
chunks whose content changed; the rest stay the records earlier versions wrote. Vectors of
texts the store already holds (content that came back, a migration from the previous layout)
are copied (``reused`` in the report) before the embedding service is asked, whose own cache
covers texts seen in earlier runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nl2sql_assets.errors import Nl2SqlError, VectorStoreError, VectorStoreUnavailableError
from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.chroma_connection import DEFAULT_COLLECTION, ChromaConnection, StoreFiles, identity_of
from nl2sql_assets.indexing.chroma_queries import (
    MAX_HITS_PER_QUERY_CALL,
    Scope,
    broad_fetch,
    mmr_order,
    search_hit,
    stored_chunk,
    visible_rows,
    visible_where,
)
from nl2sql_assets.indexing.chroma_refresh import PlanExecutor, drop_versions, planning_records
from nl2sql_assets.indexing.exact_search import RecordSets, exact_query
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.manifest import GenerationManifest
from nl2sql_assets.indexing.models import (
    ChunkScore,
    ModelIdentity,
    RefreshReport,
    SchemaChunk,
    SearchFilter,
    SearchHit,
    StoredChunk,
)
from nl2sql_assets.indexing.refresh_plan import (
    ManifestState,
    RecordCheck,
    check_chunks,
    check_records,
    chunk_id_for,
    plan_refresh,
    template_of_record,
)
from nl2sql_assets.indexing.writer_lock import WriterLock

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from nl2sql_assets.metrics import MetricsRegistry

log = logging.getLogger(__name__)

R = TypeVar("R")
BREAKER_NAME = "vector_store"
#: Turns one query's part of a Chroma answer into results: (query vector, answer, query index, scope).
Convert = Callable[[np.ndarray, dict[str, Any], int, Scope], list[R]]


class ChromaVectorStore:
    """Schema chunks in Chroma: incremental atomic refresh, filtered search with MMR, tenancy.

    Args:
        client: a Chroma client, or a zero-argument factory for one (created lazily through
            the breaker, so an unreachable server fails fast instead of at construction).
        embeddings: the embedding service; its identity must match the collection's.
        collection_name: the collection; the manifest is ``<collection_name>__manifest``.
        breaker: the circuit breaker for every Chroma call (default: a new one named
            ``vector_store``).
        write_batch_size: chunks embedded and upserted per batch.
        where: a label for messages and logs (path or host:port), never a secret.
        metrics: optional registry: ``vector_refresh_chunks_total`` (by datasource and outcome:
            embedded, cached, reused, unchanged, deleted), ``vector_refresh_seconds``,
            ``vector_search_seconds`` and ``vector_store_errors_total`` (by kind), plus the
            breaker's state gauge.
        files: an embedded store's folder: a failing call checks ``chroma.sqlite3`` and raises
            ``VectorStoreCorruptError`` (how to rebuild) when it is damaged; writes take the
            folder's writer lock.
    """

    def __init__(self, client: ClientAPI | Callable[[], ClientAPI], embeddings: Embeddings, *,
                 collection_name: str = DEFAULT_COLLECTION, breaker: CircuitBreaker | None = None,
                 write_batch_size: int = 256, where: str = "chroma",
                 metrics: MetricsRegistry | None = None, files: StoreFiles | None = None) -> None:
        self.metrics = metrics
        self.embeddings = embeddings
        self.breaker = breaker or CircuitBreaker(BREAKER_NAME, failure_types=(VectorStoreUnavailableError,),
                                                 metrics=metrics)
        self._conn = ChromaConnection(client, lambda: self.identity, collection_name=collection_name,
                                      breaker=self.breaker, where=where, files=files)
        self.collection_name = self._conn.collection_name
        self.manifest_name = self._conn.manifest_name
        if write_batch_size < 1:
            raise ValueError(f"write_batch_size must be >= 1, got {write_batch_size}")
        self.write_batch_size = write_batch_size
        self.where = where
        self._manifest = GenerationManifest(self._conn)
        self._sets = RecordSets()  # record sets kept and ranked here (exact_search)
        self._writer = WriterLock(files.folder) if files is not None else None

    @property
    def identity(self) -> ModelIdentity:
        """The configured model identity (the embedding service's)."""
        return self.embeddings.identity

    @property
    def _client_factory(self) -> Callable[[], ClientAPI] | None:
        """The client factory this store was given (tests build a second store on it)."""
        return self._conn.client_factory

    # ------------------------------------------------------------------ manifest

    def index_state(self, datasource_id: str) -> ManifestState | None:
        """The datasource's pointer record (live version, generation, counts, digest).

        Pointer, id and chunk reads work whatever model made the vectors (audits need them);
        only searching checks the model identity.

        Raises:
            VectorStoreCorruptError: the store's files are damaged (never taken for "not indexed").
            VectorStoreUnavailableError: Chroma does not answer, or the breaker is open.
        """
        return self._manifest.get(datasource_id)

    def index_states(self, tenant_id: str | None = None) -> dict[str, ManifestState]:
        """Every datasource's pointer record, optionally only one tenant's."""
        return {ds: s for ds, s in sorted(self._manifest.read().items())
                if tenant_id is None or s.tenant_id == tenant_id}

    def live_version(self, datasource_id: str) -> str | None:
        """The version readers see by default; None when the datasource is not indexed."""
        state = self.index_state(datasource_id)
        return state.live_version if state else None

    def live_versions(self, tenant_id: str | None = None) -> dict[str, str]:
        """``{datasource_id: live_version}`` for every (or one tenant's) indexed datasource."""
        return {ds: s.live_version for ds, s in self.index_states(tenant_id).items() if s.live_version}

    def stored_identity(self) -> ModelIdentity | None:
        """The model identity recorded on the collection; None when there is no collection."""
        coll = self._conn.call("open collection", lambda: self._conn.get_collection(self.collection_name))
        return identity_of(coll) if coll is not None else None

    # ------------------------------------------------------------------ refresh

    def refresh_schema_chunks(self, datasource_id: str, schema_version: str, chunks: Sequence[SchemaChunk], *,
                              tenant_id: str, keep_versions: list[str] | None = None,
                              make_live: bool = True) -> RefreshReport:
        """Make ``chunks`` the datasource's set for ``schema_version``, atomically for readers.

        Args:
            datasource_id, schema_version: what the chunks belong to (every chunk must agree).
            chunks: the complete chunk set of that version (``build_chunks(...).chunks``).
            tenant_id: the datasource's tenant (every chunk must agree).
            keep_versions: other versions whose chunks stay (retention); every other version of
                the datasource is deleted. Default: keep only ``schema_version``.
            make_live: flip the live pointer to ``schema_version`` (default). False writes the
                version for explicit-version searches and keeps the current live version (and
                its chunks).

        Returns:
            RefreshReport: unchanged / upserted / deleted counts, and how many texts were
            embedded, taken from the embedding cache, or reused from the store.

        Raises:
            ValueError: a chunk belongs to another datasource, version or tenant, or ids repeat.
            EmbeddingError: the embedding provider failed (the previous set keeps serving).
            VectorStoreError: Chroma failed (the previous set keeps serving, unless the message
                says the new version is already live and only the clean-up failed).
        """
        try:
            with self._writing(f"refresh {datasource_id}@{schema_version}") as waited:
                report = self._refresh(datasource_id, schema_version, list(chunks), tenant_id, keep_versions,
                                       make_live).model_copy(update={"waited_s": round(waited, 3)})
        except Nl2SqlError as exc:
            self._count_error(exc)
            raise
        self._record_refresh(report)
        return report

    def _refresh(self, datasource_id: str, schema_version: str, chunks: list[SchemaChunk], tenant_id: str,
                 keep_versions: list[str] | None, make_live: bool) -> RefreshReport:
        """Read what is stored, plan, execute (leftovers, writes, retirements, flip, clean-up), report."""
        started = perf_counter()
        check_chunks(datasource_id, schema_version, tenant_id, chunks)  # before touching Chroma
        coll = self._conn.write_collection()
        self._conn.manifest_collection(create=True)
        state = self._manifest.get(datasource_id)
        records = planning_records(self._conn, coll, datasource_id, state)
        if state is not None and state.legacy:
            log.warning("datasource %s: the vector store holds the previous layout (one record per chunk and "
                        "version, %d records); migrating it to shared records by re-indexing %s. Version %s "
                        "keeps serving until the new generation is complete; older retained versions of the "
                        "previous layout are not carried over", datasource_id, len(records), schema_version,
                        state.live_version or "(none)")
        plan = plan_refresh(
            records, chunks, datasource_id=datasource_id, schema_version=schema_version, tenant_id=tenant_id, state=state,
            keep_versions=keep_versions, make_live=make_live, model_key=self.identity.key,
            updated_at=datetime.now(UTC).isoformat(timespec="seconds"))
        executor = PlanExecutor(self._conn, self._manifest, self.embeddings, write_batch_size=self.write_batch_size)
        embedded, from_cache, reused = executor.run(coll, plan)

        report = RefreshReport(
            datasource_id=datasource_id, schema_version=schema_version, total=len(chunks),
            unchanged=plan.unchanged, upserted=len(plan.writes), deleted=plan.deleted, embedded=embedded,
            from_cache=from_cache, reused=reused, model=self.identity, generation=plan.new_generation,
            seconds=round(perf_counter() - started, 4))
        log.info("refreshed %s@%s: %d chunks, %d unchanged, %d upserted (%d embedded, %d cached, %d reused), "
                 "%d deleted, generation %d", datasource_id, schema_version, report.total, report.unchanged,
                 report.upserted, report.embedded, report.from_cache, report.reused, report.deleted,
                 plan.new_generation)
        return report

    def _writing(self, what: str) -> AbstractContextManager[float]:
        return self._writer.hold(what) if self._writer is not None else nullcontext(0.0)

    def _count_error(self, exc: Exception) -> None:
        if self.metrics is not None:
            self.metrics.inc("vector_store_errors_total", 1, {"kind": type(exc).__name__})

    def _record_refresh(self, report: RefreshReport) -> None:
        if self.metrics is None:
            return
        for outcome, amount in (("embedded", report.embedded), ("cached", report.from_cache),
                                ("reused", report.reused), ("unchanged", report.unchanged),
                                ("deleted", report.deleted)):
            self.metrics.inc("vector_refresh_chunks_total", amount,
                             {"datasource": report.datasource_id, "outcome": outcome})
        self.metrics.observe("vector_refresh_seconds", report.seconds, {"datasource": report.datasource_id})

    # ------------------------------------------------------------------ search

    def search(self, query: str | np.ndarray, *, k: int, where: SearchFilter | None = None, mmr: bool = False,
               lambda_mult: float = 0.7, fetch_k: int | None = None) -> list[SearchHit]:
        """The ``k`` chunks most similar to ``query`` within ``where``, best first.

        ``score`` is ``1 - cosine distance``. With ``mmr`` the ``fetch_k`` (default ``4*k``)
        nearest are re-ranked by maximal marginal relevance; scores stay the similarities.
        By default each datasource is searched at its live version (``where.versions``
        overrides per datasource); with ``where.tenant_id`` only that tenant's chunks.

        Raises:
            EmbeddingDimensionMismatchError: the collection holds another model's vectors.
            VectorStoreUnavailableError: Chroma is unreachable or the breaker is open.
            VectorStoreCorruptError: the store's files are damaged.
        """
        return self.search_many([query], k=k, where=where, mmr=mmr, lambda_mult=lambda_mult, fetch_k=fetch_k)[0]

    def search_many(self, queries: Sequence[str | np.ndarray], *, k: int, where: SearchFilter | None = None,
                    mmr: bool = False, lambda_mult: float = 0.7, fetch_k: int | None = None,
                    documents: bool = True) -> list[list[SearchHit]]:
        """:meth:`search` for several queries with one filter: one manifest read, one Chroma query.

        ``documents=False`` leaves each hit's ``document`` empty: a caller that reads only scores
        and metadata saves Chroma reading the texts.
        """
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be within [0, 1], got {lambda_mult}")
        n = max(k, fetch_k if fetch_k is not None else 4 * k) if mmr else k
        include = (["documents"] if documents else []) + ["metadatas", "distances"] + (["embeddings"] if mmr else [])

        def hits_of(vector: np.ndarray, res: dict[str, Any], qi: int, scope: Scope) -> list[SearchHit]:
            ids = res["ids"][qi]
            metas = (res["metadatas"] or [[]])[qi]
            docs = (res["documents"] or [[]])[qi] if documents else [None] * len(ids)
            dists = (res["distances"] or [[]])[qi]
            hits = [search_hit(sid, meta, doc, 1.0 - float(dist), scope.versions)
                    for sid, meta, doc, dist in zip(ids, metas, docs, dists, strict=False)]
            if mmr and hits:
                cand = np.asarray(res["embeddings"][qi], dtype=np.float32)
                return [hits[i] for i in mmr_order(vector, cand, k, lambda_mult)]
            return sorted(hits, key=lambda h: (-h.score, h.id))[:k]

        return self._searching(queries, k, n, where, include, hits_of)

    def search_scores_many(self, queries: Sequence[str | np.ndarray], *, k: int,
                           where: SearchFilter | None = None) -> list[list[ChunkScore]]:
        """The ``k`` nearest chunk ids per query with their scores, best first: :meth:`search_many`
        without reading metadata back, which is most of what a Chroma query costs (about 17 -> 7 ms
        for 4 query texts x 30 hits on a 2-core machine). For callers that know the chunks already.
        """
        # A batch's query texts find mostly the same records: each is named once per scope, and its
        # score built unvalidated (an id this store derived, a float). For 600 BIRD questions in
        # batches of 32 (100,000 hits) that cut the retriever's CPU time by about 6%.
        names: dict[str, str] = {}
        named_in: list[Scope] = []

        def scores_of(vector: np.ndarray, res: dict[str, Any], qi: int, scope: Scope) -> list[ChunkScore]:
            if not named_in or named_in[0] is not scope:  # a retry searches with a new scope
                named_in[:] = [scope]
                names.clear()
            found: list[ChunkScore] = []
            for sid, dist in zip(res["ids"][qi], (res["distances"] or [[]])[qi], strict=False):
                record_id = names.get(sid)
                if record_id is None:
                    record_id = names[sid] = scope.chunk_id(sid)
                found.append(ChunkScore.model_construct(record_id=record_id, score=1.0 - float(dist)))
            return sorted(found, key=lambda h: (-h.score, h.record_id))[:k]

        return self._searching(queries, k, k, where, ["distances"], scores_of)

    def _searching(self, queries: Sequence[str | np.ndarray], k: int, n: int, where: SearchFilter | None,
                   include: list[str], convert: Convert[R]) -> list[list[R]]:
        """Validate, query (again once when the collection was recreated elsewhere), count errors."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        where = where or SearchFilter()
        if not queries:
            return []
        started = perf_counter()
        try:
            try:
                return self._query_many(queries, n, where, include, convert)
            except VectorStoreError as exc:
                from chromadb.errors import NotFoundError

                if not isinstance(exc.__cause__, NotFoundError):
                    raise
                # the collection was dropped or recreated by another process: look it up again once
                return self._query_many(queries, n, where, include, convert)
        except Nl2SqlError as exc:
            self._count_error(exc)
            raise
        finally:
            if self.metrics is not None:
                self.metrics.observe("vector_search_seconds", perf_counter() - started)

    def _query_many(self, queries: Sequence[str | np.ndarray], n: int, where: SearchFilter, include: list[str],
                    convert: Convert[R]) -> list[list[R]]:
        coll = self._conn.read_collection()
        scope = self._manifest.scope(where) if coll is not None else None
        if coll is None or scope is None:
            return [[] for _ in queries]
        vectors = self._query_vectors(queries)
        out: list[list[R]] = []
        # many datasources: a cheap filter, more hits, visibility checked here (chroma_queries.Scope)
        fetch = broad_fetch(n) if scope.broad is not None else n
        asked = include if scope.broad is None or "metadatas" in include else [*include, "metadatas"]

        def query(part: np.ndarray, k: int, where: dict[str, Any] | None, what: list[str]) -> dict[str, Any]:
            return self._conn.call("search", lambda: coll.query(  # type: ignore[no-any-return]
                query_embeddings=part, n_results=k, where=where, include=what))  # type: ignore[arg-type]

        exact = exact_query(self._conn, coll, vectors, n, scope, include, self._sets)
        if exact is not None:  # a large batch, or a set searched before: ranked here (exact_search)
            return [convert(vectors[qi], exact, qi, scope) for qi in range(len(vectors))]
        per_call = max(1, MAX_HITS_PER_QUERY_CALL // fetch)
        for start in range(0, len(vectors), per_call):
            part = vectors[start:start + per_call]
            if scope.broad is None:
                res = query(part, n, scope.where, include)
                out.extend(convert(part[qi], res, qi, scope) for qi in range(len(part)))
                continue
            res = query(part, fetch, scope.first or None, asked)
            rows = [visible_rows(res, qi, scope, n, fetch) for qi in range(len(part))]
            short = [qi for qi, r in enumerate(rows) if r is None]
            if short:  # one more query for all of them
                more = query(part[short], 4 * fetch, scope.broad or None, asked)
                for j, qi in enumerate(short):  # else the exact filter (slow over many datasources)
                    rows[qi] = visible_rows(more, j, scope, n, 4 * fetch) or query(part[[qi]], n, scope.where, include)
            out.extend(convert(part[qi], r, 0, scope) for qi, r in enumerate(rows))  # type: ignore[arg-type]
        return out

    def _query_vectors(self, queries: Sequence[str | np.ndarray]) -> np.ndarray:
        dim = self.identity.dimension
        texts = [q for q in queries if isinstance(q, str)]
        many = getattr(self.embeddings, "embed_queries", None)  # one provider call (publish asks ~1 per table)
        embedded = dict(zip(texts, many(texts), strict=True)) if len(texts) > 1 and many is not None else {}
        rows = []
        for q in queries:
            if isinstance(q, str):
                vec = embedded[q] if q in embedded else self.embeddings.embed_query(q)
            else:
                vec = np.asarray(q, dtype=np.float32)
            vec = np.asarray(vec, dtype=np.float32).ravel()
            if vec.shape != (dim,) or not np.all(np.isfinite(vec)):
                raise ValueError(f"query vector must be {dim} finite floats ({self.identity.key}), "
                                 f"got shape {vec.shape}")
            rows.append(vec)
        return np.stack(rows)

    # ------------------------------------------------------------------ inspection and deletion

    def list_ids(self, datasource_id: str, schema_version: str | None = None) -> set[str]:
        """Chunk ids readers can see for the datasource (one version, or every retained version)."""
        state = self._manifest.get(datasource_id)
        if state is None:
            return set()
        versions = [schema_version] if schema_version is not None else (
            [None] if state.legacy else sorted(state.versions))
        coll = self._conn.any_collection()
        out: set[str] = set()
        for version in versions:
            if state.legacy or version is None or coll is None:
                out |= {c.id for c in self._read_chunks(datasource_id, state, version, documents=False)}
                continue
            where = visible_where(datasource_id, state, version)
            if where is not None:  # shared records name their chunk in the id: no metadata to read
                ids = self._conn.call("read chunk ids", lambda w=where: coll.get(where=w, include=[]))["ids"]
                out |= {chunk_id_for(template_of_record(sid) or sid, datasource_id, version) for sid in ids}
        return out

    def get_chunks(self, datasource_id: str, schema_version: str) -> list[StoredChunk]:
        """Every visible chunk of one version with its text and metadata, sorted by id (checks, audit)."""
        state = self._manifest.get(datasource_id)
        if state is None:
            return []
        return sorted(self._read_chunks(datasource_id, state, schema_version, documents=True), key=lambda c: c.id)

    def _read_chunks(self, datasource_id: str, state: ManifestState, schema_version: str | None, *,
                     documents: bool) -> list[StoredChunk]:
        """The chunks of one version (named as that version's), or every visible record (previous layout)."""
        coll = self._conn.any_collection()
        where = visible_where(datasource_id, state, schema_version) if coll is not None else None
        if coll is None or where is None:
            return []
        ids, metas, docs, _ = self._conn.records(coll, where, documents=documents)
        docs = docs or [None] * len(ids)  # type: ignore[list-item]
        return [stored_chunk(sid, m, d, schema_version) for sid, m, d in zip(ids, metas, docs, strict=False)]

    def check_records(self, datasource_id: str) -> RecordCheck:
        """Records no retained version uses (orphans) and leftovers of an interrupted refresh (audit)."""
        state = self._manifest.get(datasource_id)
        coll = self._conn.any_collection()
        if coll is None:
            return RecordCheck(datasource_id=datasource_id, legacy=bool(state and state.legacy))
        return check_records(datasource_id, planning_records(self._conn, coll, datasource_id, state), state)

    def delete_versions(self, datasource_id: str, versions: Iterable[str]) -> int:
        """Drop the given versions; returns how many records went. Deleting the live version unsets it.

        Shared layout: the versions leave the manifest first (one upsert, so readers never see half
        a version), then the records no remaining version uses are deleted; records shared with a
        remaining version stay.
        """
        versions = sorted(set(versions))
        coll = self._conn.any_collection()
        if coll is None or not versions:
            return 0
        with self._writing(f"delete versions of {datasource_id}"):
            return drop_versions(self._conn, self._manifest, coll, datasource_id, versions)

    def delete_datasource(self, datasource_id: str) -> int:
        """Delete every chunk and the pointer record of a datasource; returns the number of chunks."""
        coll = self._conn.any_collection()
        if coll is None:
            return 0
        with self._writing(f"delete {datasource_id}"):
            ids = self._conn.record_ids(coll, {"datasource_id": datasource_id})
            self._conn.delete_ids(coll, ids, "delete datasource")
            self._manifest.delete(datasource_id)
        log.info("datasource %s: deleted %d chunks and its pointer", datasource_id, len(ids))
        return len(ids)

    def close(self) -> None:
        """Close a factory-built client and forget the handles (the client is rebuilt on the next call)."""
        self._conn.forget()

    def count(self) -> int:
        """Records in the collection, every datasource and generation (diagnostics)."""
        coll = self._conn.any_collection()
        return 0 if coll is None else int(self._conn.call("count", coll.count))
