"""Stage 2, routing: which of the visible datasources a question without one is about.

One vector search over the tenant's datasource, table and column chunks (one per tenant for
a whole batch: :func:`nl2sql_assets.retrieval.prefetch.prefetch_routes`) gives every datasource
its dense evidence (:func:`route_dense`: per query text its best hit, its best table or
datasource hit, its share of all hits). The best few by dense evidence
(``RetrieverConfig.route_candidates``), and the few whose vocabulary holds most of the
question's words (``route_lexical_candidates``: a question naming a schema's words reaches it
when its dense evidence does not), and the few whose names mean most of them word by word
(``route_meaning_candidates``, :mod:`~nl2sql_assets.retrieval.route_meaning`: a question in
synonyms), are then scored in full by a small logistic model
(:data:`ROUTE_MODEL` over :data:`ROUTE_FEATURES`): the dense evidence, an identifier the question
names, how much of the question's vocabulary each candidate holds (weighted by how few
candidates share each word), by its best table and by its best column, and how much of it each
candidate means word by word (:mod:`~nl2sql_assets.retrieval.word_similarity`: "vocalists" for
a ``singer`` table), the same share idf-weighted over every visible datasource
(``meaning_share``), and how wide its schema is (``log_columns``, up to :data:`ROUTE_COLUMNS_CAP`
columns, the one weight free to be negative: a schema of many columns matches some of any question
by chance). The weights were fitted
by ``benchmarks/fit_routing.py`` on BIRD dev and Spider train (all databases of a benchmark
indexed together; a softmax over each question's candidates, held out by database-grouped
folds); no feature names a database. A candidate's score is ``sigmoid`` of its logit, the bias
set so that the first candidate's score matches how often it is right. With the vector store down,
every visible datasource is scored by words alone and the caller returns the best one's full
schema.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nl2sql_assets.errors import EmbeddingDimensionMismatchError, SchemaVersionNotFoundError
from nl2sql_assets.indexing.models import SearchFilter, SearchHit
from nl2sql_assets.retrieval.models import RankedDatasource, RetrieverConfig
from nl2sql_assets.retrieval.query import Query
from nl2sql_assets.retrieval.ranking import LinearModel
from nl2sql_assets.retrieval.route_meaning import MeaningIndex, best_by_meaning
from nl2sql_assets.retrieval.schema_cache import SchemaCache
from nl2sql_assets.retrieval.vector_search import ROUTE_CHUNKS, VectorSearch
from nl2sql_assets.schema.protocol import SchemaStore

ROUTE_FEATURES = ("dense_mean", "dense_table", "dense_best", "hit_share", "dense_gap", "mention", "overlap",
                  "overlap_share", "table_name_cov", "table_coverage", "column_name_cov", "tables_named",
                  "columns_named", "word_coverage", "word_table_coverage", "log_columns", "meaning_share")
#: caps of the counts of tables and of columns whose every name word the question holds
NAMED_CAPS = (3.0, 5.0)
#: ``log_columns`` counts at most this many columns: the fit saw mostly schemas of 10 to 100
#: columns, and a linear penalty carried on to a 200-column schema sent questions about it to
#: small schemas of other benchmarks (all 157 databases indexed together, held out: BIRD top-1
#: 88.9% without the feature, 84.4% uncapped, 87.7% capped; Spider 73.0%, 75.1%, 74.8%)
ROUTE_COLUMNS_CAP = 64
# Fitted by benchmarks/fit_routing.py --candidates 12 --lexical-candidates 2 --meaning-candidates 2
# (softmax over each question's candidates; printed as-is).
ROUTE_MODEL = LinearModel(weights=(8.1390, 3.7429, 1.2604, 1.8329, 3.3011, 0.1184, 0.2523, 0.0000, 0.0000, 0.0000, 0.2388, 0.6358, 0.1959, 2.6667, 3.8651, -1.1489, 3.1636,), bias=-8.6880)


@dataclass(frozen=True)
class RouteCandidates:
    """The datasources routing scores in full, their feature rows, and the rest by dense evidence."""

    names: list[str]
    features: np.ndarray  # (len(names), len(ROUTE_FEATURES))
    rest: list[str]
    failure: str | None


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
        self._vocabularies: dict[str, tuple[tuple[tuple[str, str], ...], int, dict[str, list[str]]]] = {}
        self._meanings: dict[str, tuple[tuple[tuple[str, str], ...], MeaningIndex]] = {}

    def route(self, q: Query, versions: dict[str, str] | None) -> tuple[list[RankedDatasource], str | None]:
        """Rank the visible datasources; the second value names a failure (then routing was lexical)."""
        found = self.candidates(q, versions)
        if found is None:
            return [], None
        prob = ROUTE_MODEL.prob(found.features) if found.names else np.zeros(0)
        ranked = sorted(range(len(found.names)), key=lambda i: (-prob[i], found.names[i]))
        out = [RankedDatasource(id=found.names[i], score=round(float(prob[i]), 4)) for i in ranked]
        out += [RankedDatasource(id=d, score=0.0) for d in found.rest]  # not scored in full
        return out, found.failure

    def candidates(self, q: Query, versions: dict[str, str] | None,
                   count: int | None = None) -> RouteCandidates | None:
        """The best ``count`` (default ``route_candidates``) datasources by dense evidence with their
        feature rows (:data:`ROUTE_FEATURES`); None when the tenant sees no datasource."""
        tenant = q.request.tenant
        visible = q.visible if q.visible is not None else self.schema_store.list_datasources(tenant)
        if not visible:
            return None
        failure = None
        dense: dict[str, dict[str, float]] = {}
        hits: list[list[SearchHit]] = []
        if versions is None:
            failure = "vector_store_unavailable"
            q.warnings.append("routed by words alone; the full schema of the best datasource is returned")
        else:
            outcome = q.route_hits
            if outcome is None:
                where = SearchFilter(tenant_id=tenant, datasource_ids=[d for d in visible if d in versions],
                                     chunk_types=ROUTE_CHUNKS)
                vectors = list(q.route_vectors)  # type: ignore[arg-type]
                outcome = self.search.search(vectors, self.config.route_k, where, [q])
            if isinstance(outcome, EmbeddingDimensionMismatchError):
                failure = "vector_store_unavailable"
                q.warnings.append(str(outcome))
            elif isinstance(outcome, Exception):
                failure = "vector_store_unavailable"
                q.warnings.append(f"vector store unavailable ({outcome}); routed by words alone, full schema returned")
            else:
                hits = outcome
            dense = route_dense(hits, set(visible))
        pre = {ds: f["mean"] + f["table"] for ds, f in dense.items()}
        order = sorted(pre, key=lambda d: (-pre[d], d))
        n = self.config.route_candidates if count is None else count
        names, rest = order[:n], order[n:]
        if not names:  # no dense evidence: every visible datasource by words alone
            names, rest = sorted(visible), []
        elif self.config.route_lexical_candidates:
            extra = self._by_vocabulary(q, visible, versions, set(names), self.config.route_lexical_candidates)
            rest = join_candidates(extra, names, rest, dense, pre, hits)
        meaning = self._meaning(q, visible, versions) if versions is not None else {}
        if names and rest and self.config.route_meaning_candidates and meaning:
            extra = best_by_meaning(meaning, set(names), self.config.route_meaning_candidates)
            rest = join_candidates(extra, names, rest, dense, pre, hits)
        best = max(pre.values(), default=0.0)
        lexical = self._lexical(q, names, versions)
        rows = []
        for ds in names:
            f = dense.get(ds)
            d_row = ([f["mean"], f["table"], f["best"], f["share"], pre[ds] - best] if f is not None
                     else [0.0, 0.0, 0.0, 0.0, 0.0])
            rows.append(d_row + lexical.get(ds, [0.0] * (len(ROUTE_FEATURES) - len(d_row) - 1))
                        + [meaning.get(ds, 0.0)])
        features = np.array(rows, dtype=np.float64).reshape(len(names), len(ROUTE_FEATURES))
        return RouteCandidates(names=names, features=features, rest=rest, failure=failure)

    def _by_vocabulary(self, q: Query, visible: list[str], versions: dict[str, str] | None,
                       taken: set[str], count: int) -> list[str]:
        """The ``count`` visible datasources not in ``taken`` whose vocabulary holds most of the
        question's words (idf over every visible, indexed datasource): a question that names a
        schema's words reaches it even when its dense evidence ranks it below the dense candidates."""
        n, postings = self._postings(q.request.tenant, visible, versions or {})
        score: dict[str, float] = {}
        for w in set(q.terms.words):
            holders = postings.get(w)
            if not holders:
                continue
            idf = math.log((n + 1) / (len(holders) + 0.5))
            for ds in holders:
                score[ds] = score.get(ds, 0.0) + idf
        ranked = sorted((-v, ds) for ds, v in score.items() if ds not in taken and v > 0)
        return [ds for _, ds in ranked[:count]]

    def _meaning(self, q: Query, visible: list[str], versions: dict[str, str]) -> dict[str, float]:
        """Per visible datasource, the share of the question's words its names mean
        (:mod:`~nl2sql_assets.retrieval.route_meaning`); empty without word vectors."""
        if q.word_vectors is None or not len(q.word_vectors):
            return {}
        index = self._meaning_index(q.request.tenant, visible, versions, q.word_vectors.shape[1])
        shares = index.scores(q.word_vectors, q.words)
        return dict(zip(index.datasources, shares.tolist(), strict=True))

    def _meaning_index(self, tenant: str, visible: list[str], versions: dict[str, str], dim: int) -> MeaningIndex:
        """Every indexed visible datasource's name words pooled, kept per tenant until a live version
        changes (each schema's name words are embedded once per version, through the embedding cache)."""
        key = tuple((ds, versions[ds]) for ds in visible if ds in versions)
        kept = self._meanings.get(tenant)
        if kept is not None and kept[0] == key:
            return kept[1]
        parts: list[tuple[str, Sequence[str], np.ndarray]] = []
        thesaurus = None
        complete = True
        for ds, live in key:
            try:
                cached = self.schemas.resolve(ds, None, live)
            except SchemaVersionNotFoundError:
                continue
            vectors = self.schemas.name_vectors(cached, dim)
            if vectors is None:
                complete = False
                continue
            words = cached.index.words
            parts.append((ds, words.tokens[:words.n_named], vectors))
            thesaurus = thesaurus or words.thesaurus
        index = MeaningIndex.build(parts, thesaurus)
        if complete:  # a schema whose words could not be embedded is tried again next time
            self._meanings[tenant] = (key, index)
        return index

    def _postings(self, tenant: str, visible: list[str], versions: dict[str, str]) -> tuple[int, dict[str, list[str]]]:
        """Which indexed datasources hold each word, kept per tenant until a live version changes
        (resolving every datasource per question cost 1.8 ms over 146)."""
        key = tuple((ds, versions[ds]) for ds in visible if ds in versions)
        kept = self._vocabularies.get(tenant)
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        postings: dict[str, list[str]] = {}
        n = 0
        for ds, live in key:  # not indexed: the dense search does not see it either
            try:
                vocabulary = self.schemas.resolve(ds, None, live).index.lexical.vocabulary
            except SchemaVersionNotFoundError:
                continue
            n += 1
            for w in vocabulary:
                postings.setdefault(w, []).append(ds)
        self._vocabularies[tenant] = (key, n, postings)
        return n, postings

    def _lexical(self, q: Query, candidates: list[str], versions: dict[str, str] | None) -> dict[str, list[float]]:
        """Per candidate: a named identifier, shared vocabulary (idf over the candidates: summed and as a
        share of the question's), the best table's and column's name coverage and table coverage, and
        how many tables and columns the question names word for word (capped), and the share of the
        question's words the schema and its best table mean (word by word), and the schema's size:
        a wide schema offers more columns for a chance match, so its evidence counts for less."""
        indexes = {}
        meanings: dict[str, list[float]] = {}
        for ds in candidates:
            try:
                cached = self.schemas.resolve(ds, None, (versions or {}).get(ds))
            except SchemaVersionNotFoundError:
                continue
            indexes[ds] = cached.index
            words = self.schemas.word_scores(cached, q.word_vectors, q.words)
            meanings[ds] = ([words.schema_coverage, float(words.table_coverage.max(initial=0.0))]
                            if words is not None else [0.0, 0.0])
        if not indexes:
            return {}
        df: dict[str, int] = {}
        for idx in indexes.values():
            for w in q.terms.words:
                if w in idx.lexical.vocabulary:
                    df[w] = df.get(w, 0) + 1
        n = len(indexes)
        idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in df.items()}
        total = sum(idf.values()) or 1.0
        out = {}
        for ds, idx in indexes.items():
            cols = idx.lexical.column_features(q.terms)
            tabs = idx.lexical.table_features(q.terms)
            mention = float(cols["mention"].max(initial=0.0) > 0 or tabs["mention"].max(initial=0.0) > 0)
            overlap = idx.lexical.overlap(q.terms, idf)
            out[ds] = [mention, overlap, overlap / total, float(tabs["name_cov"].max(initial=0.0)),
                       float(tabs["coverage"].max(initial=0.0)), float(cols["name_cov"].max(initial=0.0)),
                       min(NAMED_CAPS[0], float((tabs["name_cov"] >= 0.999).sum())),
                       min(NAMED_CAPS[1], float((cols["name_cov"] >= 0.999).sum())), *meanings[ds],
                       math.log1p(min(len(idx.lexical.columns), ROUTE_COLUMNS_CAP))]
        return out


def join_candidates(extra: list[str], names: list[str], rest: list[str], dense: dict[str, dict[str, float]],
                    pre: dict[str, float], hits: list[list[SearchHit]]) -> list[str]:
    """Add ``extra`` to ``names`` (in place), those without a hit getting :func:`absent_dense`
    evidence in ``dense`` and ``pre``; returns ``rest`` without them."""
    names += extra
    absent = absent_dense(hits)
    for ds in extra:
        if ds not in dense:
            dense[ds] = absent
            pre[ds] = absent["mean"] + absent["table"]
    return [d for d in rest if d not in extra]


def absent_dense(hits: list[list[SearchHit]]) -> dict[str, float]:
    """The dense evidence of a datasource with no hit: each query text's floor, as
    :func:`route_dense` fills a query text a datasource has no hit for."""
    floors = query_floors(hits) or [0.0]
    return {"mean": float(np.mean(floors)), "table": min(floors), "best": min(floors), "share": 0.0}


def query_floors(hits: list[list[SearchHit]]) -> list[float]:
    """Per query text, its weakest hit's score: what a datasource without a hit there counts as."""
    return [min((h.score for h in row), default=0.0) for row in hits]


def route_dense(hits: list[list[SearchHit]], visible: set[str]) -> dict[str, dict[str, float]]:
    """Per datasource: the mean over query texts of its best hit, its best table hit, its best hit
    and its share of all hits."""
    if not hits:
        return {}
    best: dict[str, list[float]] = {}
    table_best: dict[str, float] = {}
    counts: dict[str, int] = {}
    floors = query_floors(hits)
    total = 0
    for r, row in enumerate(hits):
        for h in row:
            if h.datasource_id not in visible:
                continue
            total += 1
            counts[h.datasource_id] = counts.get(h.datasource_id, 0) + 1
            per = best.setdefault(h.datasource_id, [math.nan] * len(hits))
            if math.isnan(per[r]) or h.score > per[r]:
                per[r] = h.score
            if h.chunk_type in ("schema.table", "schema.datasource"):
                table_best[h.datasource_id] = max(table_best.get(h.datasource_id, -1.0), h.score)
    out = {}
    for ds, per in best.items():
        filled = [floors[r] if math.isnan(v) else v for r, v in enumerate(per)]
        out[ds] = {"mean": float(np.mean(filled)), "table": table_best.get(ds, min(floors)),
                   "best": float(np.nanmax(per)), "share": counts[ds] / max(1, total)}
    return out
