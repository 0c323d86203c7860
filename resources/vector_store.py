"""The ``vector_store`` resource: the Chroma vector store (embedded by default, a server with CHROMA_HOST).

It takes the embedding service from the caller instead of nesting the embeddings resource,
so that one model load serves both the resource and the assets.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError
from resources._settings import resolve_settings

if TYPE_CHECKING:
    from nl2sql_assets.indexing.embeddings import EmbeddingService
    from nl2sql_assets.indexing.vector_store import ChromaVectorStore

DEFAULT_KEEP_VERSIONS = 3


def keep_versions_from_env(env: dict[str, str] | None = None) -> int:
    """``NL2SQL_KEEP_VERSIONS`` (default 3): how many versions per datasource stay live in Chroma.

    >>> keep_versions_from_env({"NL2SQL_KEEP_VERSIONS": "2"})
    2
    >>> keep_versions_from_env({})
    3
    """
    source = os.environ if env is None else env
    text = source.get("NL2SQL_KEEP_VERSIONS") or str(DEFAULT_KEEP_VERSIONS)
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"must be a whole number >= 1, got {text!r}", source="environment",
                          field="NL2SQL_KEEP_VERSIONS")
    return value


class VectorStoreResource(dg.ConfigurableResource):
    """Chroma location and the retention policy; ``None`` fields come from the environment."""

    chroma_host: str | None = Field(default=None, description="Chroma server host. Default: CHROMA_HOST; unset means embedded.")
    chroma_port: int | None = Field(default=None, description="Chroma server port. Default: CHROMA_PORT, else 8000.")
    keep_versions: int | None = Field(
        default=None, ge=1,
        description="Versions per datasource kept in Chroma (older ones' chunks are deleted). Default: NL2SQL_KEEP_VERSIONS, else 3.",
    )
    _store: ChromaVectorStore | None = PrivateAttr(default=None)
    _for_service: object | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        return resolve_settings(chroma_host=self.chroma_host, chroma_port=self.chroma_port)

    def retention(self) -> int:
        return self.keep_versions if self.keep_versions is not None else keep_versions_from_env()

    def get_store(self, embeddings: EmbeddingService) -> ChromaVectorStore:
        """The vector store bound to ``embeddings``; built once per resource and service."""
        if self._store is None or self._for_service is not embeddings:
            from nl2sql_assets.indexing.vector_store import build_vector_store

            self.close()
            self._store = build_vector_store(self.settings(), embeddings)
            self._for_service = embeddings
        return self._store

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        store, self._store, self._for_service = self._store, None, None
        close = getattr(store, "close", None)
        if callable(close):
            close()
