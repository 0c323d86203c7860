"""What the store asks Chroma and how it reads the answers: where-filters, record conversion, MMR.

Pure (no Chroma import): filters are plain dicts in Chroma's ``where`` syntax, so the scoping
rules (generations, tenants, versions) are testable without a database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from nl2sql_assets.indexing.models import IndexState, MetadataValue, SearchFilter, SearchHit, StoredChunk
from nl2sql_assets.indexing.refresh_plan import INTERNAL_KEYS

#: Query vectors x results per ``collection.query`` call at most. Chroma reads a query's hits back
#: in one SQLite statement with a variable per hit, and SQLite refuses more than 32,766
#: ("too many SQL variables"): 150 questions x 3.6 texts x 60 hits (the retriever's dense_k)
#: is already 32,400.
MAX_HITS_PER_QUERY_CALL = 16_384

Where = dict[str, object]


def all_of(clauses: list[Where]) -> Where:
    """Chroma's ``$and`` (which refuses a single clause)."""
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def any_of(clauses: list[Where]) -> Where:
    """Chroma's ``$or`` (which refuses a single clause)."""
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def visible_at(generation: int) -> list[Where]:
    """The clauses selecting records readers at ``generation`` see."""
    return [{"valid_from": {"$lte": generation}}, {"valid_to": {"$gt": generation}}]


def visible_where(datasource_id: str, state: IndexState, schema_version: str | None) -> Where:
    """The datasource's visible records, of one version or every kept version."""
    parts: list[Where] = [{"datasource_id": datasource_id}]
    if schema_version is not None:
        parts.append({"schema_version": schema_version})
    return all_of(parts + visible_at(state.generation))


def search_scope(states: Mapping[str, IndexState], where: SearchFilter) -> Where | None:
    """The Chroma filter for ``where`` given the datasources' states; None when nothing can match."""
    clauses: list[Where] = []
    for ds in sorted(states):
        state = states[ds]
        if where.tenant_id is not None and state.tenant_id != where.tenant_id:
            continue
        version = where.versions.get(ds) or state.live_version
        if not version:
            continue
        clauses.append(all_of([{"datasource_id": ds}, {"schema_version": version}, *visible_at(state.generation)]))
    if not clauses:
        return None
    parts = [any_of(clauses)]
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
    return all_of(parts)


def stored_fields(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None) -> dict[str, object]:
    """The fields of a :class:`StoredChunk` from a record, without the store's internal keys."""
    m = dict(meta or {})
    chunk_id = str(m.get("chunk_id", sid))
    for key in INTERNAL_KEYS:
        m.pop(key, None)
    return {"id": chunk_id, "chunk_type": m.get("chunk_type"), "datasource_id": str(m.get("datasource_id", "")),
            "schema_version": str(m.get("schema_version", "")), "document": doc or "", "metadata": m}


def stored_chunk(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None) -> StoredChunk:
    """A record as a :class:`StoredChunk`."""
    return StoredChunk(**stored_fields(sid, meta, doc))  # type: ignore[arg-type]


def search_hit(sid: str, meta: Mapping[str, MetadataValue] | None, doc: str | None, score: float) -> SearchHit:
    """A record and its similarity as a :class:`SearchHit` (a non-finite score becomes 0)."""
    # validated once: a search builds a hit for every chunk of every query text
    return SearchHit(**stored_fields(sid, meta, doc),  # type: ignore[arg-type]
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
