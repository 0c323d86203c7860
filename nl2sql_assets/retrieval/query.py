"""Stage 1, the semantic query: what of a request gets embedded, and the state it carries.

The question, each evidence clause and each hint become the query texts (the *segments*);
proper nouns and quoted strings become extra entity texts. The distinct texts of a whole batch
are embedded in one call (a text shared by several questions once). A :class:`Query` then
carries the request through the later stages, collecting the vector searches' results, timings
and warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.models import ChunkScore, SearchHit
from nl2sql_assets.retrieval.lexical import QueryTerms, build_query_terms
from nl2sql_assets.retrieval.models import RetrievalRequest


@dataclass
class Query:
    """One request on its way through the stages.

    ``texts`` are the segments (the first ``n_segments``) then the entities; ``vectors`` holds
    one row per text. ``route_hits`` and ``schema_hits`` are the batched searches' answers
    (an exception when the vector store failed; None when nothing was prefetched).
    """

    request: RetrievalRequest
    terms: QueryTerms
    texts: list[str]
    n_segments: int
    vectors: np.ndarray | None = None
    route_hits: list[list[SearchHit]] | Exception | None = None
    schema_hits: list[list[ChunkScore]] | Exception | None = None
    timings: dict[str, float] = field(default_factory=lambda: {"embed": 0.0, "vector": 0.0, "total": 0.0})
    warnings: list[str] = field(default_factory=list)


def build_semantic_query(request: RetrievalRequest) -> Query:
    """Question, evidence clauses and hints as query texts; entities as extra texts.

    Raises:
        RetrievalError: an empty question, or a schema version without a datasource.
    """
    if not isinstance(request.question, str) or not request.question.strip():
        raise RetrievalError("the question is empty")
    if request.schema_version and not request.datasource:
        raise RetrievalError("a schema version needs a datasource (--datasource)")
    hints = request.hints.texts() if request.hints else []
    terms = build_query_terms(request.question, request.evidence, hints)
    texts = list(terms.segments) + [e for e in terms.entities if e not in terms.segments]
    return Query(request=request, terms=terms, texts=texts, n_segments=len(terms.segments))


def embed_queries(queries: list[Query], embeddings: Embeddings) -> None:
    """Embed every distinct text of the batch in one call; each query gets its rows."""
    texts = list(dict.fromkeys(t for q in queries for t in q.texts))
    t0 = perf_counter()
    vectors = np.asarray(embeddings.embed_queries(texts), dtype=np.float32)
    per_question = (perf_counter() - t0) * 1000 / max(1, len(queries))
    where = {t: i for i, t in enumerate(texts)}
    for q in queries:
        q.vectors = vectors[[where[t] for t in q.texts]]
        q.timings["embed"] = round(per_question, 2)
