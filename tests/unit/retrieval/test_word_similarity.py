"""Word meaning: question words matched one by one against the schema's words, with the real local
model and with hand-made vectors (exact arithmetic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.retrieval.lexical import LexicalIndex, build_query_terms
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.word_similarity import (
    MAX_QUESTION_WORDS,
    SIM_FLOOR,
    SchemaWords,
    WordVectorCache,
    question_words,
    word_scores,
)
from nl2sql_assets.schema.models import Column, DatasourceInfo, SchemaSnapshot, Table
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.retrieval_samples import CAPTURED


def _snapshot() -> SchemaSnapshot:
    def table(name: str, *columns: str) -> Table:
        return Table(name=name, columns=[Column(name=c, type_family="text") for c in columns])

    return SchemaSnapshot.create(DatasourceInfo(id="music", dialect="sqlite"), [
        table("singer", "singer_id", "name", "country", "age"),
        table("stadium", "stadium_id", "location", "capacity"),
        table("concert", "concert_id", "stadium_id", "year")], CAPTURED)


def test_question_words_are_alphabetic_stems_of_three_letters_or_more() -> None:
    terms = build_query_terms("How many vocalists from France sang in 2019 at the O2?")
    assert question_words(terms) == ["france", "sang", "vocalist"]
    many = build_query_terms(" ".join(f"word{chr(97 + i)}{'x' * i}" for i in range(20))
                             + " " + " ".join(f"term{'y' * i}" for i in range(40)))
    kept = question_words(many)
    assert len(kept) == MAX_QUESTION_WORDS and kept == sorted(kept)
    assert "term" + "y" * 39 in kept and "term" not in kept  # the longest words are kept


def test_schema_words_list_each_name_word_once_with_weights_summing_to_one() -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical)
    assert len(set(words.tokens)) == len(words.tokens)
    assert {"singer", "stadium", "concert", "country", "age", "capacity", "location", "year", "id"} <= set(words.tokens)
    sums = np.bincount(words.col_owner, weights=words.col_weight, minlength=words.n_columns)
    assert np.allclose(sums, 1.0)
    assert np.allclose(np.bincount(words.table_owner, weights=words.table_weight), 1.0)
    assert (np.diff(words.vocab_table) >= 0).all()  # sorted by table for the per-table maxima


def test_scores_count_each_word_from_the_floor_up_and_the_same_word_fully() -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical)
    # hand-made vectors: "vocalist" is 0.8 like "singer"; "nationality" 0.6 like "country"; the rest apart
    basis = {tok: np.eye(len(words.tokens) + 2)[i] for i, tok in enumerate(words.tokens)}
    tokens = np.vstack([basis[t] for t in words.tokens])
    dim = tokens.shape[1]
    vocalist = 0.8 * basis["singer"] + 0.6 * np.eye(dim)[-1]
    nationality = 0.6 * basis["country"] + 0.8 * np.eye(dim)[-2]
    scores = word_scores(words, tokens, np.vstack([vocalist, nationality]))
    names = [f"{lexical.tables[lexical.column_table[i]].name}.{c.name}" for i, c in enumerate(lexical.columns)]
    by_name = dict(zip(names, scores.column_name.tolist(), strict=True))
    strength = {0.8: (0.8 - SIM_FLOOR) / (1 - SIM_FLOOR), 0.6: (0.6 - SIM_FLOOR) / (1 - SIM_FLOOR)}
    assert by_name["singer.country"] == pytest.approx(strength[0.6])
    assert by_name["stadium.capacity"] == 0.0 and by_name["concert.year"] == 0.0
    assert 0.0 < by_name["singer.singer_id"] < strength[0.8]  # "singer" is one of its two words
    table = dict(zip([t.name for t in lexical.tables], scores.table_name.tolist(), strict=True))
    assert table == {"singer": pytest.approx(strength[0.8]), "stadium": 0.0, "concert": 0.0}
    coverage = dict(zip([t.name for t in lexical.tables], scores.table_coverage.tolist(), strict=True))
    # each question word by its best word of the table, averaged: singer means both words
    assert coverage["singer"] == pytest.approx((strength[0.8] + strength[0.6]) / 2)
    assert coverage["stadium"] == 0.0 and coverage["concert"] == 0.0


def test_the_residual_is_what_a_table_means_beyond_the_likeliest_one() -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical)
    basis = {tok: np.eye(len(words.tokens))[i] for i, tok in enumerate(words.tokens)}
    tokens = np.vstack([basis[t] for t in words.tokens])
    # "singer" is in singer's and (as singer_id) nowhere else; "capacity" only in stadium's
    scores = word_scores(words, tokens, np.vstack([basis["singer"], basis["capacity"]]))
    names = [t.name for t in lexical.tables]
    by_table = dict(zip(names, scores.table_by_word.tolist(), strict=True))
    assert by_table["singer"] == [1.0, 0.0] and by_table["stadium"] == [0.0, 1.0]
    residual = dict(zip(names, scores.residual(names.index("singer")).tolist(), strict=True))
    assert residual == {"singer": 0.0, "stadium": 0.5, "concert": 0.0}
    none = word_scores(words, tokens, np.zeros((0, tokens.shape[1])))
    assert none.residual(0).tolist() == [0.0, 0.0, 0.0]


def test_no_question_words_or_no_schema_words_score_nothing() -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical)
    none = word_scores(words, np.eye(len(words.tokens)), np.zeros((0, len(words.tokens))))
    assert none.column_name.shape == (len(lexical.columns),) and not none.column_name.any()
    assert not none.table_name.any() and not none.table_coverage.any()
    empty = SchemaWords.build(LexicalIndex(SchemaSnapshot.create(DatasourceInfo(id="e", dialect="sqlite"), [],
                                                                 CAPTURED)))
    assert word_scores(empty, np.zeros((0, 3)), np.ones((1, 3))).table_name.shape == (0,)


@pytest.mark.slow
def test_the_local_model_relates_synonyms_not_unrelated_words(model_provider: object) -> None:  # noqa: F811
    """The premise of the feature, on the shipped model: the question's word means the schema word
    a user replaced, more than the other words of the schema."""
    service = EmbeddingService(model_provider)  # type: ignore[arg-type]
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical)
    tokens = service.embed_documents(list(words.tokens)).vectors
    for question, column in [("How many vocalists are there?", "singer.name"),
                             ("What is the nationality of each performer?", "singer.country"),
                             ("How old is each performer?", "singer.age"),
                             ("Which arena hosted the most shows?", "stadium.stadium_id")]:
        qw = question_words(build_query_terms(question))
        scores = word_scores(words, tokens, service.embed_queries(qw))
        table = column.split(".")[0]
        t_scores = dict(zip([t.name for t in lexical.tables], scores.table_coverage.tolist(), strict=True))
        assert t_scores[table] == max(t_scores.values()) > 0, (question, t_scores)
        if column.split(".")[1] not in ("name", "stadium_id"):  # "vocalists" means the table, not "name"
            c_names = [f"{lexical.tables[lexical.column_table[i]].name}.{c.name}" for i, c in enumerate(lexical.columns)]
            best = c_names[int(np.argmax(scores.column_name))]
            assert best == column, (question, dict(zip(c_names, scores.column_name.round(2).tolist(), strict=True)))


def test_the_retriever_embeds_a_schemas_words_once_per_version_and_not_when_turned_off(tmp_path: Path) -> None:
    from tests.fakes import HashEmbedder
    from tests.retrieval_samples import World, generated_snapshot

    world = World(tmp_path / "w", HashEmbedder(64))
    try:
        world.add(generated_snapshot(1, datasource_id="shop", entities=("customer", "order", "product")))
        calls: list[list[str]] = []
        embed = world.embeddings.embed_documents

        def counting(texts):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return embed(texts)

        world.embeddings.embed_documents = counting  # type: ignore[method-assign]
        retriever = world.retriever()
        first = retriever.retrieve("customers who ordered products", datasource="shop")
        retriever.retrieve("orders per customer city", datasource="shop")
        cached = retriever._schemas.resolve("shop", first.schema_version, None)
        assert cached.token_vectors is not None and len(cached.token_vectors) == len(cached.index.words.tokens)
        assert calls == [list(cached.index.words.tokens)]  # once, for both questions
        calls.clear()
        off = world.retriever(RetrieverConfig(word_meaning=False))
        assert off.retrieve("customers who ordered products", datasource="shop").tables
        assert calls == []
    finally:
        world.close()


def test_question_words_are_embedded_once_then_come_from_memory() -> None:
    from nl2sql_assets.retrieval.models import RetrievalRequest
    from nl2sql_assets.retrieval.query import build_semantic_query, embed_queries
    from tests.fakes import HashEmbedder

    calls: list[list[str]] = []

    class Counting:
        def embed_queries(self, texts):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return HashEmbedder(16).embed(list(texts))

    cache = WordVectorCache(capacity=3)
    first = build_semantic_query(RetrievalRequest(question="How many vocalists sang?"))
    embed_queries([first], Counting(), cache)  # type: ignore[arg-type]
    assert calls == [["How many vocalists sang?", "sang", "vocalist"]]
    assert first.word_vectors is not None and first.word_vectors.shape == (2, 16)
    again = build_semantic_query(RetrievalRequest(question="Which vocalists sang twice?"))
    embed_queries([again], Counting(), cache)  # type: ignore[arg-type]
    assert calls[1] == ["Which vocalists sang twice?", "twice"]  # the known words from memory
    assert np.array_equal(again.word_vectors[again.words.index("vocalist")],  # type: ignore[index]
                          first.word_vectors[first.words.index("vocalist")])
    assert cache.lookup(["sang", "vocalist", "twice"])[1] == []
    cache.put(["arena"], np.ones((1, 16)))  # capacity 3: the least recently used word goes
    assert cache.lookup(["sang", "vocalist", "twice", "arena"])[1] == ["sang"]
    off = build_semantic_query(RetrievalRequest(question="How many vocalists sang?"))
    embed_queries([off], Counting(), None)  # type: ignore[arg-type]
    assert calls[2] == ["How many vocalists sang?"] and off.word_vectors is None


def test_a_failure_to_embed_the_schemas_words_answers_without_them_and_is_retried(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from nl2sql_assets.errors import EmbeddingError
    from tests.fakes import HashEmbedder
    from tests.retrieval_samples import World, generated_snapshot

    world = World(tmp_path / "w", HashEmbedder(64))
    try:
        world.add(generated_snapshot(1, datasource_id="shop", entities=("customer", "order", "product")))
        embed = world.embeddings.embed_documents
        down = [True]

        def flaky(texts):  # type: ignore[no-untyped-def]
            if down[0]:
                raise EmbeddingError("provider unreachable (test)")
            return embed(texts)

        world.embeddings.embed_documents = flaky  # type: ignore[method-assign]
        retriever = world.retriever()
        result = retriever.retrieve("customers who ordered products", datasource="shop")
        assert result.tables and result.fallback is None
        assert "word meaning unavailable this time: provider unreachable (test)" in caplog.text
        cached = retriever._schemas.resolve("shop", result.schema_version, None)
        assert cached.token_vectors is None
        down[0] = False
        retriever.retrieve("customers who ordered products", datasource="shop")
        assert cached.token_vectors is not None  # retried on the next question
    finally:
        world.close()
