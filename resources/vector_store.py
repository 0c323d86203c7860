"""The ``vector_store`` resource: the Chroma vector store (embedded by default, a server with CHROMA_HOST).

It takes the embedding service from the caller instead of nesting the embeddings resource,
so that one model load serves both the resource and the assets. It owns the process's
:class:`~nl2sql_assets.metrics.MetricsRegistry` (refresh counts and latencies, errors, breaker
state), which ``chroma_collection`` shows and ``nl2sql-assets index`` writes out.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.config import DEFAULT_KEEP_VERSIONS, Settings
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.vector_store import VectorStore, build_vector_store
from nl2sql_assets.metrics import MetricsRegistry


class VectorStoreResource(dg.ConfigurableResource):
    """Chroma location and the retention policy."""

    home: str = Field(default=".nl2sql", description="NL2SQL_HOME: the embedded store is its chroma/ folder.")
    chroma_host: str | None = Field(default=None, description="Chroma server host (CHROMA_HOST); unset: embedded.")
    chroma_port: int = Field(default=8000, description="Chroma server port (CHROMA_PORT).")
    keep_versions: int = Field(
        default=DEFAULT_KEEP_VERSIONS, ge=1,
        description="Versions per datasource kept in both stores; older ones are evicted (NL2SQL_KEEP_VERSIONS).")
    _store: VectorStore | None = PrivateAttr(default=None)
    _for_service: object | None = PrivateAttr(default=None)
    _metrics: MetricsRegistry = PrivateAttr(default_factory=MetricsRegistry)

    @property
    def metrics(self) -> MetricsRegistry:
        return self._metrics

    def retention(self) -> int:
        return self.keep_versions

    def get_store(self, embeddings: Embeddings) -> VectorStore:
        """The vector store bound to ``embeddings``; built once per resource and service."""
        if self._store is None or self._for_service is not embeddings:
            self.close()
            settings = Settings.of(home=self.home, chroma_host=self.chroma_host, chroma_port=self.chroma_port)
            self._store = build_vector_store(settings, embeddings, metrics=self._metrics)
            self._for_service = embeddings
        return self._store

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        store, self._store, self._for_service = self._store, None, None
        if store is not None:
            store.close()
