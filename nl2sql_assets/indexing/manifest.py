"""The generation manifest: one record per datasource in the ``<collection>__manifest`` collection.

A record is the datasource's :class:`IndexState`: the live version, the generation readers
see (``refresh_plan`` explains generations), the tenant, the embedding model key, the chunk
count and a digest of the live chunk set, and (store layout 2) the generation of every
retained version as a JSON object plus ``layout``. A record without ``layout`` was written by the
previous layout (``refresh_plan`` explains both). Writing one record is a single-record upsert, which
is what makes the flip of a refresh atomic for readers. Records carry a one-element dummy
vector: Chroma stores nothing without one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from time import monotonic

from nl2sql_assets.indexing.chroma_connection import ChromaConnection
from nl2sql_assets.indexing.chroma_queries import Scope, scope_of
from nl2sql_assets.indexing.models import IndexState, MetadataValue, SearchFilter
from nl2sql_assets.indexing.refresh_plan import ManifestState, as_manifest_state

#: search scopes kept per read of the states (one per filter: a routing search per tenant, a
#: schema search per datasource and version)
MAX_KEPT_SCOPES = 1024


def _reader(every: dict[str, ManifestState]) -> Callable[[list[str] | None], dict[str, ManifestState]]:
    """``read`` over states already read."""
    return lambda ids: dict(every) if ids is None else {i: every[i] for i in ids if i in every}


def _versions(raw: MetadataValue | None) -> dict[str, int]:
    try:
        data = json.loads(str(raw)) if raw else {}
    except ValueError:
        return {}
    return {str(v): int(g) for v, g in data.items()} if isinstance(data, dict) else {}


def state_from_metadata(datasource_id: str, meta: Mapping[str, MetadataValue]) -> ManifestState:
    """The state a manifest record holds; missing fields take their empty defaults."""
    return ManifestState(
        datasource_id=datasource_id, tenant_id=str(meta.get("tenant_id", "default")),
        live_version=str(meta.get("live_version") or "") or None,
        generation=int(meta.get("generation", 0)),
        model_key=str(meta.get("model_key", "")), chunk_count=int(meta.get("chunk_count", 0)),
        content_digest=str(meta.get("content_digest", "")), updated_at=str(meta.get("updated_at", "")),
        versions=_versions(meta.get("versions")), layout=int(meta.get("layout", 1)))


def state_metadata(state: IndexState) -> dict[str, MetadataValue]:
    """The manifest record's metadata for ``state`` (Chroma stores no None: no live version is "")."""
    full = as_manifest_state(state)
    assert full is not None
    layout: dict[str, MetadataValue] = {} if full.legacy else {"versions": full.versions_json(),
                                                               "layout": full.layout}
    return {
        **layout, "tenant_id": state.tenant_id, "live_version": state.live_version or "",
        "generation": state.generation, "model_key": state.model_key,
        "chunk_count": state.chunk_count, "content_digest": state.content_digest,
        "updated_at": state.updated_at,
    }


class GenerationManifest:
    """Reads and writes manifest records through the connection (and so through its breaker)."""

    def __init__(self, connection: ChromaConnection) -> None:
        self.connection = connection
        # (read at, every state, the search scopes built over them by filter)
        self._recent: tuple[float, dict[str, ManifestState], dict[str, Scope | None]] | None = None
        self._lock = threading.Lock()

    def scope(self, where: SearchFilter) -> Scope | None:
        """The search scope of ``where`` (:func:`~nl2sql_assets.indexing.chroma_queries.scope_of`)
        over the states it accepts. Over reused states (``where.state_max_age_s``) a filter's scope
        is built once per read of them: a routing search over 157 datasources rebuilt their 157
        version clauses and digests, about 0.5 ms, for every question. A search over 146
        datasources spent 8 ms reading their states; a reader at a generation a moment old still
        sees that generation's records whole (a refresh ends their validity, it does not delete
        them: only retention does), so its answer is the previous version's, as it would have been
        a moment earlier. A write through this manifest drops what was read."""
        if where.state_max_age_s <= 0:
            return scope_of(self.read, self.count, where)
        _, every, scopes = self._recent_states(where.state_max_age_s)
        key = where.model_dump_json()
        if key in scopes:
            return scopes[key]
        scope = scope_of(_reader(every), every.__len__, where)
        if len(scopes) < MAX_KEPT_SCOPES:
            scopes[key] = scope
        return scope

    def _recent_states(self, max_age_s: float) -> tuple[float, dict[str, ManifestState], dict[str, Scope | None]]:
        """Every state as read at most ``max_age_s`` ago (read now when older), with its scopes."""
        now = monotonic()
        with self._lock:
            recent = self._recent
        if recent is None or now - recent[0] >= max_age_s:
            recent = (now, self.read(), {})
            with self._lock:
                self._recent = recent
        return recent

    def read(self, datasource_ids: Sequence[str] | None = None) -> dict[str, ManifestState]:
        """The states of the given datasources (every datasource when None); absent ones are left out."""
        manifest = self.connection.manifest_collection(create=False)
        if manifest is None:
            return {}
        ids = list(datasource_ids) if datasource_ids is not None else None
        if ids == []:
            return {}
        res = self.connection.call("read manifest", lambda: manifest.get(ids=ids, include=["metadatas"]))
        return {rid: state_from_metadata(rid, dict(meta or {}))
                for rid, meta in zip(res["ids"], res["metadatas"] or [], strict=False)}

    def count(self) -> int:
        """How many datasources the store holds (a search over all of them needs no Chroma filter)."""
        manifest = self.connection.manifest_collection(create=False)
        return 0 if manifest is None else int(self.connection.call("count manifest", manifest.count))

    def get(self, datasource_id: str) -> ManifestState | None:
        """One datasource's state; None when it is not indexed."""
        return self.read([datasource_id]).get(datasource_id)

    def write(self, state: IndexState) -> None:
        """Store ``state`` as the datasource's record: the atomic flip of a refresh."""
        manifest = self.connection.manifest_collection(create=True)
        assert manifest is not None
        meta = state_metadata(state)
        self.connection.call("flip live pointer", lambda: manifest.upsert(
            ids=[state.datasource_id], embeddings=[[1.0]], metadatas=[meta]))
        self._forget()

    def delete(self, datasource_id: str) -> None:
        """Remove the datasource's record (nothing to do when there is no manifest)."""
        manifest = self.connection.manifest_collection(create=False)
        if manifest is not None:
            self.connection.call("delete pointer", lambda: manifest.delete(ids=[datasource_id]))
            self._forget()

    def _forget(self) -> None:
        with self._lock:
            self._recent = None
