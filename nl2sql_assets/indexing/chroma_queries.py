"""What the store asks Chroma and how it reads the answers: where-filters, record conversion, MMR.

Pure (no Chroma import): filters are plain dicts in Chroma's ``where`` syntax, so the scoping
rules (generations, tenants, versions) are testable without a database. Records of the shared
layout are named on reading: a record holds a chunk template, and the hit is the chunk of the
version searched.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.indexing.models import MetadataValue, SearchFilter, SearchHit, StoredChunk
from nl2sql_assets.indexing.refresh_plan import INTERNAL_KEYS, ManifestState, chunk_id_for, template_of_record

#: Query vectors x results per ``collection.query`` call at most. Chroma reads a query's hits back
#: in one SQLite statement with a variable per hit, and SQLite refuses more than 32,766
#: ("too many SQL variables"): 150 questions x 3.6 texts x 60 hits (the retriever's dense_k)
#: is already 32,400.
MAX_HITS_PER_QUERY_CALL = 16_384

#: Above this many datasources a search does not hand Chroma the exact filter (a large ``$or`` of
#: per-datasource generation ranges: 850 ms per query over 146 datasources): it asks with
#: ``Scope.first`` (no filter at all when it covers the whole store: 4 ms) for :func:`broad_fetch`
#: hits and keeps the visible ones (:meth:`Scope.visible`, :func:`visible_rows`); where too few are
#: left (other chunk types, retained versions, a refresh in flight), once more with ``Scope.broad``
#: (ids, tenant, types: about 30 ms) and 4x the hits; only then with the exact filter.
BROAD_FILTER_MIN = 8

Where = dict[str, object]


def broad_fetch(n: int) -> int:
    """Hits a broad search asks for to keep ``n`` visible ones (retained versions' records, a refresh
    in flight and, without a Chroma filter, other chunk types take some places)."""
    return n + n // 2 + 8


def all_of(clauses: list[Where]) -> Where:
    """Chroma's ``$and`` (which refuses a single clause)."""
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def any_of(clauses: list[Where]) -> Where:
    """Chroma's ``$or`` (which refuses a single clause)."""
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def visible_at(generation: int) -> list[Where]:
    """The clauses selecting records readers at ``generation`` see."""
    return [{"valid_from": {"$lte": generation}}, {"valid_to": {"$gt": generation}}]


def version_clause(datasource_id: str, state: ManifestState, schema_version: str) -> Where | None:
    """The records of one version: a generation range (shared layout) or, for a store of the
    previous layout, its ``schema_version`` at the head generation; None when it is not retained."""
    if state.legacy:
        return all_of([{"datasource_id": datasource_id}, {"schema_version": schema_version},
                       *visible_at(state.generation)])
    generation = state.generation_of(schema_version)
    return None if generation is None else all_of([{"datasource_id": datasource_id}, *visible_at(generation)])


def visible_where(datasource_id: str, state: ManifestState, schema_version: str | None) -> Where | None:
    """The datasource's records of one version, or of every retained version; None when there are none."""
    if schema_version is not None:
        return version_clause(datasource_id, state, schema_version)
    if state.legacy:
        return all_of([{"datasource_id": datasource_id}, *visible_at(state.generation)])
    clauses = [all_of(visible_at(g)) for g in sorted(set(state.versions.values()))]
    return all_of([{"datasource_id": datasource_id}, any_of(clauses)]) if clauses else None


class Scope(BaseModel):
    """A search's Chroma filter and the version searched per datasource (to name the hits)."""

    model_config = ConfigDict(frozen=True)

    where: dict[str, Any]
    versions: dict[str, str]
    shared: frozenset[str]
    """Datasources stored in the shared layout (their record ids are content addresses)."""
    broad: dict[str, Any] | None = None
    """With many datasources: the cheap filter to query with before :meth:`visible` (tenant, types,
    tables, and the datasource ids unless the search covers every datasource of the store; empty,
    i.e. no filter, when nothing is left)."""
    first: dict[str, Any] | None = None
    """The filter tried before ``broad``: none at all when the search covers the whole store (cheapest;
    other chunk types may crowd the hits), else ``broad`` itself."""
    types: frozenset[str] | None = None
    """The chunk types searched (None: all), checked by :meth:`visible` when ``broad`` leaves them out."""
    checks: dict[str, tuple[int, str | None]] = {}
    """Per datasource: the generation its readers see, and the version a previous-layout store filters on."""
    tables: frozenset[str] | None = None
    """The tables searched (None: all), checked by :meth:`visible` (a record's ``table`` or ``ref_table``)."""
    stamps: dict[str, str] = {}
    """Per datasource: the index state searched (version, generation, last write, content digest);
    the records the scope allows stay the same while these do."""
    stamp: str = ""
    """A digest of :attr:`stamps`."""
    size: int = 0
    """The searched datasources' live chunk counts summed: about how many records the scope allows."""

    def visible(self, meta: Mapping[str, Any] | None) -> bool:
        """Whether a record is one :attr:`where` selects (datasource, types, tables, generation range)."""
        check = self.checks.get(str((meta or {}).get("datasource_id")))
        if meta is None or check is None:
            return False
        if self.types is not None and meta.get("chunk_type") not in self.types:
            return False
        if self.tables is not None and meta.get("table") not in self.tables and meta.get("ref_table") not in self.tables:
            return False
        generation, legacy_version = check
        if legacy_version is not None and meta.get("schema_version") != legacy_version:
            return False
        return int(meta.get("valid_from", generation + 1)) <= generation < int(meta.get("valid_to", generation))

    def key(self) -> str:
        """Names the set of records this scope allows, at these index states (``exact_search.RecordSets``)."""
        asked = self.where if self.broad is None else [self.first, sorted(self.types or [])]
        return self.stamp + json.dumps(asked, sort_keys=True)

    def chunk_id(self, storage_id: str) -> str:
        """The chunk id a hit's record stands for in the version searched."""
        template = template_of_record(storage_id)
        if template is None:
            return storage_id
        ds = template.split(":", 1)[0]
        version = self.versions.get(ds)
        return chunk_id_for(template, ds, version) if version and ds in self.shared else template


def search_scope(states: Mapping[str, ManifestState], where: SearchFilter, *, complete: bool = False) -> Scope | None:
    """The Chroma filter for ``where`` given the datasources' states; None when nothing can match.
    ``complete``: ``states`` hold every datasource of the store (then a search over all of them
    needs no Chroma filter at all)."""
    clauses: list[Where] = []
    versions: dict[str, str] = {}
    checks: dict[str, tuple[int, str | None]] = {}
    for ds in sorted(states):
        state = states[ds]
        if where.tenant_id is not None and state.tenant_id != where.tenant_id:
            continue
        version = where.versions.get(ds) or state.live_version
        clause = version_clause(ds, state, version) if version else None
        if clause is None:
            continue
        clauses.append(clause)
        versions[ds] = str(version)
        generation = state.generation if state.legacy else state.generation_of(str(version))
        checks[ds] = (int(generation or 0), str(version) if state.legacy else None)
    if not clauses:
        return None
    parts: list[Where] = []
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
    shared = frozenset(ds for ds in versions if not states[ds].legacy)
    broad = first = None
    if len(clauses) > BROAD_FILTER_MIN:
        everything = complete and len(clauses) == len(states)
        ids = [] if everything else [{"datasource_id": {"$in": sorted(versions)}}]
        broad = all_of([*ids, *parts]) if ids or parts else {}
        first = {} if everything else broad
    stamps = {ds: f"{versions[ds]}|{checks[ds][0]}|{states[ds].updated_at}|{states[ds].content_digest}"
              for ds in versions}
    return Scope(where=all_of([any_of(clauses), *parts]), versions=versions, shared=shared, broad=broad,
                 first=first, checks=checks, stamps=stamps, size=sum(states[ds].chunk_count for ds in versions),
                 stamp=hashlib.sha256(json.dumps(stamps, sort_keys=True).encode()).hexdigest(),
                 types=frozenset(where.chunk_types) if where.chunk_types is not None else None,
                 tables=frozenset(where.tables) if where.tables is not None else None)


def scope_of(read_states: Callable[[list[str] | None], dict[str, ManifestState]], count_states: Callable[[], int],
             where: SearchFilter) -> Scope | None:
    """:func:`search_scope` with the states ``read_states`` (the manifest's read) gives; over many
    datasources ``count_states`` says whether the search covers the whole store."""
    ids = where.datasource_ids
    states = read_states(ids)
    complete = ids is None or (len(states) > BROAD_FILTER_MIN and len(states) == count_states())
    return search_scope(states, where, complete=complete)


def visible_rows(res: Mapping[str, Any], qi: int, scope: Scope, n: int, fetched: int) -> dict[str, Any] | None:
    """Query ``qi``'s hits of a broad search (``fetched`` asked for) cut to the visible ones, at most
    ``n``, as a one-query result; None when fewer than ``n`` remain of a full answer (some visible
    record may lie further down: the caller asks again, with more hits, then with the exact filter)."""
    metas = (res.get("metadatas") or [[]])[qi]
    keep = [i for i, meta in enumerate(metas) if scope.visible(meta)]
    if len(keep) < n and len(metas) >= fetched:
        return None
    keep = keep[:n]
    out: dict[str, Any] = {}
    for key in ("ids", "distances", "metadatas", "documents", "embeddings"):
        rows = res.get(key)
        out[key] = None if rows is None else [[rows[qi][i] for i in keep]]
    return out


def stored_fields(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None,
                  version: str | None = None) -> dict[str, object]:
    """The fields of a :class:`StoredChunk` from a record, without the store's internal keys.

    A shared record is named as the chunk of ``version`` (the version read)."""
    m = dict(meta or {})
    chunk_id = str(m.get("chunk_id", sid))
    template = m.get("chunk_key")
    ds = str(m.get("datasource_id", ""))
    if template is not None and version is not None:
        chunk_id = chunk_id_for(str(template), ds, version)
        m["schema_version"] = version
    for key in INTERNAL_KEYS:
        m.pop(key, None)
    return {"id": chunk_id, "chunk_type": m.get("chunk_type"), "datasource_id": ds,
            "schema_version": str(m.get("schema_version", "")), "document": doc or "", "metadata": m}


def stored_chunk(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None,
                 version: str | None = None) -> StoredChunk:
    """A record as a :class:`StoredChunk` of ``version``."""
    return StoredChunk(**stored_fields(sid, meta, doc, version))  # type: ignore[arg-type]


def search_hit(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None, score: float,
               versions: Mapping[str, str] | None = None) -> SearchHit:
    """A record and its similarity as a :class:`SearchHit` (a non-finite score becomes 0)."""
    version = (versions or {}).get(str((meta or {}).get("datasource_id", "")))
    # validated once: a search builds a hit for every chunk of every query text
    return SearchHit(**stored_fields(sid, meta, doc, version),  # type: ignore[arg-type]
                     score=score if math.isfinite(score) else 0.0)


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
