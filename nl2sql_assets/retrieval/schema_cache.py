"""The per-(datasource, version) schema cache: a snapshot and the indexes retrieval builds on it.

Resolution is authoritative: tables, columns and keys come from the SchemaStore snapshot (the
version asked for, else the vector store's live version, else the latest), never from the
vector store. A snapshot's lexical index, join graph and chunk positions are built once per
(datasource, version), not per question, and kept in a small LRU (``RetrieverConfig.cache_size``);
so are the vectors of its words (word meaning), embedded on the first question that needs them.

The chunk positions are why a search needs no metadata from the vector store: the chunk builder
names every chunk of a snapshot deterministically, so a hit's id alone places it on a table, a
column or (a metric) the tables it names.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nl2sql_assets.errors import EmbeddingError, SchemaVersionNotFoundError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.retrieval import ranking
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.word_similarity import WordScores, word_scores
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.protocol import SchemaStore

log = logging.getLogger(__name__)


@dataclass
class CachedSchema:
    """What the retriever keeps per (datasource, version)."""

    snapshot: SchemaSnapshot
    index: ranking.SchemaIndex
    table_pos: dict[tuple[str, str], int]
    # chunk id -> ("table", (table index,)), ("column", (column index,)) or ("metric", its tables):
    # a search hit needs no metadata from the vector store to find its place
    chunk_pos: dict[str, tuple[str, tuple[int, ...]]]
    # the schema's words embedded one by one (index.words.tokens), on the first question that needs them
    token_vectors: np.ndarray | None = None
    # only its name words' (the first index.words.n_named tokens), for routing by meaning
    name_vectors: np.ndarray | None = None


def build_cached(snapshot: SchemaSnapshot, *, infer_joins: bool) -> CachedSchema:
    """The ranking index of ``snapshot`` and the snapshot position of each of its chunk ids."""
    index = ranking.build_schema_index(snapshot, infer_joins=infer_joins)
    table_pos: dict[tuple[str, str], int] = {}
    column_pos: dict[tuple[str, str, str], int] = {}
    ci = 0
    for ti, table in enumerate(snapshot.tables):
        table_pos[(table.schema_name or "", table.name)] = ti
        for col in table.columns:
            column_pos[(table.schema_name or "", table.name, col.name)] = ci
            ci += 1
    # the chunk builder names every chunk of this version: the ids the vector store holds
    chunk_pos: dict[str, tuple[str, tuple[int, ...]]] = {}
    try:
        chunks = build_chunks(snapshot).chunks
    except ValueError as exc:  # the indexer refused it too, so nothing is indexed: two objects of one
        # name (two tables "t" in one schema); dotted names get distinct ids and never land here
        log.warning("datasource %s: no chunks for version %s (%s)", snapshot.datasource.id,
                    snapshot.schema_version, exc)
        chunks = []
    for chunk in chunks:
        if chunk.type == "schema.table":
            ti = table_pos.get((chunk.schema_name or "", chunk.table))
            if ti is not None:
                chunk_pos[chunk.id] = ("table", (ti,))
        elif chunk.type == "schema.column":
            found = column_pos.get((chunk.schema_name or "", chunk.table, chunk.column))
            if found is not None:
                chunk_pos[chunk.id] = ("column", (found,))
        elif chunk.type == "schema.metric":
            tables = tuple(i for name in chunk.tables for (_, n), i in table_pos.items() if n == name)
            if tables:
                chunk_pos[chunk.id] = ("metric", tables)
    return CachedSchema(snapshot, index, table_pos, chunk_pos)


class SchemaCache:
    """Snapshots resolved from the SchemaStore, with their indexes, in an LRU (thread-safe).

    Args:
        store: the authoritative snapshots.
        config: ``cache_size`` and ``infer_joins`` are read from it.
        embed_words: embeds a schema's words (the retriever's model); without it the word
            features stay zero.
    """

    def __init__(self, store: SchemaStore, config: RetrieverConfig,
                 embed_words: Callable[[list[str]], np.ndarray] | None = None) -> None:
        self.store = store
        self.config = config
        self.embed_words = embed_words
        self._entries: OrderedDict[tuple[str, str], CachedSchema] = OrderedDict()
        self._lock = threading.Lock()

    def resolve(self, datasource: str, version: str | None, live: str | None) -> CachedSchema:
        """The snapshot (asked version, else live, else latest) and its indexes, from the LRU.

        A live version the store lacks falls back to the latest; an asked one raises
        :class:`SchemaVersionNotFoundError`.
        """
        if version is None:
            version = live
        if version is not None:
            key = (datasource, version)
            with self._lock:
                hit = self._entries.get(key)
                if hit is not None:
                    self._entries.move_to_end(key)
                    return hit
            try:
                snapshot = self.store.get_snapshot(datasource, version)
            except SchemaVersionNotFoundError:
                if version != live:
                    raise
                snapshot = self._latest(datasource)
        else:
            snapshot = self._latest(datasource)
        key = (datasource, str(snapshot.schema_version))
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        cached = build_cached(snapshot, infer_joins=self.config.infer_joins)
        with self._lock:
            self._entries[key] = cached
            while len(self._entries) > self.config.cache_size:
                self._entries.popitem(last=False)
        return cached

    def word_scores(self, cached: CachedSchema, word_vectors: np.ndarray | None,
                    question_words: Sequence[str] | None = None) -> WordScores | None:
        """The question's word vectors (rows: ``question_words``, whose thesaurus pairs count too)
        against the schema's words, embedded on first use per version."""
        if word_vectors is None or not len(word_vectors):
            return None
        vectors = self.token_vectors(cached, word_vectors.shape[1])
        if vectors is None:
            return None
        return word_scores(cached.index.words, vectors, word_vectors, question_words)

    def token_vectors(self, cached: CachedSchema, dim: int) -> np.ndarray | None:
        """The schema's words' vectors (``index.words.tokens``), embedded on first use per version;
        None without a model or while it fails (the next question retries)."""
        if cached.token_vectors is None:  # two threads may both embed; the vectors are the same
            cached.token_vectors = self._embed(cached, list(cached.index.words.tokens), dim)
        return cached.token_vectors

    def name_vectors(self, cached: CachedSchema, dim: int) -> np.ndarray | None:
        """The vectors of the schema's name words (``index.words.tokens[:n_named]``): from the
        whole vocabulary's when embedded, else embedded alone, so that routing over many
        datasources does not embed every description's words; None as :meth:`token_vectors`."""
        named = cached.index.words.n_named
        if cached.token_vectors is not None:
            return cached.token_vectors[:named]
        if cached.name_vectors is None:
            cached.name_vectors = self._embed(cached, list(cached.index.words.tokens[:named]), dim)
        return cached.name_vectors

    def _embed(self, cached: CachedSchema, tokens: list[str], dim: int) -> np.ndarray | None:
        """``tokens``' vectors; None without a model or when it fails (the answer goes on without
        word meaning, and the next question retries)."""
        if self.embed_words is None:
            return None
        if not tokens:
            return np.zeros((0, dim), dtype=np.float32)
        try:
            return np.asarray(self.embed_words(tokens), dtype=np.float32)
        except EmbeddingError as exc:
            log.warning("datasource %s: word meaning unavailable this time: %s",
                        cached.snapshot.datasource.id, exc)
            return None

    def _latest(self, datasource: str) -> SchemaSnapshot:
        snapshot = self.store.get_latest(datasource)
        if snapshot is None:
            raise SchemaVersionNotFoundError(datasource, None)
        return snapshot
