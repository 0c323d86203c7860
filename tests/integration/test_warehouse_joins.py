"""Joins in a warehouse without declared keys, on real SQLite and DuckDB files.

The generated warehouse (``tests/fixtures/warehouse.py``: 104 tables, ``*_KEY`` surrogate keys,
no declared primary or foreign key) is snapshotted through the adapters: joins are inferred
from names and checked on sampled values, stored as ``source="inferred"``, leave drift alone,
and the retriever bridges along them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.drift import check_drift
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.retrieval.join_paths import JoinGraph
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.store import SqlSchemaStore, build_schema_store
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.fixtures.warehouse import GOLD_JOINS, QUESTIONS, build_warehouse

NOW = datetime(2026, 12, 1, tzinfo=UTC)
GENERIC = {"DESCRIPTION", "SOURCE_SYSTEM_ID", "CREATED_AT", "UPDATED_AT", "ETL_BATCH_ID"}


@pytest.fixture(scope="module", params=["sqlite", "duckdb"])
def warehouse(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[DatasourceConfig, SchemaSnapshot]:
    path = build_warehouse(tmp_path_factory.mktemp("warehouse") / f"w.{request.param}", request.param)
    config = DatasourceConfig(id="warehouse", url=f"{request.param}:///{path}")
    adapter = open_adapter(config)
    try:
        return config, adapter.read_snapshot(NOW)
    finally:
        adapter.close()


def _joins(snapshot: SchemaSnapshot) -> set[tuple[str, str, str, str]]:
    return {(t.name, fk.columns[0], fk.ref_table, fk.ref_columns[0])
            for t in snapshot.tables for fk in t.foreign_keys}


def test_inferred_joins_match_the_gold_joins(warehouse: tuple[DatasourceConfig, SchemaSnapshot]) -> None:
    _, snapshot = warehouse
    assert len(snapshot.tables) >= 100
    fks = [fk for t in snapshot.tables for fk in t.foreign_keys]
    assert fks and all(fk.source == "inferred" for fk in fks)
    found = _joins(snapshot)
    assert len(found & GOLD_JOINS) / len(found) >= 0.98, sorted(found - GOLD_JOINS)
    assert len(found & GOLD_JOINS) / len(GOLD_JOINS) >= 0.97, sorted(GOLD_JOINS - found)
    # the role-playing self-reference is too weak on names alone: its values confirm it
    assert ("DIM_EMPLOYEE", "MANAGER_EMP_KEY", "DIM_EMPLOYEE", "EMP_KEY") in found
    assert not [j for j in found if j[1] in GENERIC]


def test_drift_does_not_fire_on_an_unchanged_warehouse(warehouse: tuple[DatasourceConfig, SchemaSnapshot],
                                                       tmp_path: Path) -> None:
    config, snapshot = warehouse
    store = SqlSchemaStore(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store.register_snapshot(snapshot)
        [result] = check_drift([config], store, now=NOW)
        assert result.status == "unchanged", result.describe()
        assert store.get_latest("warehouse").foreign_key_count == snapshot.foreign_key_count  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_question_needing_many_tables_gets_a_path_through_dimensions(
        warehouse: tuple[DatasourceConfig, SchemaSnapshot]) -> None:
    _, snapshot = warehouse
    graph = JoinGraph(snapshot)
    index = {t.name: i for i, t in enumerate(snapshot.tables)}
    # energy usage per region: up the snowflake (building, site, city, country), not across the
    # date dimension every fact shares and another fact (as short, but a fan trap)
    path = graph.connect([index["FACT_ENERGY_USAGE"], index["DIM_REGION"]])
    assert {graph.names[i] for i in path} == {"FACT_ENERGY_USAGE", "DIM_BUILDING", "DIM_SITE", "DIM_CITY",
                                             "DIM_COUNTRY", "DIM_REGION"}
    for q in QUESTIONS:
        tables = graph.connect([index[t] for t in q["tables"]])  # type: ignore[union-attr]
        names = {graph.names[i] for i in tables}
        assert names == set(q["tables"]), q["question"]  # type: ignore[arg-type]
        relationships = graph.relationships(tables)
        assert len(relationships) >= len(names) - 1
        assert all(r.inferred and r.source == "inferred" for r in relationships)


def test_values_that_disagree_veto_a_join_names_suggest(tmp_path: Path) -> None:
    path = tmp_path / "batches.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        'CREATE TABLE "DIM_BATCH" ("BATCH_KEY" INTEGER, "BATCH_NAME" TEXT);'
        'CREATE TABLE "FACT_LOAD" ("BATCH_KEY" INTEGER, "ROWS_LOADED" INTEGER);'
        'CREATE TABLE "FACT_CHECK" ("BATCH_KEY" INTEGER, "ERRORS" INTEGER);'
    )
    con.executemany('INSERT INTO "DIM_BATCH" VALUES (?, ?)', [(i, f"batch {i}") for i in range(1, 11)])
    con.executemany('INSERT INTO "FACT_LOAD" VALUES (?, ?)', [(1000 + i, i) for i in range(50)])
    con.executemany('INSERT INTO "FACT_CHECK" VALUES (?, ?)', [(1 + i % 10, i) for i in range(50)])
    con.commit()
    con.close()
    adapter = open_adapter(DatasourceConfig(id="batches", url=f"sqlite:///{path}"))
    try:
        checked = {(j[0], j[2]) for j in _joins(adapter.read_snapshot(NOW))}
        by_name = {(j[0], j[2]) for j in _joins(adapter.read_snapshot(NOW, with_stats=False))}
    finally:
        adapter.close()
    assert checked == {("FACT_CHECK", "DIM_BATCH")}
    assert by_name == {("FACT_CHECK", "DIM_BATCH"), ("FACT_LOAD", "DIM_BATCH")}


@pytest.fixture(scope="module")
def small_warehouse_retriever(tmp_path_factory: pytest.TempPathFactory,
                              model_provider: object) -> Iterator[SchemaRetriever]:  # noqa: F811
    """A 16-table slice of the warehouse indexed with the real model and Chroma (kept small: fast)."""
    first = QUESTIONS[0]["tables"]  # type: ignore[index]
    others = ["FACT_WATER_USAGE", "FACT_PAYROLL", "FACT_SALES", "DIM_EMPLOYEE", "DIM_DEPARTMENT", "DIM_PRODUCT",
              "DIM_METER", "DIM_STORE", "DIM_CUSTOMER", "DIM_REGION"]
    home = tmp_path_factory.mktemp("warehouse-retrieval")
    path = build_warehouse(home / "w.sqlite", "sqlite", [*first, *others])  # type: ignore[list-item]
    settings = Settings.from_env({"NL2SQL_HOME": str(home / "home")})
    store = build_schema_store(settings)
    embeddings = EmbeddingService(model_provider)  # type: ignore[arg-type]
    vectors = build_vector_store(settings, embeddings)
    index_datasource(DatasourceConfig(id="warehouse", url=f"sqlite:///{path}"), store, vectors)
    retriever = SchemaRetriever(store, vectors, embeddings, config=RetrieverConfig(max_tables=12))
    yield retriever
    vectors.close()
    store.close()


@pytest.mark.slow
def test_retrieval_returns_a_connected_join_path_with_inferred_relationships_marked(
        small_warehouse_retriever: SchemaRetriever) -> None:
    q = QUESTIONS[0]
    result = small_warehouse_retriever.retrieve(str(q["question"]), datasource="warehouse")
    names = {t.name for t in result.tables}
    gold = set(q["tables"])  # type: ignore[arg-type]
    assert len(gold & names) >= 4 and len(names) >= 4
    assert result.relationships and all(r.inferred and r.source == "inferred" for r in result.relationships)
    # every returned table is reachable from every other through the relationships
    adjacent: dict[str, set[str]] = {n: set() for n in names}
    for r in result.relationships:
        adjacent[r.from_table].add(r.to_table)
        adjacent[r.to_table].add(r.from_table)
    seen, todo = {next(iter(names))}, [next(iter(names))]
    while todo:
        for nxt in adjacent[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert seen == names
