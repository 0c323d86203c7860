"""Stage 1, the semantic query: what of a request gets embedded, and the state it carries.

The question, each evidence clause and each hint become the query texts (the *segments*);
proper nouns and quoted strings become extra entity texts. The distinct texts of a whole batch
are embedded in one call (a text shared by several questions once). A :class:`Query` then
carries the request through the later stages, collecting the vector searches' results, timings
and warnings.

A request is bounded before it expands: at most :data:`MAX_QUERY_TEXTS` segments of at most
:data:`MAX_TEXT_CHARS` characters each (plus at most 6 entities), with a warning in the result
when a cap cut something. The caps are far above real questions (BIRD dev: at most 15 segments
and 16 texts, 286 characters); without them a line with 20,000 evidence clauses took minutes
and gigabytes, every clause being embedded and searched. Text that is not valid Unicode (a lone
surrogate, from undecodable bytes or an unpaired ``\\ud800`` escape) is refused, as it cannot be
embedded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.models import ChunkScore, SearchHit
from nl2sql_assets.retrieval.lexical import QueryTerms, build_query_terms, evidence_clauses
from nl2sql_assets.retrieval.models import RetrievalRequest
from nl2sql_assets.retrieval.query_adapter import QueryAdapter
from nl2sql_assets.retrieval.word_similarity import WordVectorCache, question_words

log = logging.getLogger(__name__)

# segments per question (the question, its evidence clauses, its hints): 4x BIRD's largest (15)
MAX_QUERY_TEXTS = 64
# characters per segment: 3.5x BIRD's longest (286), about the 256 tokens the local model reads
# of a text anyway; 64 texts that long peak at about 0.9 GB in the ONNX runtime, 2,000 at 1.5 GB
MAX_TEXT_CHARS = 1000


@dataclass
class Query:
    """One request on its way through the stages.

    ``texts`` are the segments (the first ``n_segments``) then the entities; ``vectors`` holds
    one row per text (the segments' mapped by the query adapter), ``route_vectors`` the segments'
    unmapped rows, which routing searches with. ``words`` are the question's words matched one by
    one against the schema's (:mod:`~nl2sql_assets.retrieval.word_similarity`); ``word_vectors``
    one row per word (None when word meaning is off). ``route_hits`` and ``schema_hits`` are the batched searches'
    answers (an exception when the vector store failed; None when nothing was prefetched);
    ``visible`` the datasources the tenant sees, read once per batch by the routing prefetch.
    """

    request: RetrievalRequest
    terms: QueryTerms
    texts: list[str]
    n_segments: int
    words: list[str] = field(default_factory=list)
    vectors: np.ndarray | None = None
    route_vectors: np.ndarray | None = None
    word_vectors: np.ndarray | None = None
    route_hits: list[list[SearchHit]] | Exception | None = None
    schema_hits: list[list[ChunkScore]] | Exception | None = None
    visible: list[str] | None = None
    timings: dict[str, float] = field(default_factory=lambda: {"embed": 0.0, "vector": 0.0, "total": 0.0})
    warnings: list[str] = field(default_factory=list)


def invalid_text(value: str) -> str | None:
    """Why ``value`` is not valid Unicode text (it cannot be embedded, stored or written), or None.

    >>> invalid_text("Revenue per month") is None
    True
    >>> invalid_text("x\\udcff")
    'not valid text: lone surrogate U+DCFF at character 1 (an undecodable byte or an unpaired \\\\u escape)'
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"not valid text: lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start} "
                "(an undecodable byte or an unpaired \\u escape)")
    return None


def _bounded(question: str, evidence: str | None, hints: list[str]) -> tuple[str, str | None, list[str], list[str]]:
    """Question, evidence and hints within the caps, and warnings saying what was cut.

    Input within the caps comes back as it is (the same texts, so the same answer).
    """
    clauses = evidence_clauses(evidence)
    hint_texts = [h.strip() for h in hints if h and h.strip()]
    texts = [question.strip(), *clauses, *hint_texts]
    if len(texts) <= MAX_QUERY_TEXTS and all(len(t) <= MAX_TEXT_CHARS for t in texts):
        return question, evidence, hints, []
    warnings: list[str] = []
    cut = sum(len(t) > MAX_TEXT_CHARS for t in texts)
    if cut:
        warnings.append(f"{cut} query text(s) longer than {MAX_TEXT_CHARS} characters cut to {MAX_TEXT_CHARS}")
    question = question.strip()[:MAX_TEXT_CHARS]
    seen = {question}
    kept: tuple[list[str], list[str]] = ([], [])
    for bucket, items in zip(kept, (clauses, hint_texts), strict=True):
        for item in items:
            item = item[:MAX_TEXT_CHARS].strip()
            if item not in seen and len(seen) < MAX_QUERY_TEXTS:
                bucket.append(item)
            seen.add(item)
    if len(seen) > MAX_QUERY_TEXTS:
        warnings.append(f"the question, its evidence clauses and hints make {len(seen)} distinct query texts; "
                        f"only the first {MAX_QUERY_TEXTS} are used")
    return question, "\n".join(kept[0]) or None, kept[1], warnings


def build_semantic_query(request: RetrievalRequest) -> Query:
    """Question, evidence clauses and hints as query texts (within the caps); entities as extra texts.

    Raises:
        RetrievalError: an empty question, text that is not valid Unicode, or a schema version
            without a datasource.
    """
    if not isinstance(request.question, str) or not request.question.strip():
        raise RetrievalError("the question is empty")
    hints = request.hints.texts() if request.hints else []
    fields = {"question": request.question, "evidence": request.evidence, "datasource": request.datasource,
              "tenant": request.tenant, "schema version": request.schema_version}
    for name, value in [*fields.items(), *(("hint", h) for h in hints)]:
        problem = invalid_text(value) if isinstance(value, str) else None
        if problem:
            raise RetrievalError(f"the {name} is {problem}")
    if request.schema_version and not request.datasource:
        raise RetrievalError("a schema version needs a datasource (--datasource)")
    question, evidence, hints, warnings = _bounded(request.question, request.evidence, hints)
    if warnings:
        log.warning("a question was bounded: %s", "; ".join(warnings))
    terms = build_query_terms(question, evidence, hints)
    texts = list(terms.segments) + [e for e in terms.entities if e not in terms.segments]
    return Query(request=request, terms=terms, texts=texts, n_segments=len(terms.segments),
                 words=question_words(terms), warnings=warnings)


def embed_queries(queries: list[Query], embeddings: Embeddings, words: WordVectorCache | None = None,
                  adapter: QueryAdapter | None = None) -> None:
    """Embed every distinct text of the batch, and each word ``words`` does not hold, in one call;
    each query gets its rows. Without ``words`` the queries' words are not embedded. ``adapter``
    maps the segments' rows of ``vectors`` (what a datasource's schema is searched with), not the
    entities' or the words'; routing searches with the unmapped ``route_vectors``: the map was fitted
    to tell a database's own chunks apart, and held out it routed worse (Spider top-5 94.8% -> 92.9%)."""
    t0 = perf_counter()
    known, missing = words.lookup([w for q in queries for w in q.words]) if words is not None else ({}, [])
    texts = list(dict.fromkeys([*(t for q in queries for t in q.texts), *missing]))
    vectors = np.asarray(embeddings.embed_queries(texts), dtype=np.float32)
    where = {t: i for i, t in enumerate(texts)}
    if words is not None and missing:
        words.put(missing, vectors[[where[w] for w in missing]])
    per_question = (perf_counter() - t0) * 1000 / max(1, len(queries))
    for q in queries:
        q.vectors = vectors[[where[t] for t in q.texts]]
        q.route_vectors = q.vectors[:q.n_segments].copy()
        if adapter is not None:
            q.vectors[:q.n_segments] = adapter.apply(q.vectors[:q.n_segments])
        if words is None:
            q.word_vectors = None
        elif q.words:
            q.word_vectors = np.vstack([known[w] if w in known else vectors[where[w]] for w in q.words])
        q.timings["embed"] = round(per_question, 2)
