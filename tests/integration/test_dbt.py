"""dbt as a documentation source, end to end: a real dbt project built by dbt over a DuckDB file,
indexed through the product (real schema store, real Chroma, the real model) and retrieved from."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import chromadb
import duckdb
import pytest
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.config import DatasourceConfig, load_datasources
from nl2sql_assets.drift import check_drift
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.chunk_samples import embedding_service_for, model_provider  # noqa: F401 - fixture

pytest.importorskip("dbt.cli.main", reason="dbt-core is in the test extra: pip install -e '.[test]'")
pytestmark = pytest.mark.slow

PROJECT = Path(__file__).parents[1] / "fixtures" / "dbt_project"
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
DBT = Path(sys.executable).with_name("dbt")


@dataclass
class DbtWorld:
    root: Path
    project: Path
    database: Path
    target: Path

    def dbt(self, *args: str) -> None:
        """Run dbt on the copied project, offline, with everything it writes under ``root``."""
        env = {**os.environ, "DBT_SEND_ANON_USAGE_STATS": "false", "DBT_VERSION_CHECK": "false",
               "DO_NOT_TRACK": "1"}
        done = subprocess.run(
            [str(DBT), *args, "--profiles-dir", str(self.root), "--project-dir", str(self.project),
             "--target-path", str(self.target), "--log-path", str(self.root / "logs")],
            cwd=self.project, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def datasources(self, name: str = "datasources.yaml", *, catalog: bool = True) -> DatasourceConfig:
        """A datasources file next to the project naming the artifacts relatively, loaded."""
        lines = ["datasources:", "  - id: shop", f"    url: duckdb:///{self.database.as_posix()}",
                 "    tenant: acme", "    dbt:", "      manifest: target/manifest.json"]
        if catalog:
            lines.append("      catalog: target/catalog.json")
        path = self.root / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return load_datasources(path)[0]


def _raw_data(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA raw")
    con.execute("CREATE TABLE raw.src_cust (id INTEGER, nm VARCHAR, tier VARCHAR)")
    con.execute("CREATE TABLE raw.src_ord (id INTEGER, cust INTEGER, st VARCHAR, amt DECIMAL(10,2), dt TIMESTAMP)")
    con.execute("CREATE TABLE raw.src_adj (id INTEGER, ord INTEGER, kind VARCHAR, amt DECIMAL(10,2))")
    con.executemany("INSERT INTO raw.src_cust VALUES (?, ?, ?)",
                    [(i, f"Customer {i}", ["bronze", "silver", "gold"][i % 3]) for i in range(30)])
    con.executemany("INSERT INTO raw.src_ord VALUES (?, ?, ?, ?, ?)",
                    [(i, i % 30, ["placed", "shipped", "returned"][i % 3], 10 + i,
                      f"2025-0{1 + i % 9}-1{i % 9} 10:00:00") for i in range(120)])
    con.executemany("INSERT INTO raw.src_adj VALUES (?, ?, ?, ?)",
                    [(i, i * 3, ["damaged", "lost"][i % 2], 5 + i) for i in range(20)])
    con.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> DbtWorld:
    """The fixture project built once by dbt (models, tests, catalog) into a DuckDB file."""
    root = tmp_path_factory.mktemp("dbt")
    world = DbtWorld(root=root, project=root / "project", database=root / "warehouse.duckdb", target=root / "target")
    shutil.copytree(PROJECT, world.project)
    _raw_data(world.database)
    (root / "profiles.yml").write_text(
        f"shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        f"      path: {world.database.as_posix()}\n      threads: 1\n", encoding="utf-8")
    world.dbt("build")
    world.dbt("docs", "generate")
    return world


@pytest.fixture
def world(built: DbtWorld, tmp_path: Path) -> DbtWorld:
    """A private copy (database, project, artifacts) that a test may edit."""
    copy = DbtWorld(root=tmp_path, project=tmp_path / "project", database=tmp_path / "warehouse.duckdb",
                    target=tmp_path / "target")
    shutil.copytree(built.project, copy.project)
    shutil.copytree(built.target, copy.target)
    shutil.copy(built.database, copy.database)
    (tmp_path / "profiles.yml").write_text(
        (built.root / "profiles.yml").read_text().replace(built.database.as_posix(), copy.database.as_posix()))
    return copy


@pytest.fixture
def stores(tmp_path: Path, model_provider: object) -> Iterator[tuple[SqlSchemaStore, ChromaVectorStore, object]]:  # noqa: F811
    store = SqlSchemaStore(f"sqlite:///{tmp_path / 'store.db'}")
    service = embedding_service_for(model_provider, tmp_path / "cache")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    yield store, ChromaVectorStore(client, service), service  # type: ignore[arg-type]
    store.close()


def test_descriptions_joins_values_and_metrics_reach_chunks_and_retrieval(world: DbtWorld, stores: tuple) -> None:
    store, vectors, service = stores
    config = world.datasources()
    outcome = index_datasource(config, store, vectors, now=T0)
    docs = {c.id.split(":", 2)[2]: c.document for c in vectors.get_chunks("shop", outcome.schema_version)}
    # model, column and source descriptions; the database has no comment at all
    assert "Refunds issued to customers for damaged or lost parcels" in docs["table:main.x9_adj"]
    assert "Customer accounts exported from the shop backend" in docs["table:raw.src_cust"]
    assert "Refunded amount in EUR" in docs["column:main.x9_adj.adj_amt"]
    # accepted_values as the column's values, even one no row has yet
    assert all(v in docs["column:main.fct_ord.ord_st"] for v in ("placed", "shipped", "returned", "cancelled"))
    # the relationships test as a join; the metric with its measure; tags and meta as domains
    assert "rel:main.fct_ord(cst_ref)->main.dim_cst(cst_id)" in docs
    assert "sum(fct_ord.ord_amt) where ord_st != 'returned'" in docs["metric:gross_bookings"]
    assert "metric:order_count" in docs
    assert "crm, customers, sales" in docs["ds:shop"]
    snapshot = store.get_snapshot("shop", outcome.schema_version)
    assert [fk.source for fk in snapshot.table("fct_ord").foreign_keys] == ["dbt"]
    assert snapshot.warnings == []
    assert snapshot.table("fct_ord").column("ord_st").stats.top_values == ["placed", "shipped", "returned", "cancelled"]

    retriever = SchemaRetriever(store, vectors, service)
    refunds = retriever.retrieve("How much money did we refund to customers?", datasource="shop")
    assert refunds.tables[0].name == "x9_adj", [t.name for t in refunds.tables]
    tiers = retriever.retrieve("Total order amount per loyalty tier of the customer", datasource="shop")
    assert {"fct_ord", "dim_cst"} <= {t.name for t in tiers.tables}
    joins = [r for r in tiers.relationships if (r.from_table, r.to_table) == ("fct_ord", "dim_cst")]
    assert joins and joins[0].source == "dbt" and joins[0].from_columns == ["cst_ref"], tiers.relationships
    # a declared value (in no row) finds its column; a dbt metric points at its table
    returned = retriever.retrieve("How many orders are in the state 'cancelled'?", datasource="shop")
    assert "ord_st" in next(t.columns for t in returned.tables if t.name == "fct_ord"), returned.tables
    bookings = retriever.retrieve("What are our gross bookings?", datasource="shop")
    assert bookings.tables[0].name == "fct_ord", [t.name for t in bookings.tables]


def test_without_dbt_the_cryptic_schema_has_neither_the_description_nor_the_join(world: DbtWorld) -> None:
    plain = world.datasources().model_copy(update={"dbt": None})
    adapter = open_adapter(plain)
    snapshot = adapter.read_snapshot(T0)
    adapter.close()
    assert snapshot.table("x9_adj").text is None and snapshot.table("fct_ord").foreign_keys == []


def test_a_dbt_edit_refreshes_the_current_version_and_a_join_change_is_in_the_diff(world: DbtWorld,
                                                                                   stores: tuple) -> None:
    store, vectors, _ = stores
    config = world.datasources()
    first = index_datasource(config, store, vectors, now=T0)
    assert check_drift([config], store, now=T0)[0].status == "unchanged"

    schema = world.project / "models" / "schema.yml"
    schema.write_text(schema.read_text().replace("Refunds issued to customers for damaged or lost parcels",
                                                 "Money paid back to customers for damaged or lost parcels"))
    world.dbt("parse")
    drift = check_drift([config], store, now=T0 + timedelta(minutes=1))[0]
    assert drift.status == "metadata_changed" and drift.current_version == first.schema_version
    assert "main.x9_adj description" in drift.diff_items
    second = index_datasource(config, store, vectors, now=T0 + timedelta(minutes=1))
    assert second.status == "metadata_updated" and second.schema_version == first.schema_version
    assert [v.schema_version for v in store.list_versions("shop")] == [first.schema_version]
    docs = {c.id: c.document for c in vectors.get_chunks("shop", first.schema_version)}
    assert "Money paid back" in docs[f"shop:{first.schema_version}:table:main.x9_adj"]

    # a relationships test removed: still the same version, but the diff names the join
    schema.write_text(schema.read_text().replace("to: ref('fct_ord')\n                field: ord_id",
                                                 "to: ref('dim_cst')\n                field: cst_id"))
    world.dbt("parse")
    drift = check_drift([config], store, now=T0 + timedelta(minutes=2))[0]
    assert drift.status == "metadata_changed"
    assert any("dbt join removed" in item and "fct_ord" in item for item in drift.diff_items), drift.diff_items
    assert any("dbt join added" in item and "dim_cst" in item for item in drift.diff_items), drift.diff_items
    third = index_datasource(config, store, vectors, now=T0 + timedelta(minutes=2))
    assert third.schema_version == first.schema_version
    refs = [fk.ref_table for fk in store.get_snapshot("shop", first.schema_version).table("x9_adj").foreign_keys]
    assert refs == ["dim_cst"]


def test_a_relation_missing_from_the_database_is_a_warning(world: DbtWorld) -> None:
    con = duckdb.connect(str(world.database))
    con.execute("DROP TABLE main.x9_adj")
    con.close()
    adapter = open_adapter(world.datasources(catalog=False))
    snapshot = adapter.read_snapshot(T0)
    adapter.close()
    assert "dbt model 'model.shop.x9_adj' (warehouse.main.x9_adj) matches no table" in snapshot.warnings
    assert snapshot.table("fct_ord").text == "Orders placed by customers at checkout, one row per order"


def test_a_missing_or_malformed_manifest_fails_the_datasource_naming_the_file(world: DbtWorld, tmp_path: Path) -> None:
    store = SqlSchemaStore(f"sqlite:///{tmp_path / 'store.db'}")
    config = world.datasources()
    (world.target / "manifest.json").write_text('{"metadata": {"dbt_schema_version": ', encoding="utf-8")
    result = check_drift([config], store, now=T0)[0]
    assert result.status == "failed"
    assert f"dbt manifest {world.target / 'manifest.json'}: not valid JSON" in (result.error or "")
    (world.target / "manifest.json").unlink()
    result = check_drift([config], store, now=T0)[0]
    assert f"dbt manifest {world.target / 'manifest.json'}: file not found" in (result.error or "")
    store.close()
