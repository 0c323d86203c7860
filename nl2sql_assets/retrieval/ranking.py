"""Hybrid scoring: dense similarities and lexical evidence -> probabilities -> an adaptive selection.

For one datasource and one question the retriever has, per query text (question, each evidence
clause, each hint) the dense similarity of every table and column chunk, and per entity (proper
noun, quoted string) the similarity of every column chunk. :func:`score_schema` combines them
with the lexical features of :mod:`nl2sql_assets.retrieval.lexical` in three small models:

1. a column model: how likely is this column used by the question's SQL (all columns);
2. a table model: how likely is this table needed (its own evidence plus its columns');
3. a second table model that also sees the first one's estimates of the table's neighbours in
   the join graph (a hub table next to two likely tables is likely a bridge; two tables
   answering the same words compete) and what of the question the table explains that the
   likeliest table cannot (words: "orders by loyalty tier" needs a second table; words it means
   that the likeliest table does not: "the hometown of each athlete" needs the table of people;
   a proper noun when the likeliest table has no name column), and the schema's size (a middling
   estimate means more among two tables than among twenty): the mean of a logistic model's
   and a small network's logits (held out, at the same number of tables sent, 0.5–1.3 points more
   Spider questions and up to 2.3 more BIRD questions without evidence get every gold table;
   BIRD with evidence within −0.2 to +0.6);

then a within-table column model for what to send of each selected table: a small network
(:mod:`~nl2sql_assets.retrieval.mlp`, 32 hidden units over the same features), because which
column of a table is needed depends on combinations of its evidence that a sum of weights cannot
express (held out it finds up to 3 points more of the gold columns at the same share of columns
sent than the logistic model it replaced). Selection is a budget
per question (:func:`select`, ``RetrieverConfig.recall_target``): the likeliest tables are kept
until the estimated probability that every needed table is among them reaches the target, so a
clear question gets one table and one that needs six gets six or more; columns the same way.

The weights were fitted (logistic regression; the networks by log-loss) on BIRD dev and Spider
train together (both wordings; BIRD with and without its evidence), on features that describe no
particular database (similarities, word coverage, mentions, literal types such as a year or a
proper noun against date or name columns, each entity's nearest text column, a person-like or
place-like entity against columns of people's names or of places, word meaning: how much of a name
the question's words mean one by one (:mod:`~nl2sql_assets.retrieval.word_similarity`), capped
graph degree),
each stage on out-of-fold outputs of the stages before it, and on similarities cut to each query
text's top ``dense_k`` chunks as the vector store returns them. ``benchmarks/fit_ranking_weights.py``
does the fit; ``benchmarks/heldout.py`` refits per database-grouped fold and reports every figure on
databases the fit never saw, and the default recall targets come from its recall/size curve. The
weight of ``value_hit`` (a question literal equal to a sampled value) is set by hand: the
benchmark databases are empty, so no data could fit it. A column's learned word association
(:mod:`~nl2sql_assets.retrieval.word_association`: "female" needs ``sex``) is added to the
within-table logit with a weight read off the held-out column curves; the network never sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nl2sql_assets.retrieval.entity_kinds import EntityKinds
from nl2sql_assets.retrieval.join_paths import JoinGraph
from nl2sql_assets.retrieval.lexical import LexicalIndex, QueryTerms
from nl2sql_assets.retrieval.mlp import MeanLogitModel, MLPModel, sigmoid
from nl2sql_assets.retrieval.thesaurus import default_thesaurus
from nl2sql_assets.retrieval.word_association import WordAssociation
from nl2sql_assets.retrieval.word_similarity import SchemaWords, WordScores

COLUMN_FEATURES = (
    "dense_max", "dense_question", "dense_rank", "name_cov", "desc_cov", "mention", "is_pk", "is_join_key",
    "qualified", "mention_unique", "name_cov_unique", "entity_sim", "entity_rank", "year_match",
    "date_match", "time_match", "value_hit", "entity_name", "entity_home", "entity_person",
    "entity_place", "word_name",
)
TABLE_FEATURES = (
    "dense_max", "dense_question", "name_cov", "mention", "coverage", "col_max", "col_second", "mentions",
    "col_rank", "col_gap", "qualified", "mention_unique", "name_cov_unique", "entity_sim", "entity_rank",
    "year_match", "date_match", "time_match", "value_hit", "degree", "out_degree", "log_columns", "entity_home",
    "entity_person", "entity_place", "word_name", "word_cov", "word_col_max",
)
CONTEXT_FEATURES = ("logit", "gap", "rank", "neighbour_max", "neighbour_sum", "between_top2", "residual_cov",
                    "residual_name", "word_residual", "log_tables", "logit_log_tables")
WITHIN_FEATURES = ("col_logit", "col_gap_in_table", "col_rank_in_table", "table_prob", "log_columns",
                   *COLUMN_FEATURES, "rank_dense_max", "rank_dense_rank", "rank_name_cov", "rank_desc_cov",
                   "rank_mention", "rank_entity_sim", "rank_word_name", "novelty")


@dataclass(frozen=True)
class LinearModel:
    """``sigmoid(x . weights + bias)``."""

    weights: tuple[float, ...]
    bias: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        return x @ np.asarray(self.weights, dtype=np.float64) + self.bias

    def prob(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.logit(x))


DEGREE_CAP = 4.0
#: a chunk the vector store did not return for a query text holds the row's floor: this much below
#: the text's weakest returned hit (the retriever builds it so, and the fit reproduces it)
FLOOR_MARGIN = 0.05
VALUE_HIT_WEIGHT = 3.0  # by hand: see the module docstring
#: how much a column's learned word association (:mod:`~nl2sql_assets.retrieval.word_association`)
#: adds to the within-table logit, read off the held-out column curves (benchmarks/heldout.py)
ASSOCIATION_WEIGHT = 1.0
#: a column's price is ``columns ** -COLUMN_COST_EXPONENT`` (:func:`share_priced_threshold`): 1 is its
#: share of the schema, 0 one column anywhere; 0.75 was read off the held-out column curves
COLUMN_COST_EXPONENT = 0.75
#: the context stage's schema size (``log_tables``) counts at most this many tables; the fit saw 2 to 26
CONTEXT_TABLES_CAP = 32

# Fitted weights (logistic regression, L2, C=1, out-of-fold stacking), as printed by
# benchmarks/fit_ranking_weights.py (or heldout.py --weights) on BIRD dev + Spider train.
COLUMN_MODEL = LinearModel(weights=(0.0000, 4.4110, 2.9423, 0.0000, 0.5741, 0.0000, 0.7424, 1.1567, 4.2833, 1.2182, 1.6569, 0.0000, 1.3891, 0.6688, 1.0862, 0.0000, 0.0000, 0.6936, 0.0000, 8.3784, 2.1720, 1.0761,), bias=-5.2512)
TABLE_MODEL = LinearModel(weights=(0.0000, 0.0000, 0.0000, 0.0674, 0.3960, 0.0000, 0.5492, 0.0000, 2.6552, 0.2137, 1.1342, 0.5834, 0.4316, 0.0786, 0.1941, 0.0227, 0.0000, 0.0000, 0.0000, 0.1035, -0.2006, 0.1691, 0.2476, 4.2421, 3.3663, 2.4864, 0.0000, 0.0000,), bias=-2.1613)
CONTEXT_LINEAR = LinearModel(weights=(0.0000, 0.9989, 3.8540, 0.5846, 0.1789, 1.1342, 0.4389, 0.5665, 6.9208, -0.3747, -0.1308, 0.0000, 0.0134, 0.0000, 0.0571, 0.0147, 0.0000, 0.4802, 0.0000, 1.5716, 0.1977, 3.4068, 0.4851, 0.3041, 0.3082, 0.2455, 0.1406, 0.1333, 0.0000, 0.0000, 0.0988, -0.2434, 0.0008, 0.1765, 6.6257, 3.2738, 2.0763, 0.0000, 0.0000,), bias=-3.0963)
#: the context stage: the mean of CONTEXT_LINEAR's logit and a network's (written next to this module)
CONTEXT_MODEL = MeanLogitModel((CONTEXT_LINEAR, MLPModel.load(Path(__file__).with_name("context_model.json"),
                                                              CONTEXT_FEATURES + TABLE_FEATURES)))
#: the within-table column model: a small network (:mod:`~nl2sql_assets.retrieval.mlp`), written by
#: benchmarks/fit_ranking_weights.py next to this module
WITHIN_MODEL = MLPModel.load(Path(__file__).with_name("within_model.json"), WITHIN_FEATURES)
# Confidence calibration over confidence.CONFIDENCE_FEATURES, as printed by benchmarks/fit_confidence.py.
CONFIDENCE_MODEL = LinearModel(weights=(0.6750, 4.7317, 11.4741, -1.3989, 3.5713,), bias=-5.1586)


@dataclass(frozen=True)
class DenseScores:
    """Dense similarities for one datasource: rows are query texts, columns chunks.

    ``tables`` is (segments, n_tables), ``columns`` (segments, n_columns) and ``entities``
    (entities, n_columns); a chunk the vector store did not return holds the row's floor.
    ``kinds`` says, per entity, how much it looks like a person's name and like a place
    (:class:`~nl2sql_assets.retrieval.entity_kinds.EntityKindScorer`).
    """

    tables: np.ndarray
    columns: np.ndarray
    entities: np.ndarray
    kinds: EntityKinds = field(default_factory=EntityKinds.none)
    words: WordScores | None = None


@dataclass(frozen=True)
class SchemaScores:
    """Everything :func:`select` needs, per table and per column of one datasource."""

    table_prob: np.ndarray
    column_logit: np.ndarray
    column_prob: np.ndarray
    within_prob: np.ndarray
    column_features: np.ndarray
    table_features: np.ndarray


@dataclass(frozen=True)
class SchemaIndex:
    """The per-(datasource, version) structures scoring needs; built once and cached."""

    lexical: LexicalIndex
    graph: JoinGraph
    is_pk: np.ndarray
    is_join_key: np.ndarray
    degree: np.ndarray
    out_degree: np.ndarray
    log_columns: np.ndarray
    columns_per_table: np.ndarray
    words: SchemaWords


def build_schema_index(snapshot, *, infer_joins: bool = True) -> SchemaIndex:  # type: ignore[no-untyped-def]
    """Lexical index, join graph and per-column key flags of a snapshot."""
    lexical = LexicalIndex(snapshot)
    graph = JoinGraph(snapshot, infer=infer_joins)
    join_keys = {(e.child, c.lower()) for e in graph.edges for c in e.child_columns}
    join_keys |= {(e.parent, c.lower()) for e in graph.edges for c in e.parent_columns}
    is_pk, is_join = [], []
    for ti, table in enumerate(snapshot.tables):
        pk = {c.lower() for c in table.primary_key}
        for col in table.columns:
            is_pk.append(float(col.name.lower() in pk))
            is_join.append(float((ti, col.name.lower()) in join_keys))
    n_tables = len(snapshot.tables)
    return SchemaIndex(
        lexical=lexical, graph=graph,
        is_pk=np.array(is_pk, dtype=np.float32), is_join_key=np.array(is_join, dtype=np.float32),
        # capped: a hub's exact degree says little more, and an extreme one (a table with 24 keys)
        # would put a linear model far outside what it was fitted on
        degree=np.minimum(np.array([len(a) for a in graph.adjacent], dtype=np.float32), DEGREE_CAP),
        out_degree=np.minimum(np.array([sum(1 for e in graph.edges if e.child == t) for t in range(n_tables)],
                                       dtype=np.float32), DEGREE_CAP),
        log_columns=np.log1p(np.array([len(t.columns) for t in snapshot.tables], dtype=np.float32)),
        columns_per_table=np.array([len(t.columns) for t in snapshot.tables], dtype=np.int64),
        words=SchemaWords.build(lexical, default_thesaurus()),
    )


def _inverse_rank(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """1 / (1 + rank) of each value among its row (rank 0 = best)."""
    order = np.argsort(-values, axis=axis, kind="stable")
    ranks = np.argsort(order, axis=axis, kind="stable")
    return 1.0 / (1.0 + ranks)


def _table_max(values: np.ndarray, table_of: np.ndarray, n_tables: int, floor: float = 0.0) -> np.ndarray:
    out = np.full(n_tables, floor, dtype=np.float64)
    if values.size:
        np.maximum.at(out, table_of, values)
    return out


def column_features(index: SchemaIndex, terms: QueryTerms, dense: DenseScores) -> np.ndarray:
    """The column feature matrix (n_columns, len(COLUMN_FEATURES))."""
    lex = index.lexical
    n = len(lex.columns)
    feats = lex.column_features(terms)
    cols = dense.columns
    if cols.shape[0]:
        dense_max = cols.max(axis=0)
        dense_q = cols[0]
        dense_rank = _inverse_rank(cols, axis=1).max(axis=0)
    else:
        dense_max = dense_q = dense_rank = np.zeros(n)
    home = np.zeros(n)
    if dense.entities.shape[0]:
        ent = dense.entities.max(axis=0) * lex.flags[:, 3]
        ent_rank = _inverse_rank(ent[None, :], axis=1)[0]
        # each entity's home: the text column most like it ("Lewis Hamilton" -> drivers.surname),
        # however low that similarity is; none when no text column came back from the vector
        # store (all of them hold the row's floor, its smallest value)
        text_columns = np.flatnonzero(lex.flags[:, 3])
        if text_columns.size:
            sims = dense.entities[:, text_columns]
            best = np.argmax(sims, axis=1)
            found = sims[np.arange(len(best)), best] > dense.entities.min(axis=1)
            home[text_columns[best[found]]] = 1.0
    else:
        ent = ent_rank = np.zeros(n)
    uniq = lex.uniqueness
    word_name = dense.words.column_name if dense.words is not None else np.zeros(n)
    return np.column_stack([
        dense_max, dense_q, dense_rank, feats["name_cov"], feats["desc_cov"], feats["mention"],
        index.is_pk, index.is_join_key, feats["qualified"], feats["mention"] * uniq, feats["name_cov"] * uniq,
        ent, ent_rank, float(terms.has_year) * lex.flags[:, 1], float(terms.has_date) * lex.flags[:, 0],
        float(terms.has_time) * lex.flags[:, 2], feats["value_hit"], float(bool(terms.entities)) * lex.flags[:, 4],
        home, float(dense.kinds.person.max(initial=0.0)) * lex.flags[:, 5],
        float(dense.kinds.place.max(initial=0.0)) * lex.flags[:, 6], word_name,
    ]).astype(np.float64)


def column_logits(x: np.ndarray) -> np.ndarray:
    """The column model's logits, with the hand-set value-hit weight added."""
    return COLUMN_MODEL.logit(x) + VALUE_HIT_WEIGHT * x[:, COLUMN_FEATURES.index("value_hit")]


def table_features(index: SchemaIndex, terms: QueryTerms, dense: DenseScores, col_x: np.ndarray,
                   col_logit: np.ndarray) -> np.ndarray:
    """The table feature matrix (n_tables, len(TABLE_FEATURES))."""
    lex = index.lexical
    n_tables = len(lex.tables)
    table_of = lex.column_table_arr
    tfeats = lex.table_features(terms)
    tab = dense.tables
    dense_max = tab.max(axis=0) if tab.shape[0] else np.zeros(n_tables)
    dense_q = tab[0] if tab.shape[0] else np.zeros(n_tables)
    col_max = _table_max(col_logit, table_of, n_tables, floor=-30.0)
    col_second = np.full(n_tables, -30.0)
    for t in range(n_tables):
        vals = np.sort(col_logit[table_of == t])[::-1]
        col_second[t] = vals[1] if len(vals) > 1 else (vals[0] if len(vals) else -30.0)
    words = dense.words if dense.words is not None else WordScores.none(len(table_of), n_tables)
    mentions = np.zeros(n_tables)
    np.add.at(mentions, table_of, col_x[:, COLUMN_FEATURES.index("mention")])
    col_rank = _inverse_rank(col_max[None, :], axis=1)[0]
    gap = col_max - col_max.max() if n_tables else col_max
    extra = [_table_max(col_x[:, COLUMN_FEATURES.index(name)], table_of, n_tables)
             for name in ("qualified", "mention_unique", "name_cov_unique", "entity_sim", "entity_rank",
                          "year_match", "date_match", "time_match", "value_hit")]
    return np.column_stack([
        dense_max, dense_q, tfeats["name_cov"], tfeats["mention"], tfeats["coverage"], col_max, col_second,
        np.minimum(mentions, 3.0), col_rank, gap, *extra, index.degree, index.out_degree, index.log_columns,
        _table_max(col_x[:, COLUMN_FEATURES.index("entity_home")], table_of, n_tables),
        _table_max(col_x[:, COLUMN_FEATURES.index("entity_person")], table_of, n_tables),
        _table_max(col_x[:, COLUMN_FEATURES.index("entity_place")], table_of, n_tables),
        words.table_name, words.table_coverage,
        _table_max(col_x[:, COLUMN_FEATURES.index("word_name")], table_of, n_tables),
    ]).astype(np.float64)


def context_features(index: SchemaIndex, first: np.ndarray, table_x: np.ndarray,
                     terms: QueryTerms | None = None, words: WordScores | None = None) -> np.ndarray:
    """Second-stage table features: the first estimate, its neighbours' in the join graph, how much
    of the question this table explains that the likeliest table does not, and the schema's size."""
    n = len(first)
    logit = np.log(np.clip(first, 1e-6, 1 - 1e-6) / np.clip(1 - first, 1e-6, 1))
    adjacent = index.graph.adjacent
    nb_max = np.array([max((first[j] for j in adjacent[t]), default=0.0) for t in range(n)])
    nb_sum = np.array([sum(first[j] for j in adjacent[t]) for t in range(n)])
    order = np.argsort(-first, kind="stable")
    top1 = order[0] if n else 0
    top2 = order[1] if n > 1 else top1
    between = np.array([float(t in adjacent[top1] and t in adjacent[top2]) for t in range(n)])
    rank = _inverse_rank(first[None, :], axis=1)[0] if n else first
    residual = index.lexical.residual_coverage(terms, int(top1)) if terms is not None and n else np.zeros(n)
    # a proper noun the likeliest table has no name column for lives in a table that has one
    has_name = _table_max(index.lexical.flags[:, 4], index.lexical.column_table_arr, n)
    residual_name = (float(bool(terms.entities)) * has_name * (1.0 - has_name[top1])
                     if terms is not None and n else np.zeros(n))
    word_residual = words.residual(int(top1)) if words is not None and n else np.zeros(n)
    size = np.full(n, math.log(min(max(n, 1), CONTEXT_TABLES_CAP)))
    return np.column_stack([logit, first - (first.max() if n else 0.0), rank, nb_max, nb_sum, between, residual,
                            residual_name, word_residual, size, logit * size, table_x])


def _rank_in_table(values: np.ndarray, table_of: np.ndarray, n_tables: int) -> np.ndarray:
    """:func:`_inverse_rank` of each value among its own table's (ties: the earlier column first).

    >>> _rank_in_table(np.array([0.1, 0.9, 0.5, 0.7]), np.array([0, 0, 1, 1]), 2).tolist()
    [0.5, 1.0, 0.5, 1.0]
    """
    n = len(values)
    if not n:
        return np.zeros(0)
    order = np.lexsort((np.arange(n), -values, table_of))  # by table, then value descending, then position
    in_order = table_of[order]
    ranks = np.empty(n)
    ranks[order] = np.arange(n) - np.searchsorted(in_order, in_order, side="left")
    return 1.0 / (1.0 + ranks)


_WITHIN_RANKED = ("dense_max", "dense_rank", "name_cov", "desc_cov", "mention", "entity_sim", "word_name")


def within_features(index: SchemaIndex, col_x: np.ndarray, col_logit: np.ndarray,
                    table_prob: np.ndarray, terms: QueryTerms | None = None) -> np.ndarray:
    """Features for choosing columns inside a table, given the table's probability.

    The column features, the column model's logit and its gap to the table's best column,
    and ranks inside the table (a column is compared with its own table's columns).
    """
    table_of = index.lexical.column_table_arr
    n_tables = len(table_prob)
    best = _table_max(col_logit, table_of, n_tables, floor=-30.0)
    ranks = [_rank_in_table(col_x[:, COLUMN_FEATURES.index(name)], table_of, n_tables) for name in _WITHIN_RANKED]
    novelty = (index.lexical.novelty(terms, np.argsort(-col_logit, kind="stable")) if terms is not None
               else np.zeros(len(col_logit)))
    return np.column_stack([col_logit, col_logit - best[table_of], _rank_in_table(col_logit, table_of, n_tables),
                            table_prob[table_of], index.log_columns[table_of], col_x, *ranks,
                            novelty]).astype(np.float64)


def within_prob(model: MLPModel, x: np.ndarray, index: SchemaIndex, terms: QueryTerms,
                association: WordAssociation | None) -> np.ndarray:
    """The within-table estimate: the network's logit plus, with ``association``, the column's
    learned word association times :data:`ASSOCIATION_WEIGHT` (the network never saw it)."""
    logit = model.logit(x)
    if association is not None:
        lex = index.lexical
        logit = logit + ASSOCIATION_WEIGHT * association.column_scores(terms.words, lex.name_postings,
                                                                       len(lex.columns))
    return sigmoid(logit)


def score_schema(index: SchemaIndex, terms: QueryTerms, dense: DenseScores,
                 association: WordAssociation | None = None) -> SchemaScores:
    """Probabilities for every table and column of one datasource."""
    col_x = column_features(index, terms, dense)
    col_logit = column_logits(col_x)
    table_x = table_features(index, terms, dense, col_x, col_logit)
    first = TABLE_MODEL.prob(table_x)
    table_prob = CONTEXT_MODEL.prob(context_features(index, first, table_x, terms, dense.words))
    within = within_prob(WITHIN_MODEL, within_features(index, col_x, col_logit, table_prob, terms), index, terms,
                         association)
    return SchemaScores(table_prob=table_prob, column_logit=col_logit, column_prob=1 / (1 + np.exp(-col_logit)),
                        within_prob=within, column_features=col_x, table_features=table_x)


@dataclass(frozen=True)
class Selection:
    """Selected tables (indexes, most relevant first) and per table the column indexes to send."""

    tables: list[int]
    columns: dict[int, list[int]]


def sharpened(prob: np.ndarray, sharpness: float) -> np.ndarray:
    """``sigmoid(sharpness * logit p)``: the estimates as the table budget counts them."""
    if sharpness == 1.0:
        return prob
    p = np.clip(np.asarray(prob, dtype=np.float64), 1e-12, 1.0 - 1e-12)
    return sigmoid(sharpness * np.log(p / (1.0 - p)))


def budget_count(probs_desc: np.ndarray, target: float, minimum: int = 1) -> int:
    """How many of the candidates (sorted by probability, highest first) to keep so that the
    estimated probability that no left-out one is needed, ``prod(1 - p)`` over the rest (taken as
    independent), reaches ``target``.

    >>> budget_count(np.array([0.9, 0.5, 0.01]), 0.95)
    2
    >>> budget_count(np.array([0.9, 0.5, 0.2]), 0.95)
    3
    """
    p = np.clip(np.asarray(probs_desc, dtype=np.float64), 0.0, 1.0 - 1e-12)
    rest = np.concatenate([np.cumsum(np.log1p(-p)[::-1])[::-1], [0.0]])  # rest[n]: log P(none of p[n:])
    enough = np.flatnonzero(rest >= math.log(target))
    return max(minimum, int(enough[0]) if enough.size else len(p))


def share_priced_threshold(column_share_cost: float, columns: int) -> float:
    """The estimated need from which a column is worth sending: ``1 - exp(-cost / columns ** e)``
    (``e`` :data:`COLUMN_COST_EXPONENT`). Sending it raises the log-probability that every needed
    column is sent by ``-log(1 - need)``; it pays when that outweighs its price.

    >>> round(share_priced_threshold(1.0, 32), 3), round(share_priced_threshold(1.0, 64), 3)
    (0.072, 0.043)
    """
    return 1.0 - math.exp(-column_share_cost / max(1, columns) ** COLUMN_COST_EXPONENT)


def select(index: SchemaIndex, scores: SchemaScores, *, table_threshold: float, max_tables: int,
           column_threshold: float, min_columns: int, primary_keys: bool = False,
           recall_target: float | None = None, column_recall_target: float | None = None,
           column_share_cost: float | None = None, min_columns_sent: int = 0, budget_sharpness: float = 1.0,
           sharpen_max_tables: int = 0, whole_rows: bool = False) -> Selection:
    """Tables by a per-question budget (or an adaptive cut-off), bridge tables, then key, join and
    likely columns per table.

    With ``recall_target`` the likeliest tables are kept until the estimated probability that
    every needed table is among them reaches the target (:func:`budget_count`; at most
    ``max_tables``; on a schema of at most ``sharpen_max_tables`` tables the estimates are counted
    :func:`sharpened` by ``budget_sharpness``), else those whose probability reaches ``table_threshold``. With
    ``column_recall_target`` columns of the selected tables are kept the same way, by the
    probability that the column is needed (its table's times its own within the table; most
    likely first, across tables), else those whose probability reaches ``column_threshold``. With
    ``column_share_cost`` too, every column whose need reaches :func:`share_priced_threshold` is
    sent as well, however sure the budget already is.
    A part of a person's name that is sent brings the table's other parts (first and last name
    are asked for together far more often than alone). Fewer than ``min_columns_sent`` columns
    in all are topped up with the likeliest others of the selected tables: a small schema's
    columns cost little, and its budget by probability alone stopped at two or three. With
    ``whole_rows`` (the question asks for all the information about something) the likeliest
    table sends every column.
    """
    prob = scores.table_prob
    if not len(prob):
        return Selection([], {})
    order = [int(t) for t in np.argsort(-prob, kind="stable")]
    if recall_target is not None:
        counted = sharpened(prob[order], budget_sharpness) if len(prob) <= sharpen_max_tables else prob[order]
        chosen = order[:min(max_tables, budget_count(counted, recall_target))]
    else:
        chosen = [t for t in order[:max_tables] if prob[t] >= table_threshold] or order[:1]
    tables = index.graph.connect(chosen, prob)
    joins = index.graph.join_columns(tables)
    table_of = index.lexical.column_table_arr
    columns: dict[int, list[int]] = {}
    names = index.lexical.columns
    kept: dict[int, set[int]] = {}
    optional: list[int] = []
    for t in tables:
        idx = np.flatnonzero(table_of == t)
        keep: set[int] = set()
        join_names = {c.lower() for c in joins.get(t, set())}
        ranked = sorted(idx.tolist(), key=lambda ci: -scores.within_prob[ci])
        for ci in idx.tolist():
            if names[ci].name.lower() in join_names:
                keep.add(ci)
            elif primary_keys and index.is_pk[ci] and len(tables) > 1:
                keep.add(ci)
            elif column_recall_target is None and scores.within_prob[ci] >= column_threshold:
                keep.add(ci)
        keep.update(ranked[:min_columns])
        kept[t] = keep
        optional.extend(ci for ci in idx.tolist() if ci not in keep)
    # a column is needed when its table is and it is needed there: a likely column of a
    # doubtful table counts for less than one of the table the question is clearly about
    need = prob[table_of] * scores.within_prob
    if column_recall_target is not None and optional:
        optional.sort(key=lambda ci: (-need[ci], ci))
        n = budget_count(need[optional], column_recall_target, minimum=0)
        if column_share_cost is not None:
            priced = share_priced_threshold(column_share_cost, len(names))
            n = max(n, int(np.count_nonzero(need[optional] >= priced)))  # sorted: a prefix
        for ci in optional[:n]:
            kept[int(table_of[ci])].add(ci)
    # a person's name is split into parts (first_name, last_name): one part sent brings the others
    part = index.lexical.flags[:, 7] > 0
    for t in tables:
        if any(part[ci] for ci in kept[t]):
            kept[t].update(np.flatnonzero(part & (table_of == t)).tolist())
    short = min_columns_sent - sum(len(k) for k in kept.values())
    if short > 0:
        rest = sorted((ci for t in tables for ci in np.flatnonzero(table_of == t).tolist() if ci not in kept[t]),
                      key=lambda ci: (-need[ci], ci))
        for ci in rest[:short]:
            kept[int(table_of[ci])].add(ci)
    if whole_rows and order[0] in kept:
        kept[order[0]].update(np.flatnonzero(table_of == order[0]).tolist())
    for t in tables:
        columns[t] = sorted(kept[t], key=lambda ci: (-scores.within_prob[ci], ci))
    return Selection(tables, columns)
