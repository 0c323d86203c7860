"""Stage 2, routing: which of the visible datasources a question without one is about.

One vector search over the tenant's datasource, table and column chunks (one per tenant for
a whole batch: :func:`nl2sql_assets.retrieval.prefetch.prefetch_routes`). Datasources are ranked by
the mean over query texts of their best hit plus their best table (or datasource) hit; the
best few (``RetrieverConfig.route_candidates``) are re-scored with lexical evidence: an
identifier the question names, and the vocabulary it shares with each, weighted by how few
candidates share each word. With the vector store down, every visible datasource is ranked by
words alone and the caller returns the best one's full schema.
"""

from __future__ import annotations

import math

import numpy as np

from nl2sql_assets.errors import EmbeddingDimensionMismatchError, SchemaVersionNotFoundError
from nl2sql_assets.indexing.models import SearchFilter, SearchHit
from nl2sql_assets.retrieval.models import RankedDatasource, RetrieverConfig
from nl2sql_assets.retrieval.query import Query
from nl2sql_assets.retrieval.schema_cache import SchemaCache
from nl2sql_assets.retrieval.vector_search import ROUTE_CHUNKS, VectorSearch
from nl2sql_assets.schema.protocol import SchemaStore

# routing: dense evidence + identifiers the question names + shared vocabulary
ROUTE_WEIGHTS = {"dense_mean": 1.0, "dense_table": 1.0, "mention": 0.2, "overlap": 0.05}


class DatasourceRouter:
    """Ranks the datasources a question may be about.

    Args:
        schema_store: which datasources a tenant sees.
        schemas: the candidates' lexical indexes.
        search: routing's own search when nothing was prefetched.
        config: ``route_k`` and ``route_candidates`` are read from it.
    """

    def __init__(self, schema_store: SchemaStore, schemas: SchemaCache, search: VectorSearch,
                 config: RetrieverConfig) -> None:
        self.schema_store = schema_store
        self.schemas = schemas
        self.search = search
        self.config = config

    def route(self, q: Query, versions: dict[str, str] | None) -> tuple[list[RankedDatasource], str | None]:
        """Rank the visible datasources; the second value names a failure (then routing was lexical)."""
        tenant = q.request.tenant
        visible = self.schema_store.list_datasources(tenant)
        if not visible:
            return [], None
        failure = None
        dense: dict[str, dict[str, float]] = {}
        if versions is None:
            failure = "vector_store_unavailable"
            q.warnings.append("routed by words alone; the full schema of the best datasource is returned")
        else:
            outcome = q.route_hits
            if outcome is None:
                where = SearchFilter(tenant_id=tenant, datasource_ids=[d for d in visible if d in versions],
                                     chunk_types=ROUTE_CHUNKS)
                vectors = list(q.vectors[: q.n_segments])  # type: ignore[index]
                outcome = self.search.search(vectors, self.config.route_k, where, [q])
            hits: list[list[SearchHit]] = []
            if isinstance(outcome, EmbeddingDimensionMismatchError):
                failure = "vector_store_unavailable"
                q.warnings.append(str(outcome))
            elif isinstance(outcome, Exception):
                failure = "vector_store_unavailable"
                q.warnings.append(f"vector store unavailable ({outcome}); routed by words alone, full schema returned")
            else:
                hits = outcome
            dense = _route_dense(hits, set(visible))
        scores = {ds: ROUTE_WEIGHTS["dense_mean"] * f["mean"] + ROUTE_WEIGHTS["dense_table"] * f["table"]
                  for ds, f in dense.items()}
        candidates = sorted(scores, key=lambda d: -scores[d])[: self.config.route_candidates]
        if not candidates:  # no dense evidence: every visible datasource by words alone
            candidates = sorted(visible)
            scores = {ds: 0.0 for ds in candidates}
        lexical = self._route_lexical(q, candidates, versions)
        for ds, bonus in lexical.items():
            scores[ds] = scores.get(ds, 0.0) + bonus
        ranked = sorted(scores, key=lambda d: (-scores[d], d))
        return [RankedDatasource(id=d, score=round(float(scores[d]), 4)) for d in ranked], failure

    def _route_lexical(self, q: Query, candidates: list[str], versions: dict[str, str] | None) -> dict[str, float]:
        """Per candidate: a bonus for a named identifier and for shared vocabulary (idf-weighted)."""
        indexes = {}
        for ds in candidates:
            try:
                indexes[ds] = self.schemas.resolve(ds, None, (versions or {}).get(ds)).index
            except SchemaVersionNotFoundError:
                continue
        if not indexes:
            return {}
        df: dict[str, int] = {}
        for idx in indexes.values():
            for w in q.terms.words:
                if w in idx.lexical.vocabulary:
                    df[w] = df.get(w, 0) + 1
        n = len(indexes)
        idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}
        out = {}
        for ds, idx in indexes.items():
            mention = float(idx.lexical.column_features(q.terms)["mention"].max(initial=0.0) > 0
                            or idx.lexical.table_features(q.terms)["mention"].max(initial=0.0) > 0)
            out[ds] = (ROUTE_WEIGHTS["mention"] * mention
                       + ROUTE_WEIGHTS["overlap"] * idx.lexical.overlap(q.terms, idf))
        return out


def _route_dense(hits: list[list[SearchHit]], visible: set[str]) -> dict[str, dict[str, float]]:
    """Per datasource: the mean over query texts of its best hit, and its best table hit."""
    if not hits:
        return {}
    best: dict[str, list[float]] = {}
    table_best: dict[str, float] = {}
    floors = []
    for r, row in enumerate(hits):
        floors.append(min((h.score for h in row), default=0.0))
        for h in row:
            if h.datasource_id not in visible:
                continue
            per = best.setdefault(h.datasource_id, [math.nan] * len(hits))
            if math.isnan(per[r]) or h.score > per[r]:
                per[r] = h.score
            if h.chunk_type in ("schema.table", "schema.datasource"):
                table_best[h.datasource_id] = max(table_best.get(h.datasource_id, -1.0), h.score)
    out = {}
    for ds, per in best.items():
        filled = [floors[r] if math.isnan(v) else v for r, v in enumerate(per)]
        out[ds] = {"mean": float(np.mean(filled)), "table": table_best.get(ds, min(floors))}
    return out
