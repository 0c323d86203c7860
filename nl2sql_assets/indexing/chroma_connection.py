"""One Chroma client and its two collections, every call guarded by the circuit breaker.

The chunk collection (cosine space) records the embedding model identity in its metadata;
the manifest collection ``<name>__manifest`` holds one record per datasource (``manifest``).
Vectors are always passed in explicitly: Chroma's default embedding function is never
created (``embedding_function=None``), so nothing downloads. ``chromadb`` and ``httpx`` are
imported lazily, where a call needs them, to keep importing this package fast.

Failures are told apart: a server that does not answer (or answers too late: see
:class:`BoundedClientFactory`) is :class:`VectorStoreUnavailableError` and counts toward the
breaker; damaged files (``chroma.sqlite3`` that is not a database, or fails its integrity
check) are :class:`VectorStoreCorruptError`, whose message says how to rebuild; anything else
is a :class:`VectorStoreError`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nl2sql_assets.errors import (
    EmbeddingDimensionMismatchError,
    Nl2SqlError,
    VectorStoreCorruptError,
    VectorStoreError,
    VectorStoreUnavailableError,
)
from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.models import MetadataValue, ModelIdentity
from nl2sql_assets.sqlite_health import check_file, corruption_in

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)

T = TypeVar("T")
DEFAULT_COLLECTION = "nl2sql_schema"
READ_PAGE = 5000
"""Records per metadata read (measured on 60,000 records: peak +105 MB, against +1 GB at 30,000)."""
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,500}[A-Za-z0-9]$")

#: What :meth:`ChromaConnection.records` returns: ids, metadatas, documents, embeddings.
Records = tuple[list[str], list[dict[str, MetadataValue]], list[str], list[np.ndarray]]


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


def is_unavailable(exc: BaseException) -> bool:
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


@dataclass(frozen=True)
class StoreFiles:
    """Where an embedded store keeps its data: checked when a call fails, so damage is reported
    as damage (with the way out) rather than as an outage or an empty store."""

    folder: Path

    @property
    def database(self) -> Path:
        return self.folder / "chroma.sqlite3"

    def damage(self) -> str | None:
        """What is wrong with ``chroma.sqlite3``; None when it is healthy, missing or busy."""
        problem = check_file(self.database)
        return f"{self.database}: {problem}" if problem else None


class BoundedClientFactory:
    """Builds a client in a worker thread and waits for it at most ``timeout_s``.

    ``chromadb.HttpClient`` talks to the server in its constructor, before any timeout can be
    set on its HTTP session: a server that accepts connections but never answers (stopped,
    swapping) would hold the caller forever. The worker is a daemon thread; while it still waits,
    later calls wait for the same attempt instead of starting another (at most one stuck thread),
    and when it finally succeeds its client is used.
    """

    def __init__(self, build: Callable[[], ClientAPI], *, timeout_s: float, where: str) -> None:
        self.build = build
        self.timeout_s = timeout_s
        self.where = where
        self._lock = threading.Lock()
        self._attempt: _Attempt | None = None

    def __call__(self) -> ClientAPI:
        with self._lock:
            attempt = self._attempt
            if attempt is None or (attempt.done.is_set() and attempt.error is not None):
                attempt = self._attempt = _Attempt(self.build, self.where)
        if not attempt.done.wait(self.timeout_s):
            raise TimeoutError(f"{self.where} did not answer within {self.timeout_s:g} s (opening the client)")
        with self._lock:
            if self._attempt is attempt:
                self._attempt = None
        if attempt.error is not None:
            raise attempt.error
        assert attempt.client is not None
        return attempt.client


class _Attempt:
    """One client construction running in a daemon thread."""

    def __init__(self, build: Callable[[], ClientAPI], where: str) -> None:
        self.done = threading.Event()
        self.client: ClientAPI | None = None
        self.error: BaseException | None = None
        self._build = build
        threading.Thread(target=self._run, name=f"chroma-open {where}", daemon=True).start()

    def _run(self) -> None:
        try:
            self.client = self._build()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            self.error = exc
        finally:
            self.done.set()


def is_panic(exc: BaseException) -> bool:
    """A panic of Chroma's Rust core (pyo3's ``PanicException``, a BaseException: a damaged
    ``chroma.sqlite3`` can cause one), which must not escape as if it were an interrupt."""
    return type(exc).__name__ == "PanicException"


def identity_of(collection: Collection) -> ModelIdentity | None:
    """The model identity recorded on a collection; None when it records none."""
    meta = collection.metadata or {}
    try:
        return ModelIdentity(provider=str(meta["provider"]), model=str(meta["model"]),
                             dimension=int(meta["dimension"]))  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None


class ChromaConnection:
    """The client (built lazily), the collection handles, and breaker-guarded calls.

    Args:
        client: a Chroma client, or a zero-argument factory for one (created lazily through
            the breaker, so an unreachable server fails fast instead of at construction).
        identity: the configured embedding model identity (read on every check).
        collection_name: the chunk collection; the manifest is ``<collection_name>__manifest``.
        breaker: the circuit breaker every Chroma call goes through.
        where: a label for messages and logs (path or host:port), never a secret.
        files: an embedded store's folder, checked for damage when a call fails.
    """

    def __init__(self, client: ClientAPI | Callable[[], ClientAPI], identity: Callable[[], ModelIdentity], *,
                 collection_name: str, breaker: CircuitBreaker, where: str, files: StoreFiles | None = None) -> None:
        self.collection_name = collection_name_for(collection_name)
        self.manifest_name = f"{self.collection_name}__manifest"
        self.identity = identity
        self.breaker = breaker
        self.where = where
        self.files = files
        if callable(client) and not hasattr(client, "get_or_create_collection"):
            self.client_factory: Callable[[], ClientAPI] | None = client
            self._client_obj: ClientAPI | None = None
        else:
            self.client_factory = None
            self._client_obj = client  # type: ignore[assignment]
        self._collection: Collection | None = None
        self._manifest: Collection | None = None

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one Chroma interaction through the breaker, translating its errors."""

        def guarded() -> T:
            try:
                return fn()
            except Nl2SqlError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated into our error hierarchy
                raise self._translate(what, exc) from exc
            except BaseException as exc:
                if not is_panic(exc):
                    raise
                raise self._translate(what, exc) from exc

        return self.breaker.call(guarded)

    def _translate(self, what: str, exc: BaseException) -> VectorStoreError:
        """Our error for a failed Chroma call: damaged files, unreachable server, or anything else."""
        from chromadb.errors import NotFoundError

        if isinstance(exc, NotFoundError):
            self._collection = self._manifest = None  # recreated elsewhere: look it up again
        else:
            damaged = self._damaged(exc)
            if damaged is not None:
                return damaged
        cls = VectorStoreUnavailableError if is_unavailable(exc) else VectorStoreError
        return cls(f"vector store ({self.where}): {what} failed: {type(exc).__name__}: {exc}")

    def _damaged(self, exc: BaseException) -> VectorStoreCorruptError | None:
        """The error to raise when the failure comes from damaged files, else None.

        Chroma reports damage in many ways (an InternalError naming SQLite's code, an
        InvalidArgumentError about its log, a panic of its Rust core), so an embedded store's
        database is checked too.
        """
        problem = corruption_in(exc)
        if self.files is not None:
            problem = self.files.damage() or (f"{self.files.database}: {problem}" if problem else None)
        if not problem:
            return None
        self.forget()
        return VectorStoreCorruptError(self.where, problem, folder=str(self.files.folder) if self.files else None)

    def client(self) -> ClientAPI:
        """The client, built by the factory on first use."""
        if self._client_obj is None:
            assert self.client_factory is not None
            self._client_obj = self.client_factory()
        return self._client_obj

    def forget(self) -> None:
        """Drop the handles; a factory-built client is closed (it is rebuilt on the next call).

        Closing matters: Chroma shares one open store per path within a process, and only when
        the last client closes does the next one read the files afresh (after a folder was moved
        aside and rebuilt, or damaged)."""
        client = self._client_obj if self.client_factory is not None else None
        self._collection = self._manifest = None
        if self.client_factory is not None:
            self._client_obj = None
        close = getattr(client, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - it is being dropped anyway
                log.debug("closing the Chroma client failed: %s", exc)

    def get_collection(self, name: str) -> Collection | None:
        """A collection by name; None when it does not exist. Unguarded: call inside :meth:`call`."""
        from chromadb.errors import NotFoundError

        try:
            return self.client().get_collection(name, embedding_function=None)  # type: ignore[arg-type]
        except NotFoundError:
            return None

    def any_collection(self) -> Collection | None:
        """The chunk collection whatever model made it (deletion and audits work across models)."""
        if self._collection is None:
            self._collection = self.call("open collection", lambda: self.get_collection(self.collection_name))
        return self._collection

    def read_collection(self) -> Collection | None:
        """The chunk collection for searching, None when nothing was ever indexed.

        Raises:
            EmbeddingDimensionMismatchError: it holds vectors of another model.
        """
        coll = self.any_collection()
        if coll is None:
            return None
        stored, configured = identity_of(coll), self.identity()
        if stored != configured:
            self._collection = None
            raise EmbeddingDimensionMismatchError(
                self.collection_name, configured.key, stored.key if stored else "an unknown model")
        return coll

    def write_collection(self) -> Collection:
        """The chunk collection for writing; recreated (with its manifest) when it holds another model."""

        def open_or_create() -> Collection:
            client, identity = self.client(), self.identity()
            coll = self.get_collection(self.collection_name)
            if coll is not None:
                stored = identity_of(coll)
                if stored == identity:
                    return coll
                log.warning("vector collection %s holds %s vectors, configured %s: recreating it "
                            "(every datasource must be re-indexed)", self.collection_name,
                            stored.key if stored else "unknown", identity.key)
                client.delete_collection(self.collection_name)
                if self.get_collection(self.manifest_name) is not None:
                    client.delete_collection(self.manifest_name)
            self._manifest = None
            # get_or_create: another process may be creating it at this very moment
            created = client.get_or_create_collection(
                self.collection_name, configuration={"hnsw": {"space": "cosine"}},
                metadata=self._identity_metadata(identity), embedding_function=None)  # type: ignore[arg-type]
            if identity_of(created) != identity:
                raise VectorStoreError(f"vector store ({self.where}): collection '{self.collection_name}' was "
                                       f"just recreated by another process for another embedding model")
            return created

        self._collection = self.call("open collection for writing", open_or_create)
        return self._collection

    def manifest_collection(self, *, create: bool) -> Collection | None:
        """The manifest collection; None when it does not exist and ``create`` is False."""
        if self._manifest is None:
            def get() -> Collection | None:
                if create:
                    return self.client().get_or_create_collection(
                        self.manifest_name, metadata={"model_key": self.identity().key},
                        embedding_function=None)  # type: ignore[arg-type]
                return self.get_collection(self.manifest_name)

            self._manifest = self.call("open manifest", get)
        return self._manifest

    def records(self, coll: Collection, where: dict[str, object] | None, *, documents: bool = False,
                embeddings: bool = False, ids: list[str] | None = None, stop_after: int | None = None) -> Records:
        """Records matching ``where`` (and ``ids``): ids, metadatas, documents, embeddings; with
        ``stop_after``, no further page once more than that many were read.

        Give ``ids`` or ``where``, rarely both: Chroma answers a ``get`` with both slowly (57 s for
        3,000 ids of a 68,000-record collection, against 0.4 s for either alone).

        Read in pages of ``READ_PAGE`` records: one ``get`` of every metadata fails beyond about
        32,000 records (SQLite's bound on query variables) and holds several times the data in
        memory while it runs (+700 MB for 30,000 records).
        """
        include = ["metadatas"] + (["documents"] if documents else []) + (["embeddings"] if embeddings else [])
        out_ids: list[str] = []
        metas: list[dict[str, MetadataValue]] = []
        docs: list[str] = []
        vecs: list[np.ndarray] = []
        for page in self._pages(coll, where, include, ids):
            out_ids.extend(page["ids"])
            metas.extend(dict(m or {}) for m in (page["metadatas"] or []))
            if documents:
                docs.extend(page["documents"] or [])
            if embeddings and page["embeddings"] is not None:
                vecs.extend(page["embeddings"])
            if stop_after is not None and len(out_ids) > stop_after:
                break
        return out_ids, metas, docs, vecs

    def _pages(self, coll: Collection, where: dict[str, object] | None, include: list[str],
               ids: list[str] | None) -> Iterator[dict[str, Any]]:
        if ids is not None:
            for start in range(0, len(ids), READ_PAGE):
                part = ids[start:start + READ_PAGE]
                yield self.call("read chunks", lambda p=part: coll.get(  # type: ignore[misc]
                    ids=p, where=where, include=include))  # type: ignore[arg-type]
            return
        offset = 0
        while True:
            page = self.call("read chunks", lambda o=offset: coll.get(  # type: ignore[misc]
                where=where, include=include, limit=READ_PAGE, offset=o))  # type: ignore[arg-type]
            yield page
            if len(page["ids"]) < READ_PAGE:
                return
            offset += READ_PAGE

    def record_ids(self, coll: Collection, where: dict[str, object] | None) -> list[str]:
        """Ids of the records matching ``where``, without their metadata (cheap at any size)."""
        res = self.call("read record ids", lambda: coll.get(where=where, include=[]))  # type: ignore[arg-type]
        return list(res["ids"])

    def delete_ids(self, coll: Collection, ids: list[str], what: str) -> None:
        """Delete records in batches the server accepts."""
        step = max(1, self.max_batch())
        for start in range(0, len(ids), step):
            batch = ids[start:start + step]
            self.call(what, lambda b=batch: coll.delete(ids=b))  # type: ignore[misc]

    def max_batch(self) -> int:
        """The server's batch limit (1000 when it cannot say)."""
        try:
            return int(self.client().get_max_batch_size())
        except Exception:  # noqa: BLE001 - older servers: a safe default
            return 1000

    @staticmethod
    def _identity_metadata(identity: ModelIdentity) -> dict[str, MetadataValue]:
        return {"provider": identity.provider, "model": identity.model, "dimension": identity.dimension,
                "model_key": identity.key, "created_by": "nl2sql-assets"}
