"""Queries ranked here from stored vectors: large batches against one set, and sets a store keeps.

Chroma evaluates a metadata filter and scans the records it allows for every query vector:
about 1.8 ms per query over 3,000 allowed records of a 68,000-record collection, so the publish
check that searches each of 3,000 table names spent 5.5 s in Chroma. Reading the allowed
records with their vectors once (0.4 s) and ranking them with one matrix product gives the exact
nearest records (cosine, as the collection's space) in a fraction of the time; Chroma's own answer
is approximate (its HNSW search missed some of the 100 nearest of 299 records in a test). A batch
of at least ``MIN_QUERIES`` under an exact filter is ranked so while the filter allows at most
``MAX_RECORDS`` records (their vectors are held in memory while the batch is ranked).

Single searches pay the same per call. Over the 6,768 records of 157 datasources, one
datasource's schema search spent about 20 ms in Chroma's filter, and a routing search 6-40 ms,
most of it reading the hits' metadata back (7 ms for 98 hits, 24 ms for 392). So a store keeps
the sets it searches, up to ``RecordSets.max_set`` records each, in :class:`RecordSets` and
ranks them here. A search over every datasource reads the whole store once and keeps the
records it allows (``Scope.visible``); one datasource's sets are then taken from the whole store
while that datasource's index state is the one it was read at (:meth:`RecordSets.derive`). A set
is named by the collection and the index states it was read at (``Scope.key``): the records
readers at one generation see do not change (a refresh ends validity at a later generation and
writes above it; retention removes a version from the manifest before its records), so a kept set
is never stale, only unused. A set larger than ``FIRST_READ`` is read on its second search, so a
one-question process (the CLI) never pays for reading it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from nl2sql_assets.indexing.chroma_connection import ChromaConnection
from nl2sql_assets.indexing.chroma_queries import Scope

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

MIN_QUERIES = 64
MAX_RECORDS = 20_000
FIRST_READ = 200
"""Sets of about this many records or fewer are read on their first search: reading one
datasource's 40 records took about as long as Chroma's filtered search (15-25 ms)."""
_BLOCK = 256
"""Queries ranked per matrix product (bounds the similarity block at 256 x MAX_RECORDS floats)."""


class RecordSet(NamedTuple):
    """One filter's records: ids, metadata, documents (when read), unit vectors."""

    ids: list[str]
    metas: list[dict[str, Any]]
    docs: list[str]
    vectors: np.ndarray


class RecordSets:
    """Small record sets with their vectors, least recently used dropped beyond ``max_records``,
    plus one copy of the whole store (at most ``max_set`` records) the others may derive from.

    A set larger than ``max_set`` is remembered as such (and left to Chroma). Thread-safe.
    """

    def __init__(self, max_set: int = 10_000, max_records: int = 30_000) -> None:
        self.max_set = max_set
        self.max_records = max_records
        self._sets: OrderedDict[tuple[str, str], RecordSet] = OrderedDict()
        self._large: set[tuple[str, str]] = set()
        self._seen: set[tuple[str, str]] = set()
        # collection, index states, records, and each datasource's record positions in them
        self._base: tuple[str, dict[str, str], RecordSet, dict[str, list[int]]] | None = None
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> RecordSet | None:
        with self._lock:
            found = self._sets.get(key)
            if found is not None:
                self._sets.move_to_end(key)
            return found

    def wanted(self, key: tuple[str, str], size: int) -> bool:
        """Whether to read the set now: not known or expected (``size``, about its records) to be
        too large, and about as cheap to read as to search (``FIRST_READ``) or asked for before."""
        with self._lock:
            if key in self._large or size > self.max_set:
                return False
            if size <= FIRST_READ or key in self._seen:
                return True
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen.add(key)
            return False

    def mark_large(self, key: tuple[str, str]) -> None:
        with self._lock:
            if len(self._large) > 10_000:
                self._large.clear()
            self._large.add(key)

    def put(self, key: tuple[str, str], found: RecordSet) -> None:
        if len(found.ids) > self.max_set:
            self.mark_large(key)
            return
        with self._lock:
            if key in self._sets:
                return
            self._sets[key] = found
            self._held += len(found.ids)
            while self._held > self.max_records and len(self._sets) > 1:
                _, dropped = self._sets.popitem(last=False)
                self._held -= len(dropped.ids)

    def set_base(self, collection: str, stamps: dict[str, str], found: RecordSet) -> None:
        """Every record of ``collection``, read at the index states ``stamps`` (per datasource)."""
        positions: dict[str, list[int]] = {}
        for i, meta in enumerate(found.metas):
            positions.setdefault(str((meta or {}).get("datasource_id")), []).append(i)
        with self._lock:
            self._base = (collection, dict(stamps), found, positions)

    def derive(self, collection: str, scope: Scope) -> RecordSet | None:
        """The records ``scope`` allows, taken from the collection's whole set when that was read at
        the same index states of the scope's datasources; None otherwise."""
        with self._lock:
            base = self._base
        if base is None or base[0] != collection or any(base[1].get(ds) != st for ds, st in scope.stamps.items()):
            return None
        # only the scope's datasources' records can be visible: a routing search over 14 of 157
        # datasources checks ~600 records instead of all 6,768 (8 ms of Python per search)
        return _subset(base[2], scope, sorted(i for ds in scope.checks for i in base[3].get(ds, ())))

    def clear(self) -> None:
        with self._lock:
            self._base = None
            self._sets.clear()
            self._large.clear()
            self._seen.clear()
            self._held = 0


def exact_query(conn: ChromaConnection, coll: Collection, queries: np.ndarray, n: int, scope: Scope,
                include: list[str], sets: RecordSets | None = None) -> dict[str, Any] | None:
    """Chroma's ``query`` result for ``queries`` (ids, distances and what ``include`` asks) within
    ``scope``, or None when Chroma should answer (see the module's docstring)."""
    found = _record_set(conn, coll, len(queries), scope, include, sets)
    if found is None:
        return None
    ids, metas, docs, stored = found
    out: dict[str, Any] = {key: [] for key in ("ids", "distances", *include)}
    if not ids:
        for key in out:
            out[key] = [[] for _ in queries]
        return out
    asked = _unit(np.asarray(queries, dtype=np.float32))
    k = min(n, len(ids))
    for start in range(0, len(asked), _BLOCK):
        sims = asked[start:start + _BLOCK] @ stored.T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < len(ids) else np.tile(np.arange(len(ids)),
                                                                                        (len(sims), 1))
        for row, picks in zip(sims, top, strict=True):
            order = picks[np.argsort(-row[picks], kind="stable")]
            out["ids"].append([ids[i] for i in order])
            out["distances"].append([float(1.0 - row[i]) for i in order])
            if "metadatas" in include:
                out["metadatas"].append([metas[i] for i in order])
            if "documents" in include:
                out["documents"].append([docs[i] for i in order])
            if "embeddings" in include:
                out["embeddings"].append([stored[i] for i in order])
    return out


def _record_set(conn: ChromaConnection, coll: Collection, n_queries: int, scope: Scope, include: list[str],
                sets: RecordSets | None) -> RecordSet | None:
    """The records ``scope`` allows, from ``sets`` or read (and kept there, with their documents,
    when small); None when Chroma should answer."""
    key = (str(coll.id), scope.key())
    kept = sets.get(key) if sets is not None else None
    if kept is None and sets is not None and scope.broad is None:
        kept = sets.derive(key[0], scope)
        if kept is not None:
            sets.put(key, kept)
    if kept is not None:
        return kept
    keep = sets is not None and sets.wanted(key, scope.size)
    batch = n_queries >= MIN_QUERIES and scope.broad is None
    if not keep and not batch:
        return None
    where = scope.where if scope.broad is None else (scope.first or None)
    if not keep and len(conn.record_ids(coll, where)) > MAX_RECORDS:
        return None
    limit = max(MAX_RECORDS if batch else 0, sets.max_set if keep and sets is not None else 0)
    ids, metas, docs, vecs = conn.records(coll, where, documents=keep or "documents" in include, embeddings=True,
                                          stop_after=limit)
    complete = len(ids) <= limit
    vectors = _unit(np.asarray(vecs, dtype=np.float32)) if ids else np.zeros((0, 0), dtype=np.float32)
    found = RecordSet(ids, metas, docs, vectors)
    if complete and keep and sets is not None and where is None:  # the whole store: every other set derives
        sets.set_base(key[0], scope.stamps, found)
    if scope.broad is not None:
        found = _subset(found, scope)
    if sets is not None:
        if not complete or len(found.ids) > sets.max_set:
            sets.mark_large(key)
        elif keep:
            sets.put(key, found)
    return found if complete else None


def _subset(found: RecordSet, scope: Scope, positions: list[int] | None = None) -> RecordSet:
    """The records of ``found`` that ``scope`` allows (``Scope.visible``), of those at ``positions``
    (in order; None: all)."""
    pool = range(len(found.metas)) if positions is None else positions
    kept = [i for i in pool if scope.visible(found.metas[i])]
    return RecordSet([found.ids[i] for i in kept], [found.metas[i] for i in kept],
                     [found.docs[i] for i in kept] if found.docs else [],
                     found.vectors[kept] if kept else np.zeros((0, 0), dtype=np.float32))


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
