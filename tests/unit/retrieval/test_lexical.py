"""Lexical evidence: words, abbreviations, mentions, literal types and sampled values."""

from __future__ import annotations

import numpy as np
import pytest

from nl2sql_assets.retrieval.lexical import LexicalIndex, abbreviates, build_query_terms, stem, words
from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, SchemaSnapshot, Table
from tests.retrieval_samples import CAPTURED


def schools() -> SchemaSnapshot:
    frpm = Table(name="frpm", primary_key=["CDSCode"], columns=[
        Column(name="CDSCode", type_family="text"),
        Column(name="County Name", type_family="text"),
        Column(name="Free Meal Count (K-12)", type_family="float"),
        Column(name="Enrollment (K-12)", type_family="float"),
    ])
    sat = Table(name="satscores", primary_key=["cds"], columns=[
        Column(name="cds", type_family="text"),
        Column(name="AvgScrMath", type_family="integer", description="average scores in Math"),
        Column(name="NumTstTakr", type_family="integer"),
        Column(name="cname", type_family="text", description="county name",
               stats=ColumnStats(distinct_count=3, top_values=["Alameda", "Fresno", "Kern"])),
        Column(name="ssn", type_family="text", pii=True, stats=ColumnStats(top_values=["123-45-6789"])),
    ])
    schools = Table(name="schools", primary_key=["CDSCode"], columns=[
        Column(name="CDSCode", type_family="text"),
        Column(name="OpenDate", type_family="date"),
        Column(name="City", type_family="text"),
    ])
    return SchemaSnapshot.create(DatasourceInfo(id="ca", dialect="sqlite"), [frpm, sat, schools], CAPTURED)


def col(index: LexicalIndex, table: str, column: str) -> int:
    for ci, c in enumerate(index.columns):
        if c.name == column and index.tables[index.column_table[ci]].name == table:
            return ci
    raise KeyError(column)


def test_words_split_identifiers_and_drop_stopwords() -> None:
    assert words("What is the NumTstTakr of schools_in_Fresno?") == ["num", "tst", "takr", "school", "fresno"]
    assert stem("categories") == "category" and stem("status") == "status"


def test_abbreviations_match_but_unrelated_words_do_not() -> None:
    assert abbreviates("tst", "test") and abbreviates("takr", "taker") and abbreviates("num", "number")
    assert not abbreviates("to", "total")          # too short
    assert not abbreviates("rate", "rate")         # the same word is not an abbreviation
    assert not abbreviates("cnt", "account")       # must start alike


def test_query_terms_split_evidence_and_find_literals() -> None:
    terms = build_query_terms("How many schools in 'Alameda' opened on 2001/09/01 at 10:30?",
                              "opened refers to OpenDate; count schools")
    assert terms.segments == ("How many schools in 'Alameda' opened on 2001/09/01 at 10:30?",
                              "opened refers to OpenDate", "count schools")
    assert "Alameda" in terms.entities and "alameda" in terms.literals
    assert terms.has_date and terms.has_time and not terms.has_year
    assert build_query_terms("Races in 1999").has_year


@pytest.mark.parametrize(("question", "whole"), [
    ("What is all the information about the Marketing department?", True),
    ("List all info about all people.", True),
    ("Show every detail of order 12", True),
    ("Give me the full record of each flight", True),
    ("Tell me everything about the singers from France", True),
    ("What are the names of all departments?", False),
    ("How many records are there?", False),
    ("Show the details of the most recent order", False),  # which details: the budget decides
])
def test_a_question_for_all_the_information_asks_for_whole_rows(question: str, whole: bool) -> None:
    assert build_query_terms(question).whole_rows is whole


def test_evidence_never_asks_for_whole_rows() -> None:
    """Only what the question asks for counts, not the wording of its evidence."""
    assert build_query_terms("Which orders?", evidence="everything refers to all data").whole_rows is False
    assert build_query_terms("Everything about orders?", evidence="orders refers to sales").whole_rows is True


def test_exact_and_qualified_mentions_including_names_with_spaces() -> None:
    index = LexicalIndex(schools())
    terms = build_query_terms("Rate?", "rate = `Free Meal Count (K-12)` / frpm.`Enrollment (K-12)`; see satscores.cds")
    feats = index.column_features(terms)
    assert feats["mention"][col(index, "frpm", "Free Meal Count (K-12)")] == 1.0
    assert feats["mention"][col(index, "satscores", "cds")] == 1.0
    assert feats["qualified"][col(index, "satscores", "cds")] == 1.0
    assert feats["qualified"][col(index, "frpm", "Free Meal Count (K-12)")] == 0.0
    assert feats["mention"][col(index, "frpm", "County Name")] == 0.0


def test_abbreviated_column_names_are_covered_by_plain_words() -> None:
    index = LexicalIndex(schools())
    feats = index.column_features(build_query_terms("number of test takers with an average score in math"))
    assert feats["name_cov"][col(index, "satscores", "NumTstTakr")] > 0.7
    assert feats["desc_cov"][col(index, "satscores", "AvgScrMath")] == 1.0
    assert feats["name_cov"][col(index, "schools", "City")] == 0.0


def test_literal_values_match_sampled_values_but_never_pii_columns() -> None:
    index = LexicalIndex(schools())
    feats = index.column_features(build_query_terms("Schools in Alameda with ssn '123-45-6789'"))
    assert feats["value_hit"][col(index, "satscores", "cname")] == 1.0
    assert feats["value_hit"][col(index, "satscores", "ssn")] == 0.0
    assert np.count_nonzero(feats["value_hit"]) == 1


def test_table_features_and_routing_overlap() -> None:
    index = LexicalIndex(schools())
    terms = build_query_terms("Which satscores rows have the best math score?")
    tf = index.table_features(terms)
    names = [t.name for t in index.tables]
    assert tf["mention"][names.index("satscores")] == 1.0
    assert tf["coverage"][names.index("satscores")] > tf["coverage"][names.index("schools")]
    assert index.overlap(terms, {"math": 2.0, "zebra": 5.0}) == 2.0


def test_literal_type_flags_mark_date_and_year_columns() -> None:
    index = LexicalIndex(schools())
    is_date, is_year = index.flags[:, 0], index.flags[:, 1]
    assert is_date[col(index, "schools", "OpenDate")] == 1.0 and is_year[col(index, "schools", "OpenDate")] == 1.0
    assert is_date[col(index, "schools", "City")] == 0.0


def test_name_flag_marks_text_columns_called_a_name() -> None:
    snap = SchemaSnapshot.create(DatasourceInfo(id="f1", dialect="sqlite"), [Table(name="drivers", columns=[
        Column(name="forename", type_family="text"),
        Column(name="surname", type_family="text"),
        Column(name="AdmLName1", type_family="text", description="administrator last name"),
        Column(name="nationality", type_family="text"),
        Column(name="name_length", type_family="integer"),
    ])], CAPTURED)
    index = LexicalIndex(snap)
    is_name = {c.name: float(index.flags[i, 4]) for i, c in enumerate(index.columns)}
    assert is_name == {"forename": 1.0, "surname": 1.0, "AdmLName1": 1.0, "nationality": 0.0, "name_length": 0.0}


def test_person_flag_marks_text_columns_of_peoples_names() -> None:
    """Name parts and a name beside a person's role; not every name (a team's, a product's), not a
    number, not a login."""
    snap = SchemaSnapshot.create(DatasourceInfo(id="people", dialect="sqlite"), [Table(name="t", columns=[
        Column(name="forename", type_family="text"),
        Column(name="last_name", type_family="text"),
        Column(name="OwnerDisplayName", type_family="text"),
        Column(name="player_name", type_family="text"),
        Column(name="team_long_name", type_family="text"),
        Column(name="name", type_family="text"),
        Column(name="username", type_family="text"),
        Column(name="surname_length", type_family="integer"),
    ])], CAPTURED)
    index = LexicalIndex(snap)
    is_person = {c.name for i, c in enumerate(index.columns) if index.flags[i, 5]}
    assert is_person == {"forename", "last_name", "OwnerDisplayName", "player_name"}


def test_place_flag_marks_text_columns_named_or_described_as_places() -> None:
    snap = SchemaSnapshot.create(DatasourceInfo(id="places", dialect="sqlite"), [Table(name="t", columns=[
        Column(name="City", type_family="text"),
        Column(name="MailState", type_family="text"),
        Column(name="A3", type_family="text", description="region"),
        Column(name="A4", type_family="text", description="number of inhabitants"),
        Column(name="county_id", type_family="integer"),
        Column(name="segment", type_family="text"),
    ])], CAPTURED)
    index = LexicalIndex(snap)
    assert {c.name for i, c in enumerate(index.columns) if index.flags[i, 6]} == {"City", "MailState", "A3"}


def test_residual_coverage_is_what_a_second_table_explains_beyond_the_first() -> None:
    index = LexicalIndex(schools())
    names = [t.name for t in index.tables]
    terms = build_query_terms("Average math score of schools opened in the city of Fresno")
    after_sat = index.residual_coverage(terms, names.index("satscores"))
    # satscores explains average/math/score; schools adds school/city; frpm adds nothing new
    assert after_sat[names.index("satscores")] == 0.0 and after_sat[names.index("frpm")] == 0.0
    assert after_sat[names.index("schools")] > 0.0
    after_schools = index.residual_coverage(terms, names.index("schools"))
    assert after_schools[names.index("satscores")] > after_schools[names.index("schools")] == 0.0


def test_novelty_credits_only_what_better_columns_did_not_already_name() -> None:
    index = LexicalIndex(schools())
    terms = build_query_terms("Average math score and number of test takers per county name")
    math, takers = col(index, "satscores", "AvgScrMath"), col(index, "satscores", "NumTstTakr")
    county = col(index, "frpm", "County Name")
    cname = col(index, "satscores", "cname")  # described as "county name": the same words as County Name
    rest = [i for i in range(len(index.columns)) if i not in (math, takers, county, cname)]
    novelty = index.novelty(terms, np.array([math, takers, county, cname, *rest]))
    assert novelty[math] > 0 and novelty[takers] > 0 and novelty[county] > 0
    assert novelty[cname] == 0.0  # everything it names was named before it
    swapped = index.novelty(terms, np.array([cname, county, math, takers, *rest]))
    assert swapped[cname] > 0 and swapped[county] == 0.0


def test_matched_tokens_are_reused_for_the_same_question_and_never_leak_into_another() -> None:
    index = LexicalIndex(schools())
    maths = build_query_terms("average math score per county")
    first = index.matched_tokens(maths.words)
    assert first["math"] == 1.0 and first["avg"] == 0.8  # "avg" abbreviates "average"
    assert index.matched_tokens(maths.words) is first  # the three feature builders share one computation
    other = index.matched_tokens(build_query_terms("schools opened in Fresno").words)
    assert "math" not in other and "school" in other
    assert dict(index.matched_tokens(maths.words)) == dict(first)  # recomputed after another question
    with pytest.raises(TypeError):  # callers cannot corrupt the reused matches
        first["math"] = 0.0  # type: ignore[index]


def test_apostrophes_of_contractions_and_possessives_quote_nothing() -> None:
    """A single quote opens after a non-word character only: "What's ... Senna's" is no quotation,
    a possessive ends a name, and a quoted name keeps its own apostrophe."""
    terms = build_query_terms("What's Bruno Senna's Q1 result in the 'Journey into Nyx Hero's Path' set?",
                              "driver's name refers to surname = 'Senna'")
    assert terms.entities == ("Journey into Nyx Hero's Path", "Bruno Senna", "Q1")
    assert terms.literals == {"journey into nyx hero's path", "bruno senna", "q1", "senna"}
    assert build_query_terms('Who owns the card "Ancestor\'s Chosen"?').entities == ("Ancestor's Chosen",)
    assert build_query_terms("What's the Italian name of Lewis Hamilton's team?").entities == ("Italian", "Lewis Hamilton")
    assert build_query_terms("Which drivers' points were the highest?").entities == ()
