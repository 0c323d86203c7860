"""Lexical evidence: what words, identifiers and literal values a question shares with a schema.

Dense similarity alone misses what a planner's question states literally: an identifier quoted in
the evidence (``Free Meal Count (K-12)``), an abbreviation (``AvgScrMath`` for "average score in
math"), a year or a date that only date columns can hold, a value the column was seen to contain
("Alameda" in the ``County`` column). This module turns a question into :class:`QueryTerms` and a
snapshot into a :class:`LexicalIndex`, and scores every column and table of the snapshot against
the terms. Pure Python over plain values; the index is built once per (datasource, version).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from nl2sql_assets.indexing.models import split_identifier
from nl2sql_assets.stemming import stem
from nl2sql_assets.schema.models import SchemaSnapshot

STOPWORDS = frozenset("""
a an the of in on at to for from by with and or not no nor is are was were be been being do does did
has have had this that these those it its as which what who whom whose when where why how many much
more most less least than then there their they them he she his her we our you your i me my all any
each every some such only own same so too very can will just should would could may might must shall
also into over under about above below between out up down off again further once here both few other
s t now list give show tell please refer refers referred mean means meaning
stand stands among per whether based value values find state provide indicate calculate describe
identify
""".split())

_YEAR_RE = re.compile(r"(?<![\d/:.-])(1[89]\d\d|20\d\d)(?![\d/:-])")
_DATE_RE = re.compile(
    r"\b\d{4}[-/]\d{1,2}(?:[-/]\d{1,2})?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b",
    re.IGNORECASE)
_TIME_RE = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\b")
# "all the information about", "every detail of", "everything": the answer is whole rows (SELECT *)
_WHOLE_ROWS_RE = re.compile(r"\b(?:all|every|full|complete|entire)\s+(?:of\s+)?(?:the\s+)?"
                            r"(?:info|information|details?|data|attributes|fields|records?)\b|\beverything\b", re.I)
# a single quote opens only after a non-word character and closes only before one, so the
# apostrophes of "What's" and "Senna's" quote nothing, while 'Nyx Hero's Path' stays whole
_QUOTED_RE = re.compile(r"(?<!\w)'((?:[^'\n]|'(?=\w)){1,80}?)'(?!\w)|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`")
_POSSESSIVE_RE = re.compile(r"['’]s?(?=\s|$)")
_CONNECTORS = frozenset("of de di da von van the and la le du del &".split())
_CAPITALIZED_RE = re.compile(
    r"\b([A-Z][\w'.&-]*(?:\s+(?:" + "|".join(sorted(map(re.escape, _CONNECTORS))) + r")?\s*[A-Z][\w'.&-]*)*)")
_SENTENCE_RE = re.compile(r"(?<=[.?!])\s+")
_CLAUSE_RE = re.compile(r"[;\n]+")
_IDENT_RE = re.compile(r"[A-Za-z_][\w$]*")
_QUESTION_OPENERS = frozenset("""what which who whom how list please name give state among for in of the is are when
where find calculate tell provide describe identify show indicate count do does did was were""".split())

_DATE_WORDS = frozenset({"date", "year", "season", "birthday", "dob", "time", "day", "month", "born", "birth"})
_YEAR_WORDS = frozenset({"year", "season", "yr"})
_TIME_WORDS = frozenset({"time", "duration", "elapsed", "millisecond", "milliseconds", "hour", "minute", "second",
                         "seconds"})
# a column holds people's names when its name says so: a word that is a person-name part, or
# "name" beside a qualifier of one ("first_name", "DisplayName") or a role ("player_name")
_PERSON_NAME_WORDS = frozenset({"forename", "surname", "firstname", "lastname", "fullname", "nickname", "displayname"})
_PERSON_NAME_QUALIFIERS = frozenset("""first last full display given family middle nick player user member driver
customer client employee student author person owner patient""".split())
# the parts a person's name is split into (first_name / last_name, fname / lname, forename / surname)
_NAME_PART_WORDS = frozenset({"forename", "surname", "firstname", "lastname", "middlename", "fname", "lname", "mname"})
_NAME_PART_QUALIFIERS = frozenset({"first", "last", "middle", "given", "family", "f", "l", "m"})  # LName: l + name
# a column holds places when its name or description says so
_PLACE_WORDS = frozenset("""city country region district state county location address town province nation place
hometown continent territory municipality""".split())
_DATE_FAMILIES = frozenset({"date", "datetime"})
_TEXT_FAMILIES = frozenset({"text", "other", "json", "uuid"})


def words(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """Stemmed lower-case words of ``text``, identifiers split at ``_`` and camelCase.

    >>> words("Which schools have AvgScrMath above 500?")
    ['school', 'avg', 'scr', 'math', '500']
    """
    out = []
    for w in split_identifier(text).split():
        if drop_stopwords and w in STOPWORDS:
            continue
        out.append(stem(w))
    return out


def is_person_name_column(name: str) -> bool:
    """Whether a column's name says it holds people's names (the type is checked elsewhere).

    >>> [is_person_name_column(n) for n in ("surname", "first_name", "DisplayName", "player_name")]
    [True, True, True, True]
    >>> [is_person_name_column(n) for n in ("name", "team_long_name", "circuitRef", "username")]
    [False, False, False, False]
    """
    return _names_people(frozenset(words(name, drop_stopwords=False)))


def is_name_part(name: str) -> bool:
    """Whether a column's name says it holds one part of a person's name (first, last, middle).

    >>> [is_name_part(n) for n in ("first_name", "LName", "surname", "given_name", "FirstName")]
    [True, True, True, True, True]
    >>> [is_name_part(n) for n in ("name", "player_name", "last_update", "first_seen", "company_name")]
    [False, False, False, False, False]
    """
    name_words = set(words(name, drop_stopwords=False))
    if name_words & _NAME_PART_WORDS:
        return True
    return "name" in name_words and bool(name_words & _NAME_PART_QUALIFIERS)


def _names_people(name_words: frozenset[str]) -> bool:
    if name_words & _PERSON_NAME_WORDS:
        return True
    return "name" in name_words and bool(name_words & _PERSON_NAME_QUALIFIERS)


def _is_subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def abbreviates(token: str, word: str) -> bool:
    """Whether identifier token ``token`` is an abbreviation of question word ``word``.

    A prefix (``num`` of ``number``) or an in-order subsequence sharing the first letter
    (``scr`` of ``score``, ``tst`` of ``test``), at least three letters, no digits.

    >>> abbreviates("scr", "score"), abbreviates("avg", "average"), abbreviates("num", "number")
    (True, True, True)
    >>> abbreviates("id", "identifier"), abbreviates("mat", "format"), abbreviates("sct", "select")
    (False, False, False)
    """
    if len(token) < 3 or len(token) >= len(word) or not token.isalpha() or token[0] != word[0]:
        return False
    if word.startswith(token):
        return True
    return len(word) <= 3 * len(token) and token[1] in word[1:3] and _is_subsequence(token, word)


@dataclass(frozen=True)
class QueryTerms:
    """What a question (plus evidence and hints) says, in the forms the index matches.

    ``segments`` are the texts embedded for dense matching (the question, each evidence clause,
    each hint); ``entities`` the proper nouns and quoted strings (embedded too, matched against
    text columns and sampled values); ``whole_rows``: the question asks for all the information
    about something, so every column of its table is wanted.
    """

    text: str
    lowered: str
    words: frozenset[str]
    identifiers: frozenset[str]
    segments: tuple[str, ...]
    entities: tuple[str, ...]
    has_year: bool
    has_date: bool
    has_time: bool
    literals: frozenset[str] = field(default_factory=frozenset)
    whole_rows: bool = False


def _entities(question: str) -> list[str]:
    r"""Quoted strings and capitalized spans that do not merely open a sentence.

    A possessive ends a span ("Lewis Hamilton's Q1" names Lewis Hamilton, then Q1), and a
    contracted opener ("What's") is dropped like the opener itself.

    >>> _entities("How many posts were created by Daniel Vassallo in 'Stats'?")
    ['Stats', 'Daniel Vassallo']
    >>> _entities("What's Lewis Hamilton's Q1 in the card \"Ancestor's Chosen\"?")
    ["Ancestor's Chosen", 'Lewis Hamilton', 'Q1']
    """
    out: list[str] = []
    unquoted = question
    for m in _QUOTED_RE.finditer(question):
        out.append(next(g for g in m.groups() if g is not None).strip())
        unquoted = unquoted[:m.start()] + " " * (m.end() - m.start()) + unquoted[m.end():]
    for sentence in _SENTENCE_RE.split(unquoted):
        for m in _CAPITALIZED_RE.finditer(sentence):
            opens = not sentence[: m.start(1)].strip()
            pieces = _POSSESSIVE_RE.split(m.group(1))
            for i, piece in enumerate(pieces):
                parts = piece.strip(" .'").split()
                if opens and i == 0:
                    if parts and parts[0].lower() in _QUESTION_OPENERS:
                        parts = parts[1:]
                    elif len(parts) < 2 and len(pieces) == 1:  # one capitalized word opening a sentence
                        continue
                while parts and parts[0].lower() in _CONNECTORS:
                    parts = parts[1:]
                span = " ".join(parts)
                if len(span) >= 2 and span.lower() not in STOPWORDS and span[0].isupper():
                    out.append(span)
    seen: list[str] = []
    for span in out:
        if span and span not in seen:
            seen.append(span)
    return seen


def evidence_clauses(evidence: str | None) -> list[str]:
    """The clauses of an evidence text (split at ``;`` and line breaks): one query text each.

    >>> evidence_clauses("rate = a / b; 'CA' is California\\n")
    ['rate = a / b', "'CA' is California"]
    """
    return [c.strip() for c in _CLAUSE_RE.split(evidence or "") if c.strip()]


def build_query_terms(question: str, evidence: str | None = None, hints: list[str] | None = None,
                      *, max_entities: int = 6) -> QueryTerms:
    """Split a question into the terms the lexical index and the dense stage use.

    >>> t = build_query_terms("Schools in Alameda County opened in 1999?", "opened refers to OpenDate")
    >>> t.segments, t.entities, t.has_year
    (('Schools in Alameda County opened in 1999?', 'opened refers to OpenDate'), ('Alameda County',), True)
    >>> sorted(t.identifiers)[:3]
    ['alameda', 'county', 'in']
    """
    question = question.strip()
    clauses = evidence_clauses(evidence)
    hint_texts = [h.strip() for h in hints or [] if h and h.strip()]
    text = " ".join([question, *clauses, *hint_texts])
    entities = _entities(question)[:max_entities]
    literals = {e.lower() for e in entities}
    for m in _QUOTED_RE.finditer(" ".join(clauses)):
        literals.add(next(g for g in m.groups() if g is not None).strip().lower())
    return QueryTerms(
        text=text,
        lowered=text.lower(),
        words=frozenset(words(text)),
        identifiers=frozenset(m.group(0).lower() for m in _IDENT_RE.finditer(text)),
        segments=tuple(dict.fromkeys([question, *clauses, *hint_texts])),
        entities=tuple(entities),
        has_year=bool(_YEAR_RE.search(question)),
        has_date=bool(_DATE_RE.search(question)),
        has_time=bool(_TIME_RE.search(question)),
        literals=frozenset(v for v in literals if v),
        whole_rows=bool(_WHOLE_ROWS_RE.search(question)),
    )


def _phrase_in(phrase: str, lowered: str) -> bool:
    """Whether ``phrase`` occurs in ``lowered`` not glued to other identifier characters."""
    start = lowered.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        before = lowered[start - 1] if start else " "
        after = lowered[end] if end < len(lowered) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = lowered.find(phrase, start + 1)
    return False


def _as_arrays(posts: dict[str, list[int]]) -> dict[str, np.ndarray]:
    return {key: np.array(indexes, dtype=np.int64) for key, indexes in posts.items()}


@dataclass
class _Item:
    name: str
    name_words: tuple[str, ...]
    desc_words: frozenset[str]
    values: frozenset[str]


class LexicalIndex:
    """Word, identifier and value lookups over one snapshot's tables and columns.

    Columns are numbered in snapshot order (table by table); ``column_table[i]`` is the
    table index of column ``i``. Build once per (datasource, version) and reuse.
    """

    def __init__(self, snapshot: SchemaSnapshot) -> None:
        self.tables: list[_Item] = []
        self.columns: list[_Item] = []
        self.column_table: list[int] = []
        col_flags: list[tuple[float, ...]] = []
        for ti, table in enumerate(snapshot.tables):
            desc = " ".join(filter(None, [table.text]))
            self.tables.append(_Item(table.name, tuple(words(table.name, drop_stopwords=False)),
                                     frozenset(words(desc)), frozenset()))
            for col in table.columns:
                desc = " ".join(filter(None, [col.text, *col.synonyms]))
                values: frozenset[str] = frozenset()
                if col.stats is not None and not col.pii:
                    values = frozenset(v.strip().lower() for v in col.stats.top_values if v and v.strip())
                item = _Item(col.name, tuple(words(col.name, drop_stopwords=False)), frozenset(words(desc)), values)
                self.columns.append(item)
                self.column_table.append(ti)
                name_words = set(item.name_words) | set(words(col.text or ""))
                family = col.type_family
                is_date = family in _DATE_FAMILIES or bool(name_words & _DATE_WORDS)
                is_year = is_date or bool(name_words & _YEAR_WORDS)
                is_time = family in ("time", "datetime", "interval") or bool(name_words & _TIME_WORDS)
                is_text = family in _TEXT_FAMILIES
                is_name = is_text and any(w.endswith("name") for w in name_words)
                is_person = is_text and _names_people(frozenset(item.name_words))
                is_place = is_text and not _PLACE_WORDS.isdisjoint({*item.name_words, *item.desc_words})
                col_flags.append((float(is_date), float(is_year), float(is_time), float(is_text), float(is_name),
                                  float(is_person), float(is_place), float(is_text and is_name_part(col.name))))
        # per column: date, year, time, text, name (a text column called a name: where proper nouns
        # live), person (a text column of people's names), place (a text column of places), name
        # part (a text column holding one part of a person's name)
        self.flags = np.array(col_flags, dtype=np.float32).reshape(-1, 8)
        self.column_table_arr = np.array(self.column_table, dtype=np.int64)
        n_docs = len(self.columns) + len(self.tables)
        df: Counter[str] = Counter()
        for item in self.columns + self.tables:
            df.update(set(item.name_words) | item.desc_words)
        self._idf = {w: math.log(1.0 + n_docs / (1.0 + n)) for w, n in df.items()}
        self._default_idf = math.log(1.0 + n_docs)
        name_counts = Counter(c.name.lower() for c in self.columns)
        self.uniqueness = np.array([1.0 / name_counts[c.name.lower()] for c in self.columns], dtype=np.float32)
        # table vocabularies for whole-table coverage
        vocab: list[set[str]] = [set(t.name_words) | set(t.desc_words) for t in self.tables]
        for ci, col in enumerate(self.columns):
            vocab[self.column_table[ci]] |= set(col.name_words) | col.desc_words
        self.table_vocab = [frozenset(v) for v in vocab]
        tdf: Counter[str] = Counter(w for v in vocab for w in v)
        n_tables = max(1, len(self.tables))
        self._tidf = {w: math.log((n_tables + 1) / (n + 0.5)) for w, n in tdf.items()}
        self.vocabulary = frozenset(tdf)
        self._qualified = [f"{self.tables[self.column_table[ci]].name}.{c.name}".lower()
                           for ci, c in enumerate(self.columns)]
        by_letter: dict[str, set[str]] = {}
        for tok in df:
            if tok:
                by_letter.setdefault(tok[0], set()).add(tok)
        self._tokens_by_letter = {k: frozenset(v) for k, v in by_letter.items()}
        # the last question's matches: column features, table features and novelty all ask for them
        self._last_matched: tuple[frozenset[str], Mapping[str, float]] | None = None
        self._postings()

    def _postings(self) -> None:
        """Inverted lookups (token, name, value -> columns), so a question costs what it matches,
        not a pass over every column of a wide schema."""
        name_posts: dict[str, list[int]] = {}
        desc_posts: dict[str, list[int]] = {}
        by_name: dict[str, list[int]] = {}
        by_value: dict[str, list[int]] = {}
        self._odd_names: list[int] = []  # names that are no plain identifier: matched as phrases
        for ci, col in enumerate(self.columns):
            for tok in set(col.name_words):
                name_posts.setdefault(tok, []).append(ci)
            for tok in col.desc_words:
                desc_posts.setdefault(tok, []).append(ci)
            if _IDENT_RE.fullmatch(col.name):
                by_name.setdefault(col.name.lower(), []).append(ci)
            else:
                self._odd_names.append(ci)
            for value in col.values:
                by_value.setdefault(value, []).append(ci)
        self._name_posts, self._desc_posts = _as_arrays(name_posts), _as_arrays(desc_posts)
        self._by_name, self._by_value = _as_arrays(by_name), _as_arrays(by_value)
        self._name_total = np.array([sum(self.idf(t) for t in set(c.name_words)) for c in self.columns])
        self._desc_total = np.array([sum(self.idf(t) for t in c.desc_words) for c in self.columns])

    def idf(self, word: str) -> float:
        return self._idf.get(word, self._default_idf)

    @property
    def name_postings(self) -> dict[str, np.ndarray]:
        """Per name word, the columns whose names hold it."""
        return self._name_posts

    def matched_tokens(self, query_words: frozenset[str]) -> Mapping[str, float]:
        """Index tokens the question contains: 1.0 for the word itself, 0.8 for an abbreviation of one."""
        last = self._last_matched  # one read: another thread may replace it
        if last is not None and last[0] is query_words:
            return last[1]
        matched: dict[str, float] = {}
        for w in query_words:
            if not w:
                continue
            for tok in self._tokens_by_letter.get(w[0], ()):
                if tok == w:
                    matched[tok] = 1.0
                elif tok not in matched and abbreviates(tok, w):
                    matched[tok] = 0.8
        result = MappingProxyType(matched)
        self._last_matched = (query_words, result)
        return result

    def _coverage(self, tokens: tuple[str, ...] | frozenset[str], matched: Mapping[str, float]) -> float:
        """IDF-weighted share of ``tokens`` the question contains."""
        if not tokens:
            return 0.0
        total = hit = 0.0
        for tok in set(tokens):
            weight = self.idf(tok)
            total += weight
            hit += weight * matched.get(tok, 0.0)
        return hit / total if total else 0.0

    def _mentioned(self, name: str, terms: QueryTerms) -> bool:
        lowered = name.lower()
        if _IDENT_RE.fullmatch(name):
            return lowered in terms.identifiers
        return _phrase_in(lowered, terms.lowered)

    def column_features(self, terms: QueryTerms) -> dict[str, np.ndarray]:
        """Per column: name and description coverage, exact and qualified mentions, value hits."""
        n = len(self.columns)
        matched = self.matched_tokens(terms.words)
        name_hit = np.zeros(n)
        desc_hit = np.zeros(n)
        for tok, share in matched.items():  # IDF-weighted share of each column's tokens the question holds
            weight = self.idf(tok) * share
            if tok in self._name_posts:
                name_hit[self._name_posts[tok]] += weight
            if tok in self._desc_posts:
                desc_hit[self._desc_posts[tok]] += weight
        name_cov = np.divide(name_hit, self._name_total, out=np.zeros(n), where=self._name_total > 0)
        desc_cov = np.divide(desc_hit, self._desc_total, out=np.zeros(n), where=self._desc_total > 0)
        mention = np.zeros(n, dtype=np.float32)
        for ident in terms.identifiers & self._by_name.keys():
            mention[self._by_name[ident]] = 1.0
        for ci in self._odd_names:
            if _phrase_in(self.columns[ci].name.lower(), terms.lowered):
                mention[ci] = 1.0
        qualified = np.zeros(n, dtype=np.float32)
        for ci in np.flatnonzero(mention).tolist():
            if _phrase_in(self._qualified[ci], terms.lowered):
                qualified[ci] = 1.0
        value_hit = np.zeros(n, dtype=np.float32)
        for literal in terms.literals & self._by_value.keys():
            value_hit[self._by_value[literal]] = 1.0
        return {"name_cov": name_cov.astype(np.float32), "desc_cov": desc_cov.astype(np.float32), "mention": mention,
                "qualified": qualified, "value_hit": value_hit}

    def table_features(self, terms: QueryTerms) -> dict[str, np.ndarray]:
        """Per table: name coverage, exact mention, and how much of the question its vocabulary covers."""
        n = len(self.tables)
        name_cov = np.zeros(n, dtype=np.float32)
        mention = np.zeros(n, dtype=np.float32)
        coverage = np.zeros(n, dtype=np.float32)
        qwords = [w for w in terms.words if w in self._tidf]
        total = sum(self._tidf[w] for w in qwords) or 1.0
        matched = self.matched_tokens(terms.words)
        for ti, table in enumerate(self.tables):
            name_cov[ti] = self._coverage(table.name_words, matched)
            mention[ti] = float(self._mentioned(table.name, terms))
            vocab = self.table_vocab[ti]
            coverage[ti] = sum(self._tidf[w] for w in qwords if w in vocab) / total
        return {"name_cov": name_cov, "mention": mention, "coverage": coverage}

    def residual_coverage(self, terms: QueryTerms, top: int) -> np.ndarray:
        """Per table: the IDF-weighted share of question words its vocabulary holds and table ``top``'s
        does not (what a second table would be needed for)."""
        qwords = [w for w in terms.words if w in self._tidf and w not in self.table_vocab[top]]
        total = sum(self._tidf[w] for w in terms.words if w in self._tidf) or 1.0
        return np.array([sum(self._tidf[w] for w in qwords if w in vocab) / total for vocab in self.table_vocab],
                        dtype=np.float32)

    def novelty(self, terms: QueryTerms, order: np.ndarray) -> np.ndarray:
        """Per column, visited in ``order`` (best first): the IDF-weighted share of the question's
        matched tokens it holds that no column before it did (a second column the question needs
        names something the first does not)."""
        matched = self.matched_tokens(terms.words)
        total = sum(self.idf(t) * m for t, m in matched.items()) or 1.0
        covered: set[str] = set()
        out = np.zeros(len(self.columns), dtype=np.float32)
        holds = np.zeros(len(self.columns), dtype=bool)  # a column holding no matched token adds nothing
        for tok in matched:
            for posts in (self._name_posts, self._desc_posts):
                if tok in posts:
                    holds[posts[tok]] = True
        for ci in order[holds[order]].tolist():
            col = self.columns[ci]
            new = {t for t in (*col.name_words, *col.desc_words) if t in matched and t not in covered}
            out[ci] = sum(self.idf(t) * matched[t] for t in new) / total
            covered |= new
        return out

    def overlap(self, terms: QueryTerms, idf: dict[str, float]) -> float:
        """Sum of ``idf`` over question words this snapshot's vocabulary contains (routing)."""
        return float(sum(idf.get(w, 0.0) for w in terms.words if w in self.vocabulary))
