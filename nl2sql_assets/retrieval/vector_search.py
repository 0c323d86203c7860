"""The retriever's reads of the vector store: live versions and grouped, timed searches.

A failure of the store (unavailable or too slow, breaker open, damaged files, a model mismatch:
any ``VectorStoreError``) is returned, not raised: retrieval then answers from the SchemaStore
alone with a warning, so the vector store is never a single point of failure. Each search's time
is shared among the questions it served (``timings_ms["vector"]``). Searches accept index states
(live versions, generations) as old as the live versions they reuse (``live_version_ttl_s``), so
a routed question does not read the state of every datasource again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import perf_counter
from typing import TypeVar

import numpy as np

from nl2sql_assets.errors import EmbeddingDimensionMismatchError, VectorStoreError
from nl2sql_assets.indexing.models import ChunkScore, SearchFilter, SearchHit
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.query import Query

_T = TypeVar("_T")

# one datasource's schema search, and routing's search over every visible datasource
SCHEMA_CHUNKS = ["schema.table", "schema.metric", "schema.column"]
ROUTE_CHUNKS = ["schema.datasource", "schema.table", "schema.column"]

# per tenant, for one batch: the live versions (None: the store is down) and the error text
LiveVersions = dict[str | None, tuple[dict[str, str] | None, str]]


class VectorSearch:
    """Searches of one vector store on behalf of groups of questions.

    Args:
        store: the chunk index.
        config: ``live_version_ttl_s`` is read from it.
    """

    def __init__(self, store: VectorStore, config: RetrieverConfig) -> None:
        self.store = store
        self.config = config
        self._live_cache: dict[str | None, tuple[float, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def live_versions(self, tenant: str | None, live: LiveVersions, q: Query) -> dict[str, str] | None:
        """The vector store's live versions (once per batch and tenant); None when it is down."""
        if tenant not in live:
            t0 = perf_counter()
            with self._lock:
                recent = self._live_cache.get(tenant)
            if recent is not None and t0 - recent[0] < self.config.live_version_ttl_s:
                live[tenant] = (recent[1], "")
            else:
                try:
                    versions = self.store.live_versions(tenant)
                    live[tenant] = (versions, "")
                    with self._lock:
                        self._live_cache[tenant] = (t0, versions)
                except (VectorStoreError, EmbeddingDimensionMismatchError) as exc:
                    live[tenant] = (None, str(exc))
            q.timings["vector"] += round((perf_counter() - t0) * 1000, 2)
        versions, error = live[tenant]
        if versions is None:
            q.warnings.append(f"vector store unavailable ({error}); the answer comes from the schema store alone")
        return versions

    def search(self, vectors: list[np.ndarray], k: int, where: SearchFilter,
               group: list[Query]) -> list[list[SearchHit]] | Exception:
        """Hits with their metadata (routing: which datasource, which table)."""
        return self._timed(group, lambda: self.store.search_many(  # type: ignore[arg-type]
            vectors, k=k, where=self._aged(where), documents=False))

    def scores(self, vectors: list[np.ndarray], k: int, where: SearchFilter,
               group: list[Query]) -> list[list[ChunkScore]] | Exception:
        """Chunk ids and scores only (one datasource's schema: the snapshot knows the chunks)."""
        return self._timed(group, lambda: self.store.search_scores_many(  # type: ignore[arg-type]
            vectors, k=k, where=self._aged(where)))

    def _aged(self, where: SearchFilter) -> SearchFilter:
        """The filter with the age of index states this retriever accepts: its live versions'."""
        return where.model_copy(update={"state_max_age_s": self.config.live_version_ttl_s})

    @staticmethod
    def _timed(group: list[Query], search: Callable[[], _T]) -> _T | Exception:
        t0 = perf_counter()
        try:
            return search()
        except (VectorStoreError, EmbeddingDimensionMismatchError) as exc:
            return exc
        finally:
            share = round((perf_counter() - t0) * 1000 / max(1, len(group)), 2)
            for q in group:
                q.timings["vector"] += share
