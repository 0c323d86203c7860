"""Routing candidates by meaning: the datasources whose names mean most of the question's words.

A question worded in synonyms ("vocalists" for ``singer``) shares no word with its schema, so
neither the vocabulary candidates (:class:`~nl2sql_assets.retrieval.routing.DatasourceRouter`)
nor, often, the dense search reach its datasource. Here every visible datasource's name words
(tables' and columns', embedded one by one for word meaning) are pooled once per tenant and set of
live versions; a question's words are compared with all of them in one product, and each
datasource scores the question's words it means (each word by its best name word there, weighted
by how few datasources mean it). Pure numpy over vectors the caller gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nl2sql_assets.retrieval.word_list import WordList
from nl2sql_assets.retrieval.word_similarity import THESAURUS_STRENGTH, scaled, synonym_entry


@dataclass(frozen=True)
class MeaningIndex:
    """Every visible datasource's name words: ``vectors`` one column per distinct word (``tokens``;
    stored transposed, so a question's product reads it in order: half the time), and the
    (datasource, word) pairs ``pair_owner``/``pair_token``, sorted by datasource."""

    datasources: tuple[str, ...]
    tokens: tuple[str, ...]
    vectors: np.ndarray
    pair_owner: np.ndarray
    pair_token: np.ndarray
    thesaurus: WordList | None = None
    #: per word, the name words whose thesaurus entries list it
    links: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: each word's position in ``tokens``
    position: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, per_datasource: Sequence[tuple[str, Sequence[str], np.ndarray]],
              thesaurus: WordList | None = None) -> MeaningIndex:
        """``per_datasource``: (datasource, its name words, their vectors), one row a word."""
        position: dict[str, int] = {}
        rows: list[np.ndarray] = []
        owners: list[int] = []
        tokens: list[int] = []
        names: list[str] = []
        for ds, words, vectors in per_datasource:
            seen: set[int] = set()
            for w, v in zip(words, vectors, strict=True):
                if w not in position:
                    position[w] = len(position)
                    rows.append(np.asarray(v, dtype=np.float32))
                i = position[w]
                if i not in seen:
                    seen.add(i)
                    owners.append(len(names))
                    tokens.append(i)
            names.append(ds)
        links: dict[str, set[int]] = {}
        if thesaurus is not None and THESAURUS_STRENGTH > 0:
            for tok, i in position.items():
                for w in synonym_entry(thesaurus, tok):
                    links.setdefault(w, set()).add(i)
        dim = rows[0].shape[0] if rows else 0
        return cls(datasources=tuple(names), tokens=tuple(position),
                   vectors=(np.ascontiguousarray(np.vstack(rows).T) if rows
                            else np.zeros((dim, 0), dtype=np.float32)),
                   pair_owner=np.array(owners, dtype=np.int64), pair_token=np.array(tokens, dtype=np.int64),
                   thesaurus=thesaurus, links={w: tuple(sorted(ix)) for w, ix in links.items()},
                   position=position)

    def scores(self, question_vectors: np.ndarray, question_words: Sequence[str]) -> np.ndarray:
        """Per datasource: the share of the question's words it means, each by its best name word
        there and weighted by an idf over how much every datasource means it (a word all of them
        mean, like "name", says little)."""
        n = len(self.datasources)
        if not n or not len(question_vectors) or not len(self.pair_token):
            return np.zeros(n)
        strength = scaled(np.asarray(question_vectors, np.float32) @ self.vectors)
        if self.thesaurus is not None and THESAURUS_STRENGTH > 0:
            self._add_synonyms(strength, question_words)
        per_pair = strength[:, self.pair_token]
        starts = np.flatnonzero(np.r_[True, self.pair_owner[1:] != self.pair_owner[:-1]])
        means = np.zeros((len(question_vectors), n))
        means[:, self.pair_owner[starts]] = np.maximum.reduceat(per_pair, starts, axis=1)
        df = means.sum(axis=1)
        idf = np.log((n + 1) / (df + 0.5))
        return (idf @ means) / max(float(idf.sum()), 1e-9)

    def _add_synonyms(self, strength: np.ndarray, question_words: Sequence[str]) -> None:
        """A thesaurus pair counts at least :data:`THESAURUS_STRENGTH`, as in word meaning."""
        assert self.thesaurus is not None
        position = self.position
        for r, w in enumerate(question_words):
            if w in position:  # the question says a schema word itself
                continue
            listed = {position[x] for x in synonym_entry(self.thesaurus, w) if x in position}
            hits = sorted(listed.union(self.links.get(w, ())))
            if hits:
                strength[r, hits] = np.maximum(strength[r, hits], THESAURUS_STRENGTH)


def best_by_meaning(shares: dict[str, float], taken: set[str], count: int) -> list[str]:
    """The ``count`` datasources not in ``taken`` that mean most of the question (share > 0).

    >>> best_by_meaning({"a": 0.2, "b": 0.5, "c": 0.0, "d": 0.4}, {"d"}, 2)
    ['b', 'a']
    """
    ranked = sorted((-s, ds) for ds, s in shares.items() if ds not in taken and s > 0 and math.isfinite(s))
    return [ds for _, ds in ranked[:count]]
