"""The full-schema answer: what retrieval returns when it cannot (or need not) select.

Failures never produce an empty answer. The datasource's whole schema, from the SchemaStore,
is returned with a ``fallback`` reason (docs/retrieval-result.md):

- ``no_candidates``: no search hit names a table or column the snapshot knows;
- ``vector_store_unavailable``: the store is down or does not answer in time, its breaker is
  open, its files are damaged (the warning says how to rebuild it), or it was indexed with
  another embedding model (then the warning says to re-index);
- ``small_schema``: the datasource is small enough to send whole
  (``RetrieverConfig.small_schema_columns``).

Their ``confidence`` is ``confidence.FALLBACK_CONFIDENCE``: 0.0 for ``no_candidates`` (nothing
matched; the low-confidence warning follows), else 0.5 (every table is sent, but whether the
question belongs to this datasource was not measured).
"""

from __future__ import annotations

import logging

from nl2sql_assets.retrieval.confidence import FALLBACK_CONFIDENCE, with_warning
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
    confidence = FALLBACK_CONFIDENCE.get(fallback, 0.5)
    log.info("datasource %s: full schema returned (%s)", datasource, fallback)
    return RetrievalResult(
        question=q.request.question, datasources=ranked, datasource=datasource,
        schema_version=snapshot.schema_version, tables=tables,
        relationships=cached.index.graph.relationships(list(range(len(snapshot.tables)))),
        fallback=fallback, confidence=confidence, warnings=with_warning(q.warnings, confidence))
