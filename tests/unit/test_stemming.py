"""The plural stemmer: a plural question word must reach the singular schema word, and back."""

from __future__ import annotations

import pytest

from nl2sql_assets.retrieval.lexical import LexicalIndex, build_query_terms
from nl2sql_assets.schema.models import Column, DatasourceInfo, SchemaSnapshot, Table
from nl2sql_assets.stemming import stem
from tests.retrieval_samples import CAPTURED


@pytest.mark.parametrize(("plural", "singular"), [
    ("schools", "school"), ("countries", "country"), ("classes", "class"), ("addresses", "address"),
    ("courses", "course"), ("purchases", "purchase"), ("houses", "house"), ("cases", "case"),
    ("sizes", "size"), ("prizes", "prize"), ("premises", "premise"),
    ("matches", "match"), ("branches", "branch"), ("dishes", "dish"), ("boxes", "box"),
    ("taxes", "tax"), ("buzzes", "buzz"), ("statuses", "status"), ("buses", "bus"),
    ("campuses", "campus"), ("movies", "movie"), ("cookies", "cookie"), ("goalies", "goalie"),
    ("categories", "category"), ("companies", "company"), ("ties", "tie"),
])
def test_a_plural_stems_to_its_singular_and_the_singular_to_itself(plural: str, singular: str) -> None:
    assert stem(plural) == singular
    assert stem(singular) == singular


@pytest.mark.parametrize("word", ["status", "axis", "class", "bus", "analysis", "is", "us", "yes"])
def test_words_that_only_look_plural_are_kept(word: str) -> None:
    assert stem(word) == word


def snapshot() -> SchemaSnapshot:
    tables = [Table(name=name, primary_key=["id"], columns=[Column(name="id", type_family="integer"),
                                                             Column(name="title", type_family="text")])
              for name in ("course", "match", "movie", "warehouse")]
    return SchemaSnapshot.create(DatasourceInfo(id="s", dialect="sqlite"), tables, CAPTURED)


@pytest.mark.parametrize(("question", "table"), [
    ("List the titles of all courses.", "course"),
    ("How many matches were played?", "match"),
    ("Which movies came out last year?", "movie"),
    ("Count the warehouses.", "warehouse"),
])
def test_a_plural_in_the_question_names_the_singular_table(question: str, table: str) -> None:
    index = LexicalIndex(snapshot())
    features = index.table_features(build_query_terms(question))
    names = [t.name for t in index.tables]
    assert features["name_cov"][names.index(table)] == 1.0
    assert sum(features["name_cov"] == 1.0) == 1  # that table alone
