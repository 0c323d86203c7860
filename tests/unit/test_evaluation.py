"""Scoring a datasource's gold questions (nl2sql_assets/pipeline/evaluation.py), and the demo's questions.

The scoring is pure, so a small fake retriever stands in here; the check through the real
retriever, Chroma and Dagster is tests/dagster/test_retrieval_quality_check.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from nl2sql_assets.config import EvaluationConfig, EvaluationQuestion, parse_datasources
from nl2sql_assets.demo import DEMO_DATASOURCE_IDS
from nl2sql_assets.demo.build import demo_datasources_document
from nl2sql_assets.demo.dataset import load_source
from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.pipeline.evaluation import evaluate_retrieval, score_question
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrievalResult, RetrievedTable


def table(name: str, *columns: str, schema: str | None = "main") -> RetrievedTable:
    return RetrievedTable(name=name, schema=schema, score=0.5, columns=list(columns))


class FakeRetriever:
    """Answers each question with a fixed result; records the requests it was given."""

    def __init__(self, answers: dict[str, RetrievalResult] | Exception) -> None:
        self.answers = answers
        self.requests: list[RetrievalRequest] = []

    def retrieve_batch(self, requests: Sequence[RetrievalRequest]) -> list[RetrievalResult]:
        self.requests.extend(requests)
        if isinstance(self.answers, Exception):
            raise self.answers
        return [self.answers[r.question] for r in requests]


def answer(question: str, *tables: RetrievedTable, fallback: str | None = None) -> RetrievalResult:
    return RetrievalResult(question=question, datasource="shop", schema_version="v2", tables=list(tables),
                           fallback=fallback)


QUESTIONS = [
    EvaluationQuestion(question="Top customers by order total", tables=["customers", "orders"],
                       columns=["orders.customer_id", "orders.total"]),
    EvaluationQuestion(question="Revenue per product", tables=["order_items", "products"],
                       columns=["order_items.line_total"]),
    EvaluationQuestion(question="Open carts", tables=["carts"]),
]
ANSWERS = {
    "Top customers by order total": answer("Top customers by order total", table("orders", "order_id", "customer_id"),
                                           table("customers", "customer_id", "name"), table("addresses", "city")),
    "Revenue per product": answer("Revenue per product", table("products", "product_id", "name")),
    "Open carts": answer("Open carts", table("carts", "cart_id", "status")),
}


def test_scores_recall_misses_and_what_was_sent() -> None:
    retriever = FakeRetriever(ANSWERS)
    config = EvaluationConfig(severity="error", min_table_recall=0.6, questions=QUESTIONS)
    report = evaluate_retrieval(retriever, "shop", "v2", config, tenant="acme")
    # every question asked once, scoped to the datasource, the version just made live and the tenant
    assert [(r.datasource, r.schema_version, r.tenant) for r in retriever.requests] == [("shop", "v2", "acme")] * 3
    assert (report.questions, report.questions_passed) == (3, 2)
    assert report.table_recall == pytest.approx(2 / 3, abs=1e-4)   # questions with every gold table sent
    assert report.table_hit_rate == pytest.approx(4 / 5, abs=1e-4)  # gold tables sent
    assert report.column_recall == pytest.approx(1 / 3, abs=1e-4)   # orders.total and order_items.line_total missed
    assert report.tables_sent_avg == pytest.approx(5 / 3, abs=1e-3)
    assert report.columns_sent_avg == pytest.approx(9 / 3, abs=1e-3)
    assert report.passed and report.severity == "error" and report.error is None
    misses = report.misses_markdown()
    assert misses.count("\n| ") == 2 and "| Revenue per product | order_items | order_items.line_total |" in misses
    assert "orders.total" in misses and "Open carts" not in misses


def test_thresholds_decide_the_verdict() -> None:
    strict = EvaluationConfig(min_table_recall=0.7, questions=QUESTIONS)
    assert not evaluate_retrieval(FakeRetriever(ANSWERS), "shop", "v2", strict).passed
    columns = EvaluationConfig(min_table_recall=0.5, min_column_recall=0.5, questions=QUESTIONS)
    assert not evaluate_retrieval(FakeRetriever(ANSWERS), "shop", "v2", columns).passed
    # no question names a column: the column threshold has nothing to judge
    tables_only = EvaluationConfig(min_column_recall=1.0, questions=[QUESTIONS[2]])
    report = evaluate_retrieval(FakeRetriever(ANSWERS), "shop", "v2", tables_only)
    assert report.passed and report.column_recall is None and report.misses_markdown() == ""


def test_a_full_schema_fallback_earns_no_credit_but_small_schema_does() -> None:
    q = EvaluationQuestion(question="Open carts", tables=["carts"], columns=["carts.status"])
    full = answer("Open carts", table("carts", "status"), table("orders"), fallback="vector_store_unavailable")
    outcome = score_question(q, full)
    assert outcome.missed_tables == ["carts"] and outcome.missed_columns == ["carts.status"]
    assert outcome.tables_sent == ["main.carts", "main.orders"]
    small = answer("Open carts", table("carts", "status"), fallback="small_schema")
    assert score_question(q, small).tables_ok
    report = evaluate_retrieval(FakeRetriever({"Open carts": full}), "shop", "v2", EvaluationConfig(questions=[q]))
    assert report.fallbacks == 1 and "full schema (vector_store_unavailable)" in report.misses_markdown()


def test_names_match_case_insensitively_and_a_schema_only_when_given() -> None:
    sent = answer("q", table("Orders", "Total", schema="sales"))
    assert score_question(EvaluationQuestion(question="q", tables=["orders"], columns=["orders.total"]), sent).tables_ok
    assert score_question(EvaluationQuestion(question="q", tables=["SALES.orders"]), sent).tables_ok
    missed = score_question(EvaluationQuestion(question="q", tables=["main.orders"], columns=["main.orders.total"]), sent)
    assert missed.missed_tables == ["main.orders"] and missed.missed_columns == ["main.orders.total"]


def test_a_retriever_that_fails_is_a_failed_report_not_an_exception() -> None:
    config = EvaluationConfig(questions=QUESTIONS)
    report = evaluate_retrieval(FakeRetriever(RetrievalError("boom")), "shop", "v2", config)
    assert not report.passed and report.error == "RetrievalError: boom"
    assert (report.questions, report.table_recall, report.column_recall) == (0, 0.0, None)


def test_markdown_cells_cannot_break_the_table() -> None:
    q = EvaluationQuestion(question="a | b\nc", tables=["t"])
    report = evaluate_retrieval(FakeRetriever({"a | b\nc": answer("a | b\nc")}), "s", "v", EvaluationConfig(questions=[q]))
    assert "| a \\| b c | t | - | - |" in report.misses_markdown()


@pytest.mark.parametrize("source_id", DEMO_DATASOURCE_IDS)
def test_every_demo_datasource_ships_gold_questions_naming_real_tables_and_columns(source_id: str) -> None:
    (config,) = [c for c in parse_datasources(demo_datasources_document(Path("/demo"))) if c.id == source_id]
    questions = config.evaluation.questions
    assert 4 <= len(questions) <= 6 and any(q.columns for q in questions)
    source = load_source(source_id)
    columns = {t.name: {c.name for c in t.columns} for t in source.tables}
    for q in questions:
        assert set(q.tables) <= set(columns), q.question
        for gold in q.columns:
            table_name, column = gold.split(".")
            assert column in columns[table_name], gold
