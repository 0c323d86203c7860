"""Learned word associations: which column-name words questions with a given word tend to need.

Many needed columns are implied, not named: "female" needs ``sex``, "the oldest" needs ``age``,
"from France" needs ``country``. Word meaning (:mod:`~nl2sql_assets.retrieval.word_similarity`)
carries some of these; the rest are regularities of how people ask about data, which the
benchmarks' questions show across many databases. For each pair (question word, column-name
word) that differ, :func:`fit` counts how often a column whose name holds the second word was
needed when the question held the first, against how often such a column is needed at all,
smoothed toward that base rate (:data:`SMOOTHING`). Only pairs seen needed in at least
:data:`MIN_DATABASES` different databases are kept, so one database's abbreviation or naming habit
never becomes a rule. A column's score is the largest log-lift among its name words and the
question's words; the ranking adds :data:`~nl2sql_assets.retrieval.ranking.ASSOCIATION_WEIGHT`
times it to the within-table logit. The table is fitted by ``benchmarks/fit_word_association.py``
on BIRD dev and Spider train and shipped as data (``word_association.json``); no entry names a
database, and ``benchmarks/heldout.py`` fits it per fold without the fold's databases.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from nl2sql_assets.errors import RetrievalError

SHIPPED_FILE = Path(__file__).with_name("word_association.json")
#: pseudo-counts pulling a pair's rate toward the name word's base rate
SMOOTHING = 5.0
#: a pair is kept only when its columns were needed in this many different databases
MIN_DATABASES = 3
#: pairs whose log-lift is below this are not kept (they would barely move a column)
MIN_LIFT = 0.1


@dataclass(frozen=True)
class Example:
    """One question over one schema: its words, each column's name words, which columns it needed."""

    database: str
    question_words: frozenset[str]
    column_words: Sequence[tuple[str, ...]]
    needed: Sequence[bool]


@dataclass(frozen=True)
class WordAssociation:
    """Question word -> column-name word -> log-lift (> 0)."""

    pairs: dict[str, dict[str, float]]

    def column_scores(self, question_words: Iterable[str], name_postings: dict[str, np.ndarray],
                      n_columns: int) -> np.ndarray:
        """Per column, the largest log-lift between a question word and one of its name words.

        ``name_postings`` maps a name word to the columns whose names hold it
        (:meth:`~nl2sql_assets.retrieval.lexical.LexicalIndex.name_postings`): the cost is the
        question's associations, not the schema's width."""
        best: dict[str, float] = {}
        for q in set(question_words):
            for word, lift in self.pairs.get(q, {}).items():
                if word != q and lift > best.get(word, 0.0):
                    best[word] = lift
        out = np.zeros(n_columns, dtype=np.float64)
        for word, lift in best.items():
            cols = name_postings.get(word)
            if cols is not None and len(cols):
                np.maximum.at(out, cols, lift)
        return out

    def to_json(self, **fitted: object) -> dict[str, object]:
        return {"smoothing": SMOOTHING, "min_databases": MIN_DATABASES, "min_lift": MIN_LIFT, "fitted": fitted,
                "pairs": {q: dict(sorted(ws.items())) for q, ws in sorted(self.pairs.items())}}

    @classmethod
    def load(cls, path: Path) -> WordAssociation:
        """The table in ``path``, checked before use."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            raw = data["pairs"]
            pairs = {str(q): {str(w): float(v) for w, v in ws.items()} for q, ws in raw.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RetrievalError(f"word association file {path} cannot be read: {exc}") from exc
        if any(not math.isfinite(v) or v <= 0 for ws in pairs.values() for v in ws.values()):
            raise RetrievalError(f"word association file {path} holds a lift that is not a positive number")
        return cls(pairs=pairs)


def fit(examples: Iterable[Example]) -> WordAssociation:
    """Count, over ``examples``, how much more often a column is needed when the question holds a word."""
    seen: dict[tuple[str, str], float] = defaultdict(float)
    needed: dict[tuple[str, str], float] = defaultdict(float)
    databases: dict[tuple[str, str], set[str]] = defaultdict(set)
    base_seen: dict[str, float] = defaultdict(float)
    base_needed: dict[str, float] = defaultdict(float)
    for ex in examples:
        for names, gold in zip(ex.column_words, ex.needed, strict=True):
            for c in set(names):
                base_seen[c] += 1
                base_needed[c] += gold
                for q in ex.question_words:
                    if q == c:
                        continue
                    seen[(q, c)] += 1
                    if gold:
                        needed[(q, c)] += 1
                        databases[(q, c)].add(ex.database)
    pairs: dict[str, dict[str, float]] = {}
    for key, dbs in databases.items():
        if len(dbs) < MIN_DATABASES:
            continue
        q, c = key
        base = (base_needed[c] + 0.5) / (base_seen[c] + 2.0)
        rate = (needed[key] + SMOOTHING * base) / (seen[key] + SMOOTHING)
        lift = math.log(rate / base)
        if lift >= MIN_LIFT:
            pairs.setdefault(q, {})[c] = round(lift, 3)
    return WordAssociation(pairs=pairs)


@lru_cache(maxsize=1)
def shipped_association() -> WordAssociation:
    """The table shipped with the package (read once per process)."""
    return WordAssociation.load(SHIPPED_FILE)
