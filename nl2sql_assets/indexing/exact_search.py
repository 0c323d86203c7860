"""Many queries against one small filtered set: read the set once and rank it here.

Chroma evaluates a metadata filter and scans the records it allows for every query vector:
about 1.8 ms per query over 3,000 allowed records of a 68,000-record collection, so the publish
check that searches each of 3,000 table names spent 5.5 s in Chroma. Reading the allowed
records with their vectors once (0.4 s) and ranking them with one matrix product gives the exact
nearest records (cosine, as the collection's space) in a fraction of the time; Chroma's own answer
is approximate (its HNSW search missed some of the 100 nearest of 299 records in a test). Used only for
batches of at least ``MIN_QUERIES`` under an exact filter, and only while the filter allows at
most ``MAX_RECORDS`` records (their vectors are held in memory while the batch is ranked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from nl2sql_assets.indexing.chroma_connection import ChromaConnection

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

MIN_QUERIES = 64
MAX_RECORDS = 20_000
_BLOCK = 256
"""Queries ranked per matrix product (bounds the similarity block at 256 x MAX_RECORDS floats)."""


def exact_query(conn: ChromaConnection, coll: Collection, queries: np.ndarray, n: int,
                where: dict[str, Any] | None, include: list[str]) -> dict[str, Any] | None:
    """Chroma's ``query`` result for ``queries`` (ids, distances and what ``include`` asks), or
    None when this path does not apply (too few queries, no filter, too many allowed records)."""
    if where is None or len(queries) < MIN_QUERIES:
        return None
    if len(conn.record_ids(coll, where)) > MAX_RECORDS:
        return None
    ids, metas, docs, vecs = conn.records(coll, where, documents="documents" in include, embeddings=True)
    out: dict[str, Any] = {key: [] for key in ("ids", "distances", *include)}
    if not ids:
        for key in out:
            out[key] = [[] for _ in queries]
        return out
    stored = _unit(np.asarray(vecs, dtype=np.float32))
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
                out["embeddings"].append([vecs[i] for i in order])
    return out


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
