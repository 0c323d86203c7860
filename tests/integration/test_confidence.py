"""Confidence end to end: the real ONNX model, real embedded Chroma, the bundled demo.

Tenant ``acme`` holds only ``hr`` and ``commerce``; ``globex`` holds ``support``.
"""

from __future__ import annotations

import pytest

from nl2sql_assets.demo import DEMO_QUESTIONS
from nl2sql_assets.retrieval.confidence import LOW_CONFIDENCE
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.integration.test_retriever import demo_settings, retriever  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow

UNANSWERABLE = [
    ("Which tickets breached their first-response SLA?", "acme"),
    ("How many help desk tickets were escalated to level 2 agents last week?", "acme"),
    ("What is the boiling point of tungsten?", None),
    ("Who won the 1998 football world cup final?", None),
]


def _low(result) -> bool:  # type: ignore[no-untyped-def]
    return any(w.startswith("low confidence") for w in result.warnings)


@pytest.mark.parametrize(("question", "tenant"), UNANSWERABLE)
def test_questions_the_schema_cannot_answer_get_low_confidence_and_the_warning(
        retriever: SchemaRetriever, question: str, tenant: str | None) -> None:  # noqa: F811
    result = retriever.retrieve(question, tenant=tenant)
    assert result.confidence is not None and result.confidence < LOW_CONFIDENCE, (question, result.confidence)
    assert _low(result) and result.tables                   # still answered: the planner decides


def test_the_help_desk_question_is_confident_where_the_help_desk_lives(retriever: SchemaRetriever) -> None:  # noqa: F811
    result = retriever.retrieve("Which tickets breached their first-response SLA?", tenant="globex")
    assert result.datasource == "support"
    assert result.confidence is not None and result.confidence >= LOW_CONFIDENCE and not _low(result)


def test_answerable_demo_questions_are_mostly_unwarned_and_above_the_unanswerable(
        retriever: SchemaRetriever) -> None:  # noqa: F811
    results = [retriever.retrieve(q.question) for q in DEMO_QUESTIONS]
    unwarned = [r for r in results if not _low(r)]
    assert len(unwarned) >= len(results) - 2, [(r.question, r.confidence) for r in results]
    assert sum(r.confidence >= 0.5 for r in results) >= len(results) // 2  # type: ignore[operator]
    tungsten = retriever.retrieve("What is the boiling point of tungsten?").confidence
    assert all(r.confidence > tungsten for r in results)  # type: ignore[operator]


@pytest.mark.xfail(strict=True, reason="known gap: routed among the demo's three datasources, bare questions "
                   "get little margin; with the fitted routing model (2026-12-01) 'Who reports to the head of "
                   "engineering?' 0.08 falls below 0.2, 'Which products were returned most often and why?' 0.31 "
                   "and 'Total payroll cost per department last quarter' 0.37 below 0.5")
def test_every_answerable_demo_question_is_confident(retriever: SchemaRetriever) -> None:  # noqa: F811
    results = [retriever.retrieve(q.question) for q in DEMO_QUESTIONS]
    assert all(r.confidence >= 0.5 and not _low(r) for r in results)  # type: ignore[operator]
