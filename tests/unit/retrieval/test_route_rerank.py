"""Routing's second look: the best routed candidates scored against their own schemas.

Real SQLite schema store and real embedded Chroma; the HashEmbedder stands in for the model
(the shipped weights run with the real model in tests/integration/test_retriever.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.retrieval import route_rerank
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
from nl2sql_assets.retrieval.ranking import LinearModel
from tests.chroma_server import free_port
from tests.fakes import HashEmbedder
from tests.retrieval_samples import World, generated_snapshot

QUESTION = "Which patient saw which doctor at the appointment?"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path / "world", HashEmbedder(64))
    w.add(generated_snapshot(1, datasource_id="shop", tenant="acme",
                             entities=("customer", "order", "product", "supplier", "invoice")))
    w.add(generated_snapshot(2, datasource_id="clinic", tenant="acme",
                             entities=("patient", "doctor", "appointment", "branch")))
    w.add(generated_snapshot(3, datasource_id="garage", tenant="acme",
                             entities=("vehicle", "mechanic", "repair", "part")))
    yield w
    w.close()


def test_the_second_look_can_overturn_routing_and_returns_the_winners_own_scoring(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    first = world.retriever(RetrieverConfig(route_rerank=0)).retrieve(QUESTION, tenant="acme")
    assert first.datasource == "clinic"
    # a second look that trusts routing least: the pool's weakest routed candidate wins
    monkeypatch.setattr(route_rerank, "RERANK_MODEL", LinearModel(weights=(-0.1, 0.0, 0.0, 0.0), bias=0.0))
    retriever = world.retriever(RetrieverConfig(route_rerank=2))
    result = retriever.retrieve(QUESTION, tenant="acme")
    assert result.datasource != "clinic"
    second = result.datasource
    assert [d.id for d in result.datasources][:2] == [second, "clinic"]
    scores = [d.score for d in result.datasources]
    assert scores == sorted(scores, reverse=True)
    scoped = retriever.retrieve(QUESTION, datasource=second)
    assert [(t.name, t.columns, t.score) for t in result.tables] == [(t.name, t.columns, t.score) for t in scoped.tables]
    assert result.schema_version == scoped.schema_version and result.relationships == scoped.relationships


def test_the_pool_is_the_best_route_rerank_candidates(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from nl2sql_assets.retrieval.routing import ROUTE_MODEL

    monkeypatch.setattr(route_rerank, "RERANK_MODEL", LinearModel(weights=(-0.1, 0.0, 0.0, 0.0), bias=0.0))
    for n in (2, 3):
        retriever = world.retriever(RetrieverConfig(route_rerank=n))
        [found] = retriever.route_candidates([RetrievalRequest(question=QUESTION, tenant="acme")])
        logit = ROUTE_MODEL.logit(found.features)
        by_routing = [found.names[i] for i in sorted(range(len(found.names)), key=lambda i: (-logit[i], found.names[i]))]
        result = retriever.retrieve(QUESTION, tenant="acme")
        assert result.datasource == by_routing[n - 1]  # the weakest of the n best
    off = world.retriever(RetrieverConfig(route_rerank=1)).retrieve(QUESTION, tenant="acme")
    assert off.datasource == "clinic"
    given = world.retriever(RetrieverConfig(route_rerank=3)).retrieve(QUESTION, datasource="shop")
    assert given.datasource == "shop" and [d.id for d in given.datasources] == ["shop"]  # a given datasource stays


def test_the_shipped_second_look_keeps_a_clear_question_and_a_batch_equals_single_questions(world: World) -> None:
    retriever = world.retriever()
    assert retriever.config.route_rerank >= 2
    requests = [RetrievalRequest(question=QUESTION, tenant="acme"),
                RetrievalRequest(question="Which mechanic repaired which vehicle with which part?"),
                RetrievalRequest(question="invoices of each supplier", tenant="acme")]
    batch = retriever.retrieve_batch(requests)
    assert [r.datasource for r in batch] == ["clinic", "garage", "shop"]
    single = [retriever.retrieve(r.question, tenant=r.tenant) for r in requests]
    assert [a.model_dump(exclude={"timings_ms"}) for a in batch] == [b.model_dump(exclude={"timings_ms"}) for b in single]


def test_rerank_features_are_the_scoped_confidence_inputs(world: World) -> None:
    retriever = world.retriever()
    [found] = retriever.rerank_features([RetrievalRequest(question=QUESTION, tenant="acme")], [["clinic", "shop"]])
    assert set(found) == {"clinic", "shop"}
    clinic, shop = found["clinic"], found["shop"]
    assert clinic.shape == (route_rerank.SCOPED,)
    assert clinic[0] > shop[0]  # its likeliest table is surer: the patients' schema answers the question
    scoped = retriever.retrieve(QUESTION, datasource="clinic")
    assert clinic[0] == pytest.approx(np.log(scoped.tables[0].score / (1 - scoped.tables[0].score)), abs=1e-3)


def test_the_second_look_is_skipped_when_the_vector_store_is_down(world: World, tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path / "h"), "CHROMA_HOST": "127.0.0.1",
                                  "CHROMA_PORT": str(free_port())})
    down = build_vector_store(settings, world.embeddings)
    result = world.retriever(RetrieverConfig(route_rerank=3), vector_store=down).retrieve(QUESTION, tenant="acme")
    assert result.fallback == "vector_store_unavailable" and result.warnings
    assert result.datasource == "clinic"  # routed by words alone, its full schema returned
    assert {t.name for t in result.tables} == {t.name for t in world.schema_store.get_latest("clinic").tables}
