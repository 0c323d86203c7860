"""The full-schema answer: what retrieval returns when it cannot (or need not) select.

Failures never produce an empty answer. The datasource's whole schema, from the SchemaStore,
is returned with a ``fallback`` reason (docs/retrieval-result.md):

- ``no_candidates``: no search hit names a table or column the snapshot knows;
- ``vector_store_unavailable``: the store is down, its breaker open, or it was indexed with
  another embedding model (then the warning says to re-index);
- ``small_schema``: the datasource is small enough to send whole
  (``RetrieverConfig.small_schema_columns``).
"""

from __future__ import annotations

import logging

from nl2sql_assets.retrieval.models import RankedDatasource, RetrievalResult, RetrievedTable
from nl2sql_assets.retrieval.query import Query
from nl2sql_assets.retrieval.schema_cache import CachedSchema, SchemaCache

log = logging.getLogger(__name__)


def full_schema(schemas: SchemaCache, q: Query, datasource: str, cached: CachedSchema | None,
                versions: dict[str, str] | None, ranked: list[RankedDatasource], fallback: str,
                warning: str | None = None) -> RetrievalResult:
    """Every table and column of ``datasource`` (``cached``, else its live or latest version)."""
    if cached is None:
        cached = schemas.resolve(datasource, None, (versions or {}).get(datasource))
    snapshot = cached.snapshot
    if warning:
        q.warnings.append(warning)
    default = snapshot.datasource.default_schema
    tables = [RetrievedTable(name=t.name, schema=t.schema_name or default, score=0.0,
                             columns=[c.name for c in t.columns])
              for t in snapshot.tables]
    log.info("datasource %s: full schema returned (%s)", datasource, fallback)
    return RetrievalResult(
        question=q.request.question, datasources=ranked, datasource=datasource,
        schema_version=snapshot.schema_version, tables=tables,
        relationships=cached.index.graph.relationships(list(range(len(snapshot.tables)))),
        fallback=fallback, warnings=list(q.warnings))
