"""The vector-store seam: the ``VectorStore`` protocol and the factory for the configured store.

Callers (indexing, retrieval, checks, audits) depend on :class:`VectorStore`; the one
implementation is :class:`~nl2sql_assets.indexing.chroma_store.ChromaVectorStore`, built by
:func:`build_vector_store` from ``Settings`` (``CHROMA_HOST``/``CHROMA_PORT`` or
``NL2SQL_HOME``; see ``docs/configuration.md``). How records are shared between versions and
how a refresh stays atomic for readers is explained in ``refresh_plan``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.chroma_connection import (
    DEFAULT_COLLECTION,
    BoundedClientFactory,
    StoreFiles,
    collection_name_for,
)
from nl2sql_assets.indexing.chroma_queries import mmr_order
from nl2sql_assets.indexing.chroma_store import ChromaVectorStore
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.models import (
    ChunkScore,
    IndexState,
    ModelIdentity,
    RefreshReport,
    SchemaChunk,
    SearchFilter,
    SearchHit,
    StoredChunk,
)
from nl2sql_assets.indexing.refresh_plan import OPEN_GENERATION, RecordCheck

if TYPE_CHECKING:
    import httpx
    from chromadb.api import ClientAPI

    from nl2sql_assets.config import Settings
    from nl2sql_assets.metrics import MetricsRegistry

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_COLLECTION", "HTTP_TIMEOUT", "OPEN_GENERATION", "ChromaVectorStore", "VectorStore",
    "build_vector_store", "collection_name_for", "mmr_order",
]


class VectorStore(Protocol):
    """What indexing, retrieval, checks and audits call on a vector store (implemented by
    :class:`ChromaVectorStore`); callers depend on this seam, not on Chroma."""

    collection_name: str
    embeddings: Embeddings

    @property
    def identity(self) -> ModelIdentity:
        """The configured model identity."""
        ...

    def refresh_schema_chunks(self, datasource_id: str, schema_version: str, chunks: Sequence[SchemaChunk], *,
                              tenant_id: str, keep_versions: list[str] | None = None,
                              make_live: bool = True) -> RefreshReport:
        """Make ``chunks`` the datasource's set for ``schema_version``, atomically for readers."""
        ...

    def search(self, query: str | np.ndarray, *, k: int, where: SearchFilter | None = None, mmr: bool = False,
               lambda_mult: float = 0.7, fetch_k: int | None = None) -> list[SearchHit]:
        """The ``k`` chunks most similar to ``query`` within ``where``, best first."""
        ...

    def search_many(self, queries: Sequence[str | np.ndarray], *, k: int, where: SearchFilter | None = None,
                    mmr: bool = False, lambda_mult: float = 0.7, fetch_k: int | None = None,
                    documents: bool = True) -> list[list[SearchHit]]:
        """:meth:`search` for several queries with one filter."""
        ...

    def search_scores_many(self, queries: Sequence[str | np.ndarray], *, k: int,
                           where: SearchFilter | None = None) -> list[list[ChunkScore]]:
        """The ``k`` nearest record ids per query with their scores, best first."""
        ...

    def list_ids(self, datasource_id: str, schema_version: str | None = None) -> set[str]:
        """Chunk ids readers can see for the datasource."""
        ...

    def get_chunks(self, datasource_id: str, schema_version: str) -> list[StoredChunk]:
        """Every visible chunk of one version, sorted by id."""
        ...

    def delete_versions(self, datasource_id: str, versions: Iterable[str]) -> int:
        """Drop the given versions; returns how many records no remaining version uses were deleted."""
        ...

    def check_records(self, datasource_id: str) -> RecordCheck:
        """Orphaned records and leftovers of an interrupted refresh (for audits)."""
        ...

    def delete_datasource(self, datasource_id: str) -> int:
        """Delete every chunk and the pointer record of a datasource."""
        ...

    def index_state(self, datasource_id: str) -> IndexState | None:
        """The datasource's manifest record; None when it is not indexed."""
        ...

    def index_states(self, tenant_id: str | None = None) -> dict[str, IndexState]:
        """Every datasource's manifest record, optionally only one tenant's."""
        ...

    def live_version(self, datasource_id: str) -> str | None:
        """The version readers see by default."""
        ...

    def live_versions(self, tenant_id: str | None = None) -> dict[str, str]:
        """``{datasource_id: live_version}`` for every (or one tenant's) indexed datasource."""
        ...

    def stored_identity(self) -> ModelIdentity | None:
        """The model identity recorded with the stored vectors; None when nothing is stored."""
        ...

    def count(self) -> int:
        """Records stored, every datasource and generation (diagnostics)."""
        ...

    def close(self) -> None:
        """Release client handles; safe to call twice."""
        ...


#: Deadlines (seconds) for a Chroma server. Opening: the client talks to the server in its
#: constructor (bounded by a worker thread). Reads (searches, manifest and chunk reads, what
#: retrieval waits for before it falls back to the schema store) get less time than writes
#: (upserts and deletes of whole batches).
HTTP_CONNECT_TIMEOUT_S = 5.0
HTTP_OPEN_TIMEOUT_S = 10.0
HTTP_READ_TIMEOUT_S = 15.0
HTTP_WRITE_TIMEOUT_S = 60.0
HTTP_TIMEOUT = (HTTP_CONNECT_TIMEOUT_S, HTTP_WRITE_TIMEOUT_S)  # connect, read (seconds)
_READ_ENDPOINTS = ("/query", "/get", "/count")


def _bound_http_timeouts(client: ClientAPI) -> None:
    """Chroma's HTTP client waits forever by default; a hung server must fail (and trip the breaker)."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        session.timeout = httpx.Timeout(HTTP_WRITE_TIMEOUT_S, connect=HTTP_CONNECT_TIMEOUT_S)
        hooks = session.event_hooks
        session.event_hooks = {**hooks, "request": [*hooks.get("request", []), _read_deadline]}


def _read_deadline(request: httpx.Request) -> None:
    """Give reads the shorter deadline (an httpx request hook: the timeout travels with the request)."""
    import httpx

    if request.method == "GET" or request.url.path.endswith(_READ_ENDPOINTS):
        request.extensions["timeout"] = httpx.Timeout(HTTP_READ_TIMEOUT_S, connect=HTTP_CONNECT_TIMEOUT_S).as_dict()


def _drop_failed_system(path: str) -> None:
    """Forget the store Chroma cached for ``path`` when opening it failed.

    ``chromadb`` caches one ``System`` per path before starting it; when starting fails (a
    damaged ``chroma.sqlite3``) the broken one stays cached and every later client in the
    process fails with an unrelated ``AttributeError``. Private to chromadb (pinned 1.5.9):
    only touched when no client holds it.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    if SharedSystemClient._identifier_to_refcount.get(path, 0) > 0:
        return
    system = SharedSystemClient._identifier_to_system.pop(path, None)
    if system is not None:
        try:
            system.stop()
        except Exception as exc:  # noqa: BLE001 - it never started properly
            log.debug("stopping the failed Chroma system for %s: %s", path, exc)


def build_vector_store(settings: Settings, embeddings: Embeddings, *,
                       collection_name: str = DEFAULT_COLLECTION,
                       breaker: CircuitBreaker | None = None,
                       metrics: MetricsRegistry | None = None) -> ChromaVectorStore:
    """The configured store: ``chromadb.HttpClient`` when ``CHROMA_HOST`` is set, else a
    ``PersistentClient`` under ``$NL2SQL_HOME/chroma``. Telemetry is off; nothing connects
    until the first call. Every server call has a deadline (``HTTP_*_TIMEOUT_S``); an embedded
    store's damaged files raise ``VectorStoreCorruptError``."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        host, port = settings.chroma_host, settings.chroma_port

        def http_client() -> ClientAPI:
            client = chromadb.HttpClient(host=host, port=port, settings=chroma_settings)
            _bound_http_timeouts(client)
            return client

        where = f"chroma server {host}:{port}"
        return ChromaVectorStore(BoundedClientFactory(http_client, timeout_s=HTTP_OPEN_TIMEOUT_S, where=where),
                                 embeddings, collection_name=collection_name, breaker=breaker, where=where,
                                 metrics=metrics)
    path = settings.chroma_path

    def persistent_client() -> ClientAPI:
        path.mkdir(parents=True, exist_ok=True)
        try:
            return chromadb.PersistentClient(path=str(path), settings=chroma_settings)
        except BaseException:  # a damaged file can make Chroma's Rust core panic (a BaseException)
            _drop_failed_system(str(path))
            raise

    return ChromaVectorStore(persistent_client, embeddings, collection_name=collection_name, breaker=breaker,
                             where=f"chroma at {path}", metrics=metrics, files=StoreFiles(path))
