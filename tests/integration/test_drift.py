"""The drift check end to end: real demo databases (DuckDB, SQLite), the real SQLite schema store,
plus PostgreSQL and MariaDB servers."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa
import yaml

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.config import DatasourceConfig, load_datasources, parse_datasources
from nl2sql_assets.demo import create_demo, demo_datasources_document
from nl2sql_assets.drift import DriftResult, check_drift, read_live_structure
from nl2sql_assets.schema.fingerprint import compute_metadata_hash, parse_schema_version
from nl2sql_assets.schema.models import EnrichmentRecord
from nl2sql_assets.schema.store import SqlSchemaStore

T0 = datetime(2026, 11, 30, 3, 15, 22, tzinfo=UTC)


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("drift-template")
    create_demo(home)
    return home / "demo"


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> tuple[Path, list[DatasourceConfig]]:
    """A private copy of the demo databases and their configs (tests alter them)."""
    demo_dir = tmp_path / "demo"
    shutil.copytree(demo_template, demo_dir)
    path = tmp_path / "datasources.yaml"
    path.write_text(yaml.safe_dump(demo_datasources_document(demo_dir), sort_keys=False), encoding="utf-8")
    return path, load_datasources(path)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlSchemaStore]:
    s = SqlSchemaStore(f"sqlite:///{tmp_path / 'store' / 'schema_store.db'}")
    yield s
    s.close()


def register(configs: list[DatasourceConfig], store: SqlSchemaStore, results: list[DriftResult],
             captured_at: datetime, *, with_stats: bool = False) -> dict[str, str]:
    """What the indexing assets do: read a full snapshot and register it under the proposed version."""
    out = {}
    for config, result in zip(configs, results, strict=True):
        adapter = open_adapter(config)
        try:
            snapshot = adapter.read_snapshot(captured_at, with_stats=with_stats)
        finally:
            adapter.close()
        assert snapshot.fingerprint == result.fingerprint
        out[config.id] = store.register_snapshot(snapshot, result.target_version).schema_version
    return out


def by_id(results: list[DriftResult]) -> dict[str, DriftResult]:
    return {r.datasource_id: r for r in results}


def test_new_register_unchanged_changed_metadata(demo: tuple[Path, list[DatasourceConfig]],
                                                 store: SqlSchemaStore) -> None:
    path, configs = demo
    first = check_drift(configs, store, now=T0)
    assert [r.datasource_id for r in first] == ["commerce", "hr", "support"]
    for r in first:
        assert r.status == "new" and r.current_version is None and r.needs_indexing
        assert r.proposed_version == f"20261130031522_{r.fingerprint[:8]}"
        assert r.table_count and r.table_count >= 7 and r.error is None
    assert by_id(first)["support"].tenant == "globex"

    versions = register(configs, store, first, T0)
    assert versions == {r.datasource_id: r.proposed_version for r in first}

    second = check_drift(configs, store, now=T0 + timedelta(hours=1))
    for r in second:
        assert r.status == "unchanged" and not r.needs_indexing
        assert r.current_version == versions[r.datasource_id] and r.proposed_version is None
        assert r.fingerprint == by_id(first)[r.datasource_id].fingerprint

    # structure moves: a column in DuckDB, a table in SQLite
    demo_dir = path.parent / "demo"
    conn = duckdb.connect(str(demo_dir / "commerce.duckdb"))
    conn.execute("ALTER TABLE customers ADD COLUMN nickname VARCHAR")
    conn.close()
    with sqlite3.connect(demo_dir / "hr.sqlite") as hr:
        hr.execute("CREATE TABLE parking_spots (spot_id INTEGER PRIMARY KEY, "
                   "employee_id INTEGER REFERENCES employees(employee_id))")
    t2 = T0 + timedelta(hours=2)
    third = by_id(check_drift(configs, store, now=t2))
    commerce, hr_result = third["commerce"], third["hr"]
    assert commerce.status == "changed" and commerce.current_version == versions["commerce"]
    assert commerce.summary == "1 column added"
    assert any("customers" in item and "nickname" in item for item in commerce.diff_items)
    assert "nickname" in (commerce.diff_markdown or "")
    assert commerce.proposed_version == f"20261130051522_{commerce.fingerprint[:8]}"
    assert parse_schema_version(commerce.proposed_version)[0] > parse_schema_version(commerce.current_version)[0]
    assert hr_result.status == "changed" and hr_result.summary.startswith("+1 table")
    assert any("parking_spots" in item for item in hr_result.diff_items)
    assert third["support"].status == "unchanged"

    versions = register(configs, store, list(third.values()), t2)
    assert versions["commerce"] == commerce.proposed_version
    assert all(r.status == "unchanged" for r in check_drift(configs, store, now=t2 + timedelta(minutes=1)))

    # documentation moves, structure does not: a DuckDB comment and a SQLite annotation
    conn = duckdb.connect(str(demo_dir / "commerce.duckdb"))
    conn.execute("COMMENT ON COLUMN customers.email IS 'Where we send receipts'")
    conn.close()
    doc = yaml.safe_load(path.read_text())
    doc["datasources"][1]["annotations"]["columns"]["employees.hire_date"] = "First day at the company"
    doc["datasources"][2]["description"] = "Globex help desk (renamed)"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    configs = load_datasources(path)
    fourth = by_id(check_drift(configs, store, now=t2 + timedelta(hours=1)))
    for ds in ("commerce", "hr", "support"):
        r = fourth[ds]
        assert r.status == "metadata_changed", (ds, r)
        assert r.proposed_version is None and r.target_version == versions[ds] == r.current_version
        assert r.needs_indexing
    assert any("customers.email" in item for item in fourth["commerce"].diff_items)
    assert any("hire_date" in item for item in fourth["hr"].diff_items)
    assert any("description" in item for item in fourth["support"].diff_items)

    register(configs, store, [fourth[c.id] for c in configs], t2 + timedelta(hours=1))
    assert {r.status for r in check_drift(configs, store, now=t2 + timedelta(hours=2))} == {"unchanged"}


def test_full_snapshot_with_statistics_matches_the_cheap_path(demo: tuple[Path, list[DatasourceConfig]],
                                                              store: SqlSchemaStore) -> None:
    """Value-based PII flags and statistics in a full snapshot must not look like drift."""
    _, configs = demo
    first = check_drift(configs, store, now=T0)
    register(configs, store, first, T0, with_stats=True)
    stored = store.get_latest("hr")
    assert stored is not None and any(c.pii for t in stored.tables for c in t.columns)
    assert any(t.row_count for t in stored.tables)
    assert {r.status for r in check_drift(configs, store, now=T0 + timedelta(minutes=5))} == {"unchanged"}


def test_enriched_descriptions_are_not_a_documentation_change(demo: tuple[Path, list[DatasourceConfig]],
                                                               store: SqlSchemaStore) -> None:
    _, configs = demo
    support = [c for c in configs if c.id == "support"]
    [result] = check_drift(support, store, now=T0)
    live = read_live_structure(support[0], T0)
    tables = [t.model_copy(update={"description": f"LLM text about {t.name}"}) for t in live.tables]
    enriched = live.model_copy(update={
        "tables": tables, "metadata_hash": compute_metadata_hash(live.datasource, tables),
        "enrichment": EnrichmentRecord(status="enriched", model="gpt-test", source_metadata_hash=live.metadata_hash,
                                       tables_described=len(tables)),
    })
    store.register_snapshot(enriched, result.proposed_version)
    [again] = check_drift(support, store, now=T0 + timedelta(minutes=1))
    assert again.status == "unchanged"


def test_unreachable_datasources_fail_alone_without_secrets(demo: tuple[Path, list[DatasourceConfig]],
                                                            store: SqlSchemaStore, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _, configs = demo
    monkeypatch.setenv("H5_DRIFT_PW", "envSecret42")
    broken = parse_datasources({"datasources": [
        {"id": "closed_port", "url": "postgresql+psycopg2://bob:hunter2secret@127.0.0.1:1/nope"},
        {"id": "env_password", "url": "postgresql+psycopg2://bob:${H5_DRIFT_PW}@127.0.0.1:1/nope"},
        {"id": "missing_var", "url": "postgresql+psycopg2://bob:${H5_NOT_SET_ANYWHERE}@127.0.0.1:1/nope"},
        {"id": "missing_file", "url": f"duckdb:///{tmp_path / 'nowhere' / 'gone.duckdb'}"},
    ]})
    mixed = [broken[0], configs[0], broken[1], broken[2], configs[1], broken[3]]
    results = by_id(check_drift(mixed, store, now=T0))
    assert [r.datasource_id for r in check_drift(mixed[:2], store, now=T0)] == ["closed_port", "commerce"]
    assert results["commerce"].status == "new" and results["hr"].status == "new"
    for ds in ("closed_port", "env_password", "missing_var", "missing_file"):
        r = results[ds]
        assert r.status == "failed" and r.error, ds
        assert r.fingerprint is None and r.proposed_version is None and not r.needs_indexing
        dumped = r.model_dump_json()
        assert "hunter2secret" not in dumped and "envSecret42" not in dumped
    assert "H5_NOT_SET_ANYWHERE" in (results["missing_var"].error or "")
    assert results["closed_port"].describe().startswith("closed_port: failed: ")


def test_empty_config_list(store: SqlSchemaStore) -> None:
    assert check_drift([], store) == []


def _pg_config(postgres_url: str, schema: str) -> DatasourceConfig:
    return DatasourceConfig(id="pg_sales", url=postgres_url, schemas=[schema], tenant="acme")


@pytest.mark.server
def test_drift_on_postgresql(pg_schema: str, postgres_url: str, store: SqlSchemaStore) -> None:
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".customers (id integer PRIMARY KEY, email text)')
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".orders (id integer PRIMARY KEY, '
                             f'customer_id integer REFERENCES "{pg_schema}".customers(id), total numeric(10,2))')
    config = _pg_config(postgres_url, pg_schema)
    try:
        [r] = check_drift([config], store, now=T0)
        assert r.status == "new" and r.table_count == 2
        register([config], store, [r], T0)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'ALTER TABLE "{pg_schema}".orders ADD COLUMN status text')
        [r2] = check_drift([config], store, now=T0 + timedelta(hours=1))
        assert r2.status == "changed" and r2.summary == "1 column added"
        register([config], store, [r2], T0 + timedelta(hours=1))
        with engine.begin() as conn:
            conn.exec_driver_sql(f'COMMENT ON TABLE "{pg_schema}".customers IS \'People who buy\'')
        [r3] = check_drift([config], store, now=T0 + timedelta(hours=2))
        assert r3.status == "metadata_changed" and r3.current_version == r2.proposed_version
    finally:
        engine.dispose()


@pytest.mark.server
def test_drift_on_mariadb(mariadb_url: str, store: SqlSchemaStore) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE departments (id INT PRIMARY KEY, name VARCHAR(80))")
    config = DatasourceConfig(id="maria_hr", url=mariadb_url)
    try:
        [r] = check_drift([config], store, now=T0)
        assert r.status == "new" and r.table_count == 1
        register([config], store, [r], T0)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE employees (id INT PRIMARY KEY, "
                                 "department_id INT, FOREIGN KEY (department_id) REFERENCES departments(id))")
        [r2] = check_drift([config], store, now=T0 + timedelta(hours=1))
        assert r2.status == "changed" and r2.summary.startswith("+1 table")
    finally:
        engine.dispose()
