"""Word meaning: a question word and a schema word that mean the same without being spelled alike.

Users do not say the schema's words: "vocalists" for ``singer``, "nationality" for ``country``,
"leaders of the divisions" for ``head`` and ``department``. The lexical evidence
(:mod:`nl2sql_assets.retrieval.lexical`) is silent there, and one vector for a whole question
blurs single words. Here each question word and each word of the schema's names and descriptions
is embedded on its own (the retriever's embedding model, one short text per word) and compared
one to one. The local MiniLM gives related words 0.4 to 0.85 (vocalists/singer 0.75,
town/city 0.77, youngest/age 0.62) and unrelated ones about 0.2 to 0.35, so a similarity counts
from :data:`SIM_FLOOR` up, scaled to reach 1 for the same word; a pair the thesaurus lists
(:mod:`~nl2sql_assets.retrieval.thesaurus`) counts at least :data:`THESAURUS_STRENGTH`.

:class:`SchemaWords` holds a snapshot's words and which names use them (built once per
(datasource, version) with the lexical index); :func:`word_scores` turns a question's word
vectors into per-column and per-table features for ranking and a schema-wide share for routing.
Vectors come from the caller, so this module needs no model.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nl2sql_assets.retrieval.lexical import LexicalIndex, QueryTerms
from nl2sql_assets.retrieval.thesaurus import JoinedThesaurus
from nl2sql_assets.retrieval.word_list import WordList

#: below this cosine two single words count as unrelated (MiniLM: unrelated pairs about 0.2 to 0.35)
SIM_FLOOR = 0.35
#: the match strength of a pair the thesaurus lists (:mod:`~nl2sql_assets.retrieval.thesaurus`)
THESAURUS_STRENGTH = 0.5
#: an entry listing more synonyms than this links nothing (``head`` lists 655: mostly other senses)
THESAURUS_MAX_SYNONYMS: int | None = 150
#: at most this many question words are embedded and compared (longest first)
MAX_QUESTION_WORDS = 24
#: question words whose vectors are kept in memory (about 1.5 KB each with MiniLM)
WORD_CACHE_SIZE = 20_000


def question_words(terms: QueryTerms) -> list[str]:
    """The question's words worth a meaning match: alphabetic, three letters or more, sorted.

    >>> from nl2sql_assets.retrieval.lexical import build_query_terms
    >>> question_words(build_query_terms("How many vocalists are from France in 2019?"))
    ['france', 'vocalist']
    """
    found = sorted(w for w in terms.words if len(w) >= 3 and w.isalpha())
    if len(found) > MAX_QUESTION_WORDS:
        found = sorted(sorted(found, key=len, reverse=True)[:MAX_QUESTION_WORDS])
    return found


class WordVectorCache:
    """The vectors of recent question words, in an LRU (thread-safe).

    Questions reuse a small vocabulary, and a question's words outnumber its other texts (a
    BIRD question with its evidence has 8.8), so embedding them every time took 6.7 ms more of
    a question at the median; from memory they cost nothing.
    """

    def __init__(self, capacity: int = WORD_CACHE_SIZE) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, words: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The vectors held for ``words``, and the words not held (in order, once each)."""
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        with self._lock:
            for w in dict.fromkeys(words):
                vector = self._vectors.get(w)
                if vector is None:
                    missing.append(w)
                else:
                    self._vectors.move_to_end(w)
                    found[w] = vector
        return found, missing

    def put(self, words: Sequence[str], vectors: np.ndarray) -> None:
        with self._lock:
            for w, vector in zip(words, vectors, strict=True):
                kept = np.array(vector, dtype=np.float32)
                kept.setflags(write=False)
                self._vectors[w] = kept
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)


@dataclass(frozen=True)
class SchemaWords:
    """A snapshot's name and description words, and where each is used.

    ``tokens`` are the distinct words. ``col_owner``/``col_token``/``col_weight`` list each
    column's name words (column, token, IDF weight; the weights sum to one per column), and the
    ``table_*`` arrays the same for table names; ``vocab_table``/``vocab_token`` list every word
    of a table's vocabulary (its name, its columns' names and descriptions), sorted by table.
    """

    tokens: tuple[str, ...]
    col_owner: np.ndarray
    col_token: np.ndarray
    col_weight: np.ndarray
    table_owner: np.ndarray
    table_token: np.ndarray
    table_weight: np.ndarray
    vocab_table: np.ndarray
    vocab_token: np.ndarray
    n_columns: int
    n_tables: int
    #: the thesaurus the links come from (None: vectors alone), and per word the tokens whose
    #: entries list it (a question word found there is their synonym)
    thesaurus: WordList | None = None
    links: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: each token's position in ``tokens``; the first ``n_named`` are name words (the thesaurus
    #: links these only)
    position: dict[str, int] = field(default_factory=dict)
    n_named: int = 0

    @classmethod
    def build(cls, lexical: LexicalIndex, thesaurus: WordList | None = None) -> SchemaWords:
        position: dict[str, int] = {}

        def at(tok: str) -> int:
            return position.setdefault(tok, len(position))

        def pairs(items: list[tuple[str, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            owner, token, weight = [], [], []
            for i, name_words in enumerate(items):
                kept = sorted({w for w in name_words if len(w) >= 2 and w.isalpha()})
                total = sum(lexical.idf(w) for w in kept)
                for w in kept:
                    owner.append(i)
                    token.append(at(w))
                    weight.append(lexical.idf(w) / total)
            return (np.array(owner, dtype=np.int64), np.array(token, dtype=np.int64),
                    np.array(weight, dtype=np.float64))

        col = pairs([c.name_words for c in lexical.columns])
        tab = pairs([t.name_words for t in lexical.tables])
        named = len(position)  # tokens [0, named) are name words, the rest only in descriptions
        vt, vk = [], []
        for ti, vocab in enumerate(lexical.table_vocab):
            for w in sorted(vocab):
                if len(w) >= 2 and w.isalpha():
                    vt.append(ti)
                    vk.append(at(w))
        links: dict[str, set[int]] = {}
        if thesaurus is not None and THESAURUS_STRENGTH > 0:
            for tok, i in position.items():
                if i >= named:  # name words only: a description's words say too much by chance
                    break
                for w in synonym_entry(thesaurus, tok):
                    links.setdefault(w, set()).add(i)
        return cls(tokens=tuple(position), col_owner=col[0], col_token=col[1], col_weight=col[2],
                   table_owner=tab[0], table_token=tab[1], table_weight=tab[2],
                   vocab_table=np.array(vt, dtype=np.int64), vocab_token=np.array(vk, dtype=np.int64),
                   n_columns=len(lexical.columns), n_tables=len(lexical.tables),
                   thesaurus=thesaurus if links else None, position=position, n_named=named,
                   links={w: tuple(sorted(ix)) for w, ix in links.items()})

    def synonyms(self, question_words: Sequence[str]) -> np.ndarray:
        """(question words, tokens): 1 where the thesaurus lists the pair either way, else 0; a
        question word the schema uses itself links nothing (the user said the schema's word)."""
        out = np.zeros((len(question_words), len(self.tokens)))
        if self.thesaurus is None:
            return out
        for r, w in enumerate(question_words):
            if w in self.position:  # the question says the schema's own word: nothing to translate
                continue
            hits = set(self.links.get(w, ()))
            for x in synonym_entry(self.thesaurus, w):
                i = self.position.get(x, self.n_named)
                if i < self.n_named:
                    hits.add(i)
            if hits:
                out[r, sorted(hits)] = 1.0
        return out


def synonym_entry(thesaurus: WordList, word: str) -> frozenset[str]:
    """The thesaurus's synonyms of ``word``: each source's, none where its entry is too long to
    mean one sense."""
    sources = thesaurus.sources if isinstance(thesaurus, JoinedThesaurus) else (thesaurus,)
    found: frozenset[str] = frozenset()
    for source in sources:
        entry = source.related(word)
        if THESAURUS_MAX_SYNONYMS is None or len(entry) <= THESAURUS_MAX_SYNONYMS:
            found |= entry
    return found


@dataclass(frozen=True)
class WordScores:
    """Per column: how much of its name the question means (IDF-weighted, each name word by its
    best question word). Per table: the same for its name, and the share of the question's
    words its vocabulary means (each question word by its best word of the table)."""

    column_name: np.ndarray
    table_name: np.ndarray
    #: (tables, question words): how much each table's vocabulary means each question word
    table_by_word: np.ndarray
    #: the share of the question's words the whole schema means (routing)
    schema_coverage: float = 0.0

    @classmethod
    def none(cls, n_columns: int, n_tables: int) -> WordScores:
        return cls(np.zeros(n_columns), np.zeros(n_tables), np.zeros((n_tables, 0)))

    @property
    def table_coverage(self) -> np.ndarray:
        """Per table: the share of the question's words its vocabulary means."""
        m = self.table_by_word
        return m.mean(axis=1) if m.shape[1] else np.zeros(len(m))

    def residual(self, top: int) -> np.ndarray:
        """Per table: how much of the question's words it means beyond what table ``top`` means
        (a second table answers a word the likeliest one cannot: the "hometown" of athletes)."""
        m = self.table_by_word
        return np.clip(m - m[top], 0.0, None).mean(axis=1) if m.shape[1] else np.zeros(len(m))


def scaled(similarity: np.ndarray) -> np.ndarray:
    """Cosine to a match strength: 0 up to :data:`SIM_FLOOR`, 1 for the same word.

    >>> scaled(np.array([0.2, 0.35, 0.675, 1.0])).round(2).tolist()
    [0.0, 0.0, 0.5, 1.0]
    """
    return np.clip((similarity - SIM_FLOOR) / (1.0 - SIM_FLOOR), 0.0, 1.0)


def word_scores(words: SchemaWords, token_vectors: np.ndarray, question_vectors: np.ndarray,
                question_words: Sequence[str] | None = None) -> WordScores:
    """Features from the question words' vectors (rows) against the schema words' (one row per token);
    with ``question_words`` (the rows' words), a thesaurus pair counts at least :data:`THESAURUS_STRENGTH`."""
    if not len(question_vectors) or not len(words.tokens):
        return WordScores.none(words.n_columns, words.n_tables)
    strength = scaled(np.asarray(question_vectors, np.float64) @ np.asarray(token_vectors, np.float64).T)
    if question_words is not None and words.thesaurus is not None:
        strength = np.maximum(strength, THESAURUS_STRENGTH * words.synonyms(question_words))
    best = strength.max(axis=0)  # per schema token: its best question word
    column_name = np.bincount(words.col_owner, weights=words.col_weight * best[words.col_token],
                              minlength=words.n_columns)
    table_name = np.bincount(words.table_owner, weights=words.table_weight * best[words.table_token],
                             minlength=words.n_tables)
    by_table = np.zeros((words.n_tables, len(question_vectors)))
    if len(words.vocab_token):
        per_pair = strength[:, words.vocab_token]  # (question words, pairs), pairs sorted by table
        starts = np.flatnonzero(np.r_[True, words.vocab_table[1:] != words.vocab_table[:-1]])
        # each question word's best in the table
        by_table[words.vocab_table[starts]] = np.maximum.reduceat(per_pair, starts, axis=1).T
    return WordScores(column_name=column_name, table_name=table_name, table_by_word=by_table,
                      schema_coverage=float(strength.max(axis=1).mean()))
