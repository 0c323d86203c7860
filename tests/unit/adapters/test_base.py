"""open_adapter (the factory) and datasource_info (the seam's helper)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nl2sql_assets.adapters.base import datasource_info
from nl2sql_assets.adapters.duckdb import DuckDBAdapter
from nl2sql_assets.adapters.factory import open_adapter
from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter
from nl2sql_assets.config import DatasourceConfig, MetricConfig


def test_datasource_info_comes_from_the_config_never_the_url() -> None:
    config = DatasourceConfig(
        id="sales", url="postgresql://bob:hunter2@db/sales", description="Shop", domains=["commerce"],
        example_questions=["Revenue?"], tenant="acme",
        metrics=[MetricConfig(name="revenue", definition="sum(total)", grain="order")])
    info = datasource_info(config, "postgresql")
    assert (info.id, info.dialect, info.description, info.domains, info.tenant) == (
        "sales", "postgresql", "Shop", ["commerce"], "acme")
    assert info.example_questions == ["Revenue?"]
    assert [(m.name, m.definition, m.grain) for m in info.metrics] == [("revenue", "sum(total)", "order")]
    assert "hunter2" not in info.model_dump_json()


def test_open_adapter_picks_by_scheme_and_connects_lazily() -> None:
    duck = open_adapter(DatasourceConfig(id="d", url="duckdb:////nonexistent/x.duckdb"))
    assert isinstance(duck, DuckDBAdapter)
    pg = open_adapter(DatasourceConfig(id="p", url="postgresql+psycopg2://u@127.0.0.1:1/db"), stats_budget_s=5)
    assert isinstance(pg, SQLAlchemyAdapter) and pg.dialect == "postgresql" and pg.stats_budget_s == 5
    pg.close()
    duck.close()


def test_in_memory_sqlite_is_allowed() -> None:
    adapter = open_adapter(DatasourceConfig(id="m", url="sqlite://"))
    with adapter:  # type: ignore[attr-defined]
        snap = adapter.read_snapshot(datetime(2026, 1, 1, tzinfo=UTC))
    assert snap.tables == [] and snap.datasource.dialect == "sqlite"



def test_default_schema_names_what_unqualified_tables_live_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PW", "s3cret")
    sqlite = DatasourceConfig(id="a", url="sqlite:///x.db")
    maria = DatasourceConfig(id="b", url="mysql+pymysql://root:${PW}@127.0.0.1/shop")
    pg = DatasourceConfig(id="c", url="postgresql://u@h/db")
    assert datasource_info(sqlite, "sqlite").default_schema == "main"
    assert datasource_info(maria, "mariadb").default_schema == "shop"
    assert datasource_info(pg, "postgresql").default_schema is None
    assert "s3cret" not in datasource_info(maria, "mariadb").model_dump_json()
