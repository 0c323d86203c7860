"""The Chroma vector store: versioned, tenant-scoped schema chunks with atomic refreshes.

One collection per configuration (cosine space; its metadata records the model identity)
plus a small manifest collection ``<name>__manifest`` holding one record per datasource:
the live version, a generation counter, the tenant, the model key, the chunk count and a
digest of the live chunk set. Vectors are always passed in explicitly: Chroma's default
embedding function is never created (``embedding_function=None``), so nothing downloads.

Atomic refresh (how readers never see half a set)
-------------------------------------------------
Every record carries ``valid_from``/``valid_to`` generations (multi-version concurrency
control). Readers take the datasource's current generation ``G`` from the manifest and only
see records with ``valid_from <= G < valid_to``. A refresh to generation ``G+1``:

1. writes new and changed chunks with ``valid_from = G+1`` (invisible to readers at ``G``);
   a changed chunk whose id is taken gets the storage id ``<chunk id>#g<G+1>``;
2. retires the records they replace, and same-version chunks that disappeared, by setting
   ``valid_to = G+1`` (still visible at ``G``, invisible at ``G+1``);
3. flips the manifest record (live version, generation ``G+1``): one single-record upsert;
4. deletes retired records and the versions that are no longer kept.

Unchanged chunks (same id, same ``content_hash``) are not touched. A same-version metadata
refresh (same ids, changed text) therefore stays atomic too, and only its changed chunks are
embedded and written. A failure before step 3 leaves the pointer at ``G``; the partial
records are removed at once (best effort) and, should that fail too, by the next refresh,
which first discards every record of the datasource that generation ``G`` cannot see.
Refreshes of one datasource must not run concurrently (the Dagster job serializes them);
refreshes of different datasources may.

Model identity: searching a collection whose recorded provider/model/dimension differs from
the configured embeddings raises ``EmbeddingDimensionMismatchError`` (a re-index fixes it);
pointer, id and chunk reads still work, for audits. A refresh with the new model recreates
the collection and its manifest, so every datasource must be re-indexed.

Vectors of unchanged texts are reused from the store (``reused`` in the report) before the
embedding service is asked, whose own cache then covers texts seen in earlier runs.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from nl2sql_assets.errors import (
    EmbeddingDimensionMismatchError,
    Nl2SqlError,
    VectorStoreError,
    VectorStoreUnavailableError,
)
from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.embeddings import EmbedResult
from nl2sql_assets.indexing.models import (
    ChunkScore,
    IndexState,
    MetadataValue,
    ModelIdentity,
    RefreshReport,
    SchemaChunk,
    SearchFilter,
    SearchHit,
    StoredChunk,
    chunks_digest,
    record_id,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

    from nl2sql_assets.config import Settings
    from nl2sql_assets.metrics import MetricsRegistry

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
DEFAULT_COLLECTION = "nl2sql_schema"
BREAKER_NAME = "vector_store"
OPEN_GENERATION = 2**62  # valid_to of a record no refresh has retired
_INTERNAL_KEYS = ("chunk_id", "valid_from", "valid_to")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,500}[A-Za-z0-9]$")


class EmbeddingsLike(Protocol):
    """What the vector store needs from :class:`nl2sql_assets.indexing.embeddings.EmbeddingService`."""

    @property
    def identity(self) -> ModelIdentity: ...

    def embed_documents(self, texts: Sequence[str]) -> EmbedResult: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def mmr_order(query: np.ndarray, candidates: np.ndarray, k: int, lambda_mult: float = 0.7) -> list[int]:
    """Maximal marginal relevance: indices of ``k`` candidates, relevant yet mutually diverse.

    Each step picks ``argmax lambda*sim(q, c) - (1-lambda)*max(sim(c, selected))`` (cosine).

    >>> q = np.array([1.0, 0.0])
    >>> c = np.array([[1.0, 0.0], [0.99, 0.141], [0.6, -0.8]])
    >>> mmr_order(q, c, 2, lambda_mult=0.3)
    [0, 2]
    >>> mmr_order(q, c, 2, lambda_mult=1.0)
    [0, 1]
    """
    if k <= 0 or len(candidates) == 0:
        return []
    cand = np.asarray(candidates, dtype=np.float64)
    norms = np.linalg.norm(cand, axis=1, keepdims=True)
    cand = cand / np.where(norms == 0, 1.0, norms)
    q = np.asarray(query, dtype=np.float64).ravel()
    q = q / (np.linalg.norm(q) or 1.0)
    relevance = cand @ q
    selected: list[int] = [int(np.argmax(relevance))]
    redundancy = cand @ cand[selected[0]]
    while len(selected) < min(k, len(cand)):
        scores = lambda_mult * relevance - (1.0 - lambda_mult) * redundancy
        scores[selected] = -np.inf
        best = int(np.argmax(scores))
        selected.append(best)
        redundancy = np.maximum(redundancy, cand @ cand[best])
    return selected


def collection_name_for(base: str, identity: ModelIdentity | None = None) -> str:
    """A valid Chroma collection name, optionally suffixed with the sanitized model key.

    >>> collection_name_for("nl2sql_schema")
    'nl2sql_schema'
    >>> collection_name_for("nl2sql_schema", ModelIdentity(provider="local", model="all-MiniLM-L6-v2", dimension=384))
    'nl2sql_schema_local_all-MiniLM-L6-v2_384'
    """
    name = base if identity is None else f"{base}_{identity.key}"
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid vector collection name {base!r}: use 3-500 characters of [A-Za-z0-9._-]")
    return name


def _and(clauses: list[dict[str, object]]) -> dict[str, object]:
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _or(clauses: list[dict[str, object]]) -> dict[str, object]:
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


#: Query vectors x results per ``collection.query`` call at most. Chroma reads a query's hits back
#: in one SQLite statement with a variable per hit, and SQLite refuses more than 32,766
#: ("too many SQL variables"): 150 questions x 3.6 texts x 60 hits (the retriever's dense_k)
#: is already 32,400.
_MAX_HITS_PER_QUERY_CALL = 16_384


def _visible_at(generation: int) -> list[dict[str, object]]:
    return [{"valid_from": {"$lte": generation}}, {"valid_to": {"$gt": generation}}]


def _is_unavailable(exc: BaseException) -> bool:
    """Connection-level trouble (counts toward the breaker) vs a rejected request (does not)."""
    import httpx
    from chromadb.errors import ChromaError, InternalError, RateLimitError

    seen: BaseException | None = exc
    for _ in range(5):  # the client wraps connect errors (ValueError "Could not connect ..."): follow the chain
        if seen is None:
            break
        if isinstance(seen, (httpx.TransportError, ConnectionError, TimeoutError, InternalError, RateLimitError,
                             OSError)):
            return True
        seen = seen.__cause__ or seen.__context__
    # the HTTP client raises a bare Exception for non-JSON server errors (502, 503, ...)
    return type(exc) is Exception and not isinstance(exc, ChromaError)


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
    """

    def __init__(self, client: ClientAPI | Callable[[], ClientAPI], embeddings: EmbeddingsLike, *,
                 collection_name: str = DEFAULT_COLLECTION, breaker: CircuitBreaker | None = None,
                 write_batch_size: int = 256, where: str = "chroma",
                 metrics: MetricsRegistry | None = None) -> None:
        self.collection_name = collection_name_for(collection_name)
        self.metrics = metrics
        self.manifest_name = f"{self.collection_name}__manifest"
        self.embeddings = embeddings
        self.breaker = breaker or CircuitBreaker(BREAKER_NAME, failure_types=(VectorStoreUnavailableError,),
                                                 metrics=metrics)
        if write_batch_size < 1:
            raise ValueError(f"write_batch_size must be >= 1, got {write_batch_size}")
        self.write_batch_size = write_batch_size
        self.where = where
        if callable(client) and not hasattr(client, "get_or_create_collection"):
            self._client_factory: Callable[[], ClientAPI] | None = client
            self._client_obj: ClientAPI | None = None
        else:
            self._client_factory = None
            self._client_obj = client  # type: ignore[assignment]
        self._collection: Collection | None = None
        self._manifest: Collection | None = None

    # ------------------------------------------------------------------ plumbing

    @property
    def identity(self) -> ModelIdentity:
        """The configured model identity (the embedding service's)."""
        return self.embeddings.identity

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one Chroma interaction through the breaker, translating its errors."""

        def guarded() -> T:
            try:
                return fn()
            except Nl2SqlError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated into our error hierarchy
                from chromadb.errors import NotFoundError

                if isinstance(exc, NotFoundError):
                    self._collection = self._manifest = None  # recreated elsewhere: look it up again
                cls = VectorStoreUnavailableError if _is_unavailable(exc) else VectorStoreError
                raise cls(f"vector store ({self.where}): {what} failed: {type(exc).__name__}: {exc}") from exc

        return self.breaker.call(guarded)

    def _client(self) -> ClientAPI:
        if self._client_obj is None:
            assert self._client_factory is not None
            self._client_obj = self._client_factory()
        return self._client_obj

    def _get_collection(self, name: str) -> Collection | None:
        from chromadb.errors import NotFoundError

        try:
            return self._client().get_collection(name, embedding_function=None)  # type: ignore[arg-type]
        except NotFoundError:
            return None

    def _identity_metadata(self) -> dict[str, MetadataValue]:
        ident = self.identity
        return {"provider": ident.provider, "model": ident.model, "dimension": ident.dimension,
                "model_key": ident.key, "created_by": "nl2sql-assets"}

    @staticmethod
    def _identity_of(collection: Collection) -> ModelIdentity | None:
        meta = collection.metadata or {}
        try:
            return ModelIdentity(provider=str(meta["provider"]), model=str(meta["model"]),
                                 dimension=int(meta["dimension"]))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            return None

    def _read_collection(self) -> Collection | None:
        """The collection for reading, None when nothing was ever indexed.

        Raises:
            EmbeddingDimensionMismatchError: it holds vectors of another model.
        """
        if self._collection is None:
            self._collection = self._call("open collection", lambda: self._get_collection(self.collection_name))
        coll = self._collection
        if coll is None:
            return None
        stored = self._identity_of(coll)
        if stored != self.identity:
            self._collection = None
            raise EmbeddingDimensionMismatchError(
                self.collection_name, self.identity.key, stored.key if stored else "an unknown model")
        return coll

    def _write_collection(self) -> Collection:
        """The collection for writing; recreated (with its manifest) when it holds another model."""

        def open_or_create() -> Collection:
            client = self._client()
            coll = self._get_collection(self.collection_name)
            if coll is not None:
                stored = self._identity_of(coll)
                if stored == self.identity:
                    return coll
                log.warning("vector collection %s holds %s vectors, configured %s: recreating it "
                            "(every datasource must be re-indexed)", self.collection_name,
                            stored.key if stored else "unknown", self.identity.key)
                client.delete_collection(self.collection_name)
                if self._get_collection(self.manifest_name) is not None:
                    client.delete_collection(self.manifest_name)
            self._manifest = None
            # get_or_create: another process may be creating it at this very moment
            created = client.get_or_create_collection(
                self.collection_name, configuration={"hnsw": {"space": "cosine"}},
                metadata=self._identity_metadata(), embedding_function=None)  # type: ignore[arg-type]
            if self._identity_of(created) != self.identity:
                raise VectorStoreError(f"vector store ({self.where}): collection '{self.collection_name}' was "
                                       f"just recreated by another process for another embedding model")
            return created

        self._collection = self._call("open collection for writing", open_or_create)
        return self._collection

    def _manifest_collection(self, *, create: bool) -> Collection | None:
        if self._manifest is None:
            def get() -> Collection | None:
                if create:
                    return self._client().get_or_create_collection(
                        self.manifest_name, metadata={"model_key": self.identity.key},
                        embedding_function=None)  # type: ignore[arg-type]
                return self._get_collection(self.manifest_name)

            self._manifest = self._call("open manifest", get)
        return self._manifest

    # ------------------------------------------------------------------ manifest

    def _states(self, datasource_ids: Sequence[str] | None = None) -> dict[str, IndexState]:
        manifest = self._manifest_collection(create=False)
        if manifest is None:
            return {}
        ids = list(datasource_ids) if datasource_ids is not None else None
        if ids == []:
            return {}
        res = self._call("read manifest", lambda: manifest.get(ids=ids, include=["metadatas"]))
        out: dict[str, IndexState] = {}
        for rid, meta in zip(res["ids"], res["metadatas"] or [], strict=False):
            m = dict(meta or {})
            out[rid] = IndexState(
                datasource_id=rid, tenant_id=str(m.get("tenant_id", "default")),
                live_version=str(m.get("live_version") or "") or None,
                generation=int(m.get("generation", 0)),  # type: ignore[arg-type]
                model_key=str(m.get("model_key", "")), chunk_count=int(m.get("chunk_count", 0)),  # type: ignore[arg-type]
                content_digest=str(m.get("content_digest", "")), updated_at=str(m.get("updated_at", "")))
        return out

    def _write_state(self, state: IndexState) -> None:
        manifest = self._manifest_collection(create=True)
        assert manifest is not None
        meta: dict[str, MetadataValue] = {
            "tenant_id": state.tenant_id, "live_version": state.live_version or "",
            "generation": state.generation, "model_key": state.model_key,
            "chunk_count": state.chunk_count, "content_digest": state.content_digest,
            "updated_at": state.updated_at,
        }
        self._call("flip live pointer", lambda: manifest.upsert(
            ids=[state.datasource_id], embeddings=[[1.0]], metadatas=[meta]))

    def index_state(self, datasource_id: str) -> IndexState | None:
        """The datasource's pointer record (live version, generation, counts, digest).

        Pointer, id and chunk reads work whatever model made the vectors (audits need them);
        only searching checks the model identity.
        """
        return self._states([datasource_id]).get(datasource_id)

    def index_states(self, tenant_id: str | None = None) -> dict[str, IndexState]:
        """Every datasource's pointer record, optionally only one tenant's."""
        return {ds: s for ds, s in sorted(self._states().items())
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
        coll = self._call("open collection", lambda: self._get_collection(self.collection_name))
        return self._identity_of(coll) if coll is not None else None

    # ------------------------------------------------------------------ records

    def _records(self, coll: Collection, where: dict[str, object], *, documents: bool = False,
                 embeddings: bool = False, ids: list[str] | None = None) -> tuple[list[str], list[dict[str, MetadataValue]], list[str], list[np.ndarray]]:
        include = ["metadatas"] + (["documents"] if documents else []) + (["embeddings"] if embeddings else [])
        res = self._call("read chunks", lambda: coll.get(ids=ids, where=where, include=include))  # type: ignore[arg-type]
        metas = [dict(m or {}) for m in (res["metadatas"] or [])]
        docs = list(res["documents"] or []) if documents else []
        vecs = list(res["embeddings"]) if embeddings and res["embeddings"] is not None else []
        return list(res["ids"]), metas, docs, vecs

    def _delete_ids(self, coll: Collection, ids: list[str], what: str) -> None:
        step = max(1, self._max_batch())
        for start in range(0, len(ids), step):
            batch = ids[start:start + step]
            self._call(what, lambda b=batch: coll.delete(ids=b))  # type: ignore[misc]

    def _max_batch(self) -> int:
        try:
            return int(self._client().get_max_batch_size())
        except Exception:  # noqa: BLE001 - older servers: a safe default
            return 1000

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
            report = self._refresh(datasource_id, schema_version, list(chunks), tenant_id, keep_versions, make_live)
        except Nl2SqlError as exc:
            self._count_error(exc)
            raise
        self._record_refresh(report)
        return report

    def _refresh(self, datasource_id: str, schema_version: str, chunks: list[SchemaChunk], tenant_id: str,
                 keep_versions: list[str] | None, make_live: bool) -> RefreshReport:
        started = perf_counter()
        self._check_chunks(datasource_id, schema_version, tenant_id, chunks)
        coll = self._write_collection()
        self._manifest_collection(create=True)
        state = self._states([datasource_id]).get(datasource_id)
        gen = state.generation if state else 0
        new_gen = gen + 1
        live_before = state.live_version if state else None
        if not make_live and live_before in (None, schema_version):
            make_live = True
        keep = set(keep_versions or []) | {schema_version}
        if not make_live and live_before:
            keep.add(live_before)

        self._discard_invisible(coll, datasource_id, gen)
        vis_ids, vis_metas, vis_docs, _ = self._records(
            coll, _and([{"datasource_id": datasource_id}, *_visible_at(gen)]), documents=True)
        current: dict[str, tuple[str, dict[str, MetadataValue]]] = {}
        doc_source: dict[str, str] = {}
        for sid, meta, doc in zip(vis_ids, vis_metas, vis_docs, strict=False):
            current[str(meta.get("chunk_id", sid))] = (sid, meta)
            if doc is not None:
                doc_source.setdefault(doc, sid)

        new_ids = {c.id for c in chunks}
        to_write: list[SchemaChunk] = []
        retire: list[str] = []
        replaced = 0
        for chunk in chunks:
            prev = current.get(chunk.id)
            if prev is not None and prev[1].get("content_hash") == chunk.content_hash:
                continue
            to_write.append(chunk)
            if prev is not None:
                retire.append(prev[0])
                replaced += 1
        for cid, (sid, meta) in current.items():
            if meta.get("schema_version") == schema_version and cid not in new_ids:
                retire.append(sid)
        occupied = set(vis_ids)
        unchanged = len(chunks) - len(to_write)
        target_live = schema_version if make_live else live_before
        if (state is not None and not to_write and not retire and state.live_version == target_live
                and state.tenant_id == tenant_id and state.model_key == self.identity.key):
            new_gen = gen  # nothing changes for readers: no new generation, only retention below

        embedded = from_cache = reused = 0
        wrote_any = False
        try:
            for start in range(0, len(to_write), self.write_batch_size):
                batch = to_write[start:start + self.write_batch_size]
                vectors, counts = self._vectors_for(coll, [c.get_page_content() for c in batch], doc_source)
                embedded, from_cache, reused = embedded + counts[0], from_cache + counts[1], reused + counts[2]
                ids = [c.id if c.id not in occupied else record_id(c.id, new_gen) for c in batch]
                metas: list[dict[str, MetadataValue]] = []
                for c in batch:
                    meta = c.get_metadata()
                    meta.update({"chunk_id": c.id, "valid_from": new_gen, "valid_to": OPEN_GENERATION})
                    metas.append(meta)
                wrote_any = True
                self._call("write chunks", lambda: coll.upsert(
                    ids=ids, embeddings=vectors, metadatas=metas,  # type: ignore[arg-type]
                    documents=[c.get_page_content() for c in batch]))
            step = max(1, self._max_batch())
            for start in range(0, len(retire), step):
                part = retire[start:start + step]
                wrote_any = True
                self._call("retire replaced chunks", lambda p=part: coll.update(  # type: ignore[misc]
                    ids=p, metadatas=[{"valid_to": new_gen} for _ in p]))
            live_chunks = chunks if make_live else None
            new_state = IndexState(
                datasource_id=datasource_id, tenant_id=tenant_id,
                live_version=schema_version if make_live else live_before, generation=new_gen,
                model_key=self.identity.key,
                chunk_count=len(chunks) if live_chunks is not None else (state.chunk_count if state else 0),
                content_digest=chunks_digest(live_chunks) if live_chunks is not None
                else (state.content_digest if state else ""),
                updated_at=datetime.now(UTC).isoformat(timespec="seconds"))
            if new_gen != gen:
                self._write_state(new_state)
        except BaseException:
            if wrote_any:
                self._roll_back(coll, datasource_id, new_gen, retire)
            raise

        deleted = len(retire) - replaced
        try:
            retired = self._records(coll, _and([{"datasource_id": datasource_id},
                                                {"valid_to": {"$lte": new_gen}}]))[0]
            stale_ids = self._records(
                coll, _and([{"datasource_id": datasource_id}, {"schema_version": {"$nin": sorted(keep)}}]))[0]
            retired_set = set(retired)
            self._delete_ids(coll, sorted(retired_set | set(stale_ids)), "delete old chunks")
            deleted += sum(1 for sid in stale_ids if sid not in retired_set)
        except VectorStoreError as exc:
            raise VectorStoreError(
                f"datasource '{datasource_id}': version {schema_version} is live, but deleting old chunks "
                f"failed ({exc}); the next refresh deletes them") from exc

        report = RefreshReport(
            datasource_id=datasource_id, schema_version=schema_version, total=len(chunks),
            unchanged=unchanged, upserted=len(to_write), deleted=deleted, embedded=embedded,
            from_cache=from_cache, reused=reused, model=self.identity, generation=new_gen,
            seconds=round(perf_counter() - started, 4))
        log.info("refreshed %s@%s: %d chunks, %d unchanged, %d upserted (%d embedded, %d cached, %d reused), "
                 "%d deleted, generation %d", datasource_id, schema_version, report.total, report.unchanged,
                 report.upserted, report.embedded, report.from_cache, report.reused, report.deleted, new_gen)
        return report

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

    @staticmethod
    def _check_chunks(datasource_id: str, schema_version: str, tenant_id: str,
                      chunks: Sequence[SchemaChunk]) -> None:
        seen: set[str] = set()
        for chunk in chunks:
            if chunk.datasource_id != datasource_id or chunk.schema_version != schema_version:
                raise ValueError(f"chunk {chunk.id!r} belongs to {chunk.datasource_id}@{chunk.schema_version}, "
                                 f"not {datasource_id}@{schema_version}")
            if chunk.tenant_id != tenant_id:
                raise ValueError(f"chunk {chunk.id!r} has tenant {chunk.tenant_id!r}, expected {tenant_id!r}")
            if chunk.id in seen:
                raise ValueError(f"datasource '{datasource_id}': duplicate chunk id {chunk.id!r}")
            seen.add(chunk.id)

    def _vectors_for(self, coll: Collection, texts: list[str],
                     doc_source: dict[str, str]) -> tuple[np.ndarray, tuple[int, int, int]]:
        """Vectors for ``texts``: reused from stored records with the same text, else embedded."""
        dim = self.identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        reuse_ids = sorted({doc_source[t] for t in texts if t in doc_source})
        stored: dict[str, np.ndarray] = {}
        if reuse_ids:
            res = self._call("read stored vectors", lambda: coll.get(ids=reuse_ids, include=["embeddings", "documents"]))
            for doc, vec in zip(res["documents"] or [], res["embeddings"] if res["embeddings"] is not None else [],
                                strict=False):
                if doc is not None and len(vec) == dim:
                    stored[doc] = np.asarray(vec, dtype=np.float32)
        missing = sorted({t for t in texts if t not in stored})
        embedded = from_cache = 0
        if missing:
            result = self.embeddings.embed_documents(missing)
            vecs = np.asarray(result.vectors, dtype=np.float32)
            if vecs.shape != (len(missing), dim):
                raise EmbeddingDimensionMismatchError(self.collection_name, self.identity.key,
                                                      f"vectors of shape {vecs.shape}")
            stored.update(zip(missing, vecs, strict=True))
            embedded, from_cache = result.embedded, result.from_cache
        for i, text in enumerate(texts):
            out[i] = stored[text]
        missing_set = set(missing)
        reused = sum(1 for t in texts if t not in missing_set)
        return out, (embedded, from_cache, reused)

    def _discard_invisible(self, coll: Collection, datasource_id: str, generation: int) -> None:
        """Remove leftovers of an interrupted refresh: records generation ``generation`` cannot see."""
        ahead = self._records(coll, _and([{"datasource_id": datasource_id},
                                          {"valid_from": {"$gt": generation}}]))[0]
        behind_ids, _, _, _ = self._records(coll, _and([{"datasource_id": datasource_id},
                                                        {"valid_to": {"$lte": generation}}]))
        if ahead or behind_ids:
            log.info("datasource %s: removing %d chunks left by an interrupted refresh", datasource_id,
                     len(ahead) + len(behind_ids))
            self._delete_ids(coll, sorted(set(ahead) | set(behind_ids)), "remove leftovers")
        pending, _, _, _ = self._records(coll, _and([{"datasource_id": datasource_id},
                                                     {"valid_to": {"$gt": generation}},
                                                     {"valid_to": {"$lt": OPEN_GENERATION}}]))
        if pending:
            self._call("reopen retired chunks", lambda: coll.update(
                ids=pending, metadatas=[{"valid_to": OPEN_GENERATION} for _ in pending]))

    def _roll_back(self, coll: Collection, datasource_id: str, new_gen: int, retired: list[str]) -> None:
        """Best effort: drop the partial generation and reopen what it retired."""
        try:
            partial = self._records(coll, _and([{"datasource_id": datasource_id}, {"valid_from": new_gen}]))[0]
            self._delete_ids(coll, partial, "remove partial chunks")
            if retired:
                self._call("reopen retired chunks", lambda: coll.update(
                    ids=retired, metadatas=[{"valid_to": OPEN_GENERATION} for _ in retired]))
            log.warning("datasource %s: refresh failed; removed %d partial chunks, the previous set keeps serving",
                        datasource_id, len(partial))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.warning("datasource %s: refresh failed and its partial chunks could not be removed now (%s); "
                        "readers do not see them and the next refresh removes them", datasource_id, exc)

    # ------------------------------------------------------------------ search

    def _scope(self, where: SearchFilter) -> dict[str, object] | None:
        """The Chroma filter for ``where``; None when nothing can match."""
        states = self._states(where.datasource_ids)
        clauses: list[dict[str, object]] = []
        for ds in sorted(states):
            state = states[ds]
            if where.tenant_id is not None and state.tenant_id != where.tenant_id:
                continue
            version = where.versions.get(ds) or state.live_version
            if not version:
                continue
            clauses.append(_and([{"datasource_id": ds}, {"schema_version": version},
                                 *_visible_at(state.generation)]))
        if not clauses:
            return None
        parts = [_or(clauses)]
        if where.tenant_id is not None:
            parts.append({"tenant_id": where.tenant_id})
        if where.chunk_types is not None:
            if not where.chunk_types:
                return None
            parts.append({"chunk_type": {"$in": list(where.chunk_types)}})
        if where.tables is not None:
            if not where.tables:
                return None
            tables = list(where.tables)
            parts.append({"$or": [{"table": {"$in": tables}}, {"ref_table": {"$in": tables}}]})
        return _and(parts)

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

        def hits_of(vector: np.ndarray, res: dict[str, Any], qi: int) -> list[SearchHit]:
            ids = res["ids"][qi]
            metas = (res["metadatas"] or [[]])[qi]
            docs = (res["documents"] or [[]])[qi] if documents else [None] * len(ids)
            dists = (res["distances"] or [[]])[qi]
            hits = [self._hit(sid, meta, doc, 1.0 - float(dist))
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
        def scores_of(vector: np.ndarray, res: dict[str, Any], qi: int) -> list[ChunkScore]:
            found = [ChunkScore(record_id=sid, score=1.0 - float(dist))
                     for sid, dist in zip(res["ids"][qi], (res["distances"] or [[]])[qi], strict=False)]
            return sorted(found, key=lambda h: (-h.score, h.record_id))[:k]

        return self._searching(queries, k, k, where, ["distances"], scores_of)

    def _searching(self, queries: Sequence[str | np.ndarray], k: int, n: int, where: SearchFilter | None,
                   include: list[str], convert: Callable[[np.ndarray, dict[str, Any], int], list[R]]
                   ) -> list[list[R]]:
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
                    convert: Callable[[np.ndarray, dict[str, Any], int], list[R]]) -> list[list[R]]:
        coll = self._read_collection()
        if coll is None:
            return [[] for _ in queries]
        scope = self._scope(where)
        if scope is None:
            return [[] for _ in queries]
        vectors = self._query_vectors(queries)
        out: list[list[R]] = []
        per_call = max(1, _MAX_HITS_PER_QUERY_CALL // n)
        for start in range(0, len(vectors), per_call):
            part = vectors[start:start + per_call]
            res = self._call("search", lambda part=part: coll.query(  # type: ignore[misc]
                query_embeddings=part, n_results=n, where=scope, include=include))  # type: ignore[arg-type]
            out.extend(convert(part[qi], res, qi) for qi in range(len(part)))  # type: ignore[arg-type]
        return out

    def _query_vectors(self, queries: Sequence[str | np.ndarray]) -> np.ndarray:
        dim = self.identity.dimension
        rows = []
        for q in queries:
            vec = self.embeddings.embed_query(q) if isinstance(q, str) else np.asarray(q, dtype=np.float32)
            vec = np.asarray(vec, dtype=np.float32).ravel()
            if vec.shape != (dim,) or not np.all(np.isfinite(vec)):
                raise ValueError(f"query vector must be {dim} finite floats ({self.identity.key}), "
                                 f"got shape {vec.shape}")
            rows.append(vec)
        return np.stack(rows)

    @staticmethod
    def _stored_fields(sid: str, meta: dict[str, MetadataValue] | None, doc: str | None) -> dict[str, object]:
        m = dict(meta or {})
        chunk_id = str(m.get("chunk_id", sid))
        for key in _INTERNAL_KEYS:
            m.pop(key, None)
        return {"id": chunk_id, "chunk_type": m.get("chunk_type"), "datasource_id": str(m.get("datasource_id", "")),
                "schema_version": str(m.get("schema_version", "")), "document": doc or "", "metadata": m}

    @staticmethod
    def _stored(sid: str, meta: dict[str, MetadataValue] | None, doc: str | None) -> StoredChunk:
        return StoredChunk(**ChromaVectorStore._stored_fields(sid, meta, doc))  # type: ignore[arg-type]

    def _hit(self, sid: str, meta: dict[str, MetadataValue] | None, doc: str | None, score: float) -> SearchHit:
        # validated once: a search builds a hit for every chunk of every query text
        return SearchHit(**self._stored_fields(sid, meta, doc),  # type: ignore[arg-type]
                         score=score if math.isfinite(score) else 0.0)

    # ------------------------------------------------------------------ inspection and deletion

    def _visible_where(self, datasource_id: str, schema_version: str | None) -> dict[str, object] | None:
        state = self._states([datasource_id]).get(datasource_id)
        if state is None:
            return None
        parts: list[dict[str, object]] = [{"datasource_id": datasource_id}]
        if schema_version is not None:
            parts.append({"schema_version": schema_version})
        return _and(parts + _visible_at(state.generation))

    def list_ids(self, datasource_id: str, schema_version: str | None = None) -> set[str]:
        """Chunk ids readers can see for the datasource (one version, or every kept version)."""
        coll = self._get_any_collection()
        where = self._visible_where(datasource_id, schema_version) if coll is not None else None
        if coll is None or where is None:
            return set()
        ids, metas, _, _ = self._records(coll, where)
        return {str(m.get("chunk_id", sid)) for sid, m in zip(ids, metas, strict=False)}

    def get_chunks(self, datasource_id: str, schema_version: str) -> list[StoredChunk]:
        """Every visible chunk of one version with its text and metadata, sorted by id (checks, audit)."""
        coll = self._get_any_collection()
        where = self._visible_where(datasource_id, schema_version) if coll is not None else None
        if coll is None or where is None:
            return []
        ids, metas, docs, _ = self._records(coll, where, documents=True)
        return sorted((self._stored(sid, m, d) for sid, m, d in zip(ids, metas, docs, strict=False)),
                      key=lambda c: c.id)

    def delete_versions(self, datasource_id: str, versions: Iterable[str]) -> int:
        """Delete every chunk of the given versions; returns how many. Deleting the live version unsets it."""
        versions = sorted(set(versions))
        coll = self._get_any_collection()
        if coll is None or not versions:
            return 0
        ids = self._records(coll, _and([{"datasource_id": datasource_id}, {"schema_version": {"$in": versions}}]))[0]
        self._delete_ids(coll, ids, "delete versions")
        state = self._states([datasource_id]).get(datasource_id)
        if state is not None and state.live_version in versions:
            self._write_state(state.model_copy(update={
                "live_version": None, "chunk_count": 0, "content_digest": "",
                "updated_at": datetime.now(UTC).isoformat(timespec="seconds")}))
        if ids:
            log.info("datasource %s: deleted %d chunks of versions %s", datasource_id, len(ids), ", ".join(versions))
        return len(ids)

    def delete_datasource(self, datasource_id: str) -> int:
        """Delete every chunk and the pointer record of a datasource; returns the number of chunks."""
        coll = self._get_any_collection()
        if coll is None:
            return 0
        ids = self._records(coll, {"datasource_id": datasource_id})[0]
        self._delete_ids(coll, ids, "delete datasource")
        manifest = self._manifest_collection(create=False)
        if manifest is not None:
            self._call("delete pointer", lambda: manifest.delete(ids=[datasource_id]))
        log.info("datasource %s: deleted %d chunks and its pointer", datasource_id, len(ids))
        return len(ids)

    def _get_any_collection(self) -> Collection | None:
        """The collection whatever model made it (deletion works across models)."""
        if self._collection is None:
            self._collection = self._call("open collection", lambda: self._get_collection(self.collection_name))
        return self._collection

    def close(self) -> None:
        """Forget the client and collection handles (a factory-built client is rebuilt on the next call)."""
        self._collection = self._manifest = None
        if self._client_factory is not None:
            self._client_obj = None

    def count(self) -> int:
        """Records in the collection, every datasource and generation (diagnostics)."""
        coll = self._get_any_collection()
        return 0 if coll is None else int(self._call("count", coll.count))


HTTP_TIMEOUT = (5.0, 60.0)  # connect, read (seconds)


def _bound_http_timeouts(client: ClientAPI) -> None:
    """Chroma's HTTP client waits forever by default; a hung server must fail (and trip the breaker)."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = httpx.Timeout(HTTP_TIMEOUT[1], connect=HTTP_TIMEOUT[0])


def build_vector_store(settings: Settings, embeddings: EmbeddingsLike, *,
                       collection_name: str = DEFAULT_COLLECTION,
                       breaker: CircuitBreaker | None = None,
                       metrics: MetricsRegistry | None = None) -> ChromaVectorStore:
    """The configured store: ``chromadb.HttpClient`` when ``CHROMA_HOST`` is set, else a
    ``PersistentClient`` under ``$NL2SQL_HOME/chroma``. Telemetry is off; nothing connects
    until the first call."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        host, port = settings.chroma_host, settings.chroma_port

        def http_client() -> ClientAPI:
            client = chromadb.HttpClient(host=host, port=port, settings=chroma_settings)
            _bound_http_timeouts(client)
            return client

        return ChromaVectorStore(http_client, embeddings, collection_name=collection_name, breaker=breaker,
                                 where=f"chroma server {host}:{port}", metrics=metrics)
    path = settings.chroma_path

    def persistent_client() -> ClientAPI:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=chroma_settings)

    return ChromaVectorStore(persistent_client, embeddings, collection_name=collection_name, breaker=breaker,
                             where=f"chroma at {path}", metrics=metrics)
