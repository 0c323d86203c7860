"""The learned word associations: what the fit keeps, how columns are scored, the shipped table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.retrieval.word_association import (
    MIN_DATABASES,
    Example,
    WordAssociation,
    fit,
    shipped_association,
)

COLUMNS = [("member", "id"), ("sex",), ("home", "city"), ("fee",)]


def asked(db: str, words: set[str], needed: set[str], n: int = 4) -> list[Example]:
    """``n`` questions over one schema of COLUMNS, each needing the columns named in ``needed``."""
    mask = [bool(set(c) & needed) for c in COLUMNS]
    return [Example(database=db, question_words=frozenset(words), column_words=COLUMNS, needed=mask)] * n


def test_a_pair_needed_across_enough_databases_is_learned() -> None:
    examples = [e for i in range(MIN_DATABASES) for e in asked(f"db{i}", {"female", "member"}, {"sex"})]
    examples += [e for i in range(MIN_DATABASES) for e in asked(f"db{i}", {"fee", "member"}, {"fee"})]
    table = fit(examples)
    assert table.pairs["female"]["sex"] > 0.5  # needed every time against half the time at all
    assert "fee" not in table.pairs["female"]  # never needed with "female": no association
    assert "fee" not in table.pairs.get("fee", {})  # a word is never associated with itself (lexical does that)


def test_a_pair_seen_in_too_few_databases_is_not_kept() -> None:
    examples = [e for i in range(MIN_DATABASES - 1) for e in asked(f"db{i}", {"goalie"}, {"sex"}, n=50)]
    examples += [e for i in range(MIN_DATABASES) for e in asked(f"other{i}", {"fee"}, {"fee"})]
    assert "goalie" not in fit(examples).pairs  # one schema's habit is not a rule, however often asked


def test_column_scores_take_each_columns_best_pair() -> None:
    table = WordAssociation(pairs={"female": {"sex": 1.7, "gender": 2.2}, "oldest": {"age": 1.8, "sex": 0.2}})
    postings = {"sex": np.array([1]), "age": np.array([2, 3]), "name": np.array([0])}
    scores = table.column_scores(["female", "oldest", "name"], postings, 5)
    assert scores.tolist() == [0.0, 1.7, 1.8, 1.8, 0.0]
    assert table.column_scores(["unrelated"], postings, 5).tolist() == [0.0] * 5


def test_to_json_and_load_round_trip(tmp_path: Path) -> None:
    table = WordAssociation(pairs={"female": {"sex": 1.7}})
    path = tmp_path / "a.json"
    path.write_text(json.dumps(table.to_json(questions=3)), encoding="utf-8")
    assert WordAssociation.load(path) == table


@pytest.mark.parametrize(("text", "expected"), [
    ("{not json", "cannot be read"),
    ('{"smoothing": 5}', "cannot be read"),
    ('{"pairs": {"female": {"sex": -1.0}}}', "not a positive number"),
    ('{"pairs": {"female": {"sex": "NaN"}}}', "not a positive number"),
    ('{"pairs": ["female"]}', "cannot be read"),
])
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RetrievalError, match=expected) as err:
        WordAssociation.load(path)
    assert str(path) in str(err.value)


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RetrievalError, match="missing.json"):
        WordAssociation.load(tmp_path / "missing.json")


def test_the_shipped_table_holds_general_associations() -> None:
    """Fitted on BIRD and Spider: what people imply without naming, never the word itself."""
    table = shipped_association()
    assert {"sex", "gender"} <= set(table.pairs["female"])
    assert "age" in table.pairs["youngest"] and "price" in table.pairs["expensive"]
    assert all(q not in ws for q, ws in table.pairs.items())
