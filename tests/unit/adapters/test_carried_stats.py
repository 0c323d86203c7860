"""A new version keeps the previous version's statistics for the tables whose structure it shares.

Real SQLite files through the SQLAlchemy adapter: the data of an unchanged table changes between
two reads, and the second read must report what the first one read (while young enough), and
read afresh the table whose structure changed, statistics too old, and statistics that were
never complete.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter
from nl2sql_assets.config import DatasourceConfig, StatisticsConfig
from nl2sql_assets.schema.models import SchemaSnapshot, Table

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, contact TEXT, tier TEXT)")
    con.executemany("INSERT INTO customers VALUES (?, ?, ?)",
                    [(i, f"user{i}@example.com", "gold" if i % 3 else "basic") for i in range(1, 31)])
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), "
                "amount REAL)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, 1 + i % 30, i * 1.5) for i in range(1, 21)])
    con.commit()
    con.close()
    return path


def _change(path: Path) -> None:
    """More rows in both tables, and a new column in ``orders`` (a structural change)."""
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO customers VALUES (?, ?, ?)",
                    [(i, f"user{i}@example.com", "platinum") for i in range(31, 41)])
    con.execute("ALTER TABLE orders ADD COLUMN note TEXT")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", [(i, 1, 2.0, "late") for i in range(21, 26)])
    con.commit()
    con.close()


def _read(path: Path, at: datetime, previous: SchemaSnapshot | None = None, *, max_age: float = 168.0,
          budget: float = 30.0) -> dict[str, Table]:
    config = DatasourceConfig(id="shop", url=f"sqlite:///{path}",
                              statistics=StatisticsConfig(reuse_max_age_hours=max_age))
    adapter = SQLAlchemyAdapter(config, stats_budget_s=budget)
    try:
        snapshot = adapter.read_snapshot(at, previous=previous)
    finally:
        adapter.close()
    return {t.name: t for t in snapshot.tables} | {"": snapshot}  # type: ignore[dict-item]


def _snapshot(tables: dict[str, Table]) -> SchemaSnapshot:
    return tables[""]  # type: ignore[return-value]


def test_unchanged_tables_keep_their_statistics_and_changed_ones_are_read(tmp_path: Path) -> None:
    path = _db(tmp_path)
    first = _read(path, T0)
    assert first["customers"].stats_read_at == T0 and first["customers"].row_count == 30
    assert first["customers"].column("contact").pii  # type: ignore[union-attr]  # flagged by its values
    _change(path)
    second = _read(path, T0 + timedelta(hours=2), _snapshot(first))
    customers, orders = second["customers"], second["orders"]
    assert customers.row_count == 30 and customers.stats_read_at == T0  # kept: same structure
    assert customers.columns == first["customers"].columns  # statistics and the value-based PII flag
    assert customers.column("tier").stats.top_values == ["gold", "basic"]  # type: ignore[union-attr]
    assert orders.row_count == 25 and orders.stats_read_at == T0 + timedelta(hours=2)  # re-read
    assert orders.column("note").stats.top_values == ["late"]  # type: ignore[union-attr]


def test_statistics_older_than_the_limit_are_read_again(tmp_path: Path) -> None:
    path = _db(tmp_path)
    first = _read(path, T0, max_age=1.0)
    _change(path)
    later = _read(path, T0 + timedelta(hours=2), _snapshot(first), max_age=1.0)
    assert later["customers"].row_count == 40 and later["customers"].stats_read_at == T0 + timedelta(hours=2)
    assert "platinum" in later["customers"].column("tier").stats.top_values  # type: ignore[union-attr]
    sooner = _read(path, T0 + timedelta(minutes=30), _snapshot(first), max_age=1.0)
    assert sooner["customers"].row_count == 30


def test_a_zero_limit_always_reads(tmp_path: Path) -> None:
    path = _db(tmp_path)
    first = _read(path, T0)
    _change(path)
    again = _read(path, T0 + timedelta(seconds=1), _snapshot(first), max_age=0)
    assert again["customers"].row_count == 40


def test_statistics_the_budget_skipped_are_read_by_the_next_version(tmp_path: Path) -> None:
    path = _db(tmp_path)
    skipped = _read(path, T0, budget=0.0)
    assert skipped["customers"].row_count_status == "skipped"
    _change(path)
    second = _read(path, T0 + timedelta(hours=1), _snapshot(skipped))
    assert second["customers"].row_count == 40 and second["customers"].row_count_status == "exact"
    assert second["customers"].column("contact").pii  # type: ignore[union-attr]


@pytest.mark.parametrize("rename", ["customers", "contact"])
def test_a_renamed_table_or_column_is_read_afresh(tmp_path: Path, rename: str) -> None:
    path = _db(tmp_path)
    first = _read(path, T0)
    con = sqlite3.connect(path)
    if rename == "customers":
        con.execute("ALTER TABLE customers RENAME TO clients")
    else:
        con.execute("ALTER TABLE customers RENAME COLUMN contact TO email_address")
    con.execute("INSERT INTO " + ("clients" if rename == "customers" else "customers")
                + " VALUES (99, 'x@example.com', 'new')")
    con.commit()
    con.close()
    second = _read(path, T0 + timedelta(hours=1), _snapshot(first))
    table = second["clients" if rename == "customers" else "customers"]
    assert table.row_count == 31 and table.stats_read_at == T0 + timedelta(hours=1)
    # the rename rewrote the foreign key of orders: its structure changed, so it is read too
    assert second["orders"].stats_read_at == (T0 + timedelta(hours=1) if rename == "customers" else T0)


def test_the_budget_comes_from_the_datasources_file(tmp_path: Path) -> None:
    from nl2sql_assets.pipeline.steps import read_snapshot

    path = _db(tmp_path)
    none = DatasourceConfig(id="shop", url=f"sqlite:///{path}", statistics=StatisticsConfig(budget_seconds=0))
    assert {t.stats_note for t in read_snapshot(none, now=T0).tables} == {"time budget exhausted"}
    default = DatasourceConfig(id="shop", url=f"sqlite:///{path}")
    assert {t.row_count_status for t in read_snapshot(default, now=T0).tables} == {"exact"}
    assert {t.row_count_status for t in read_snapshot(none, now=T0, stats_budget_s=30).tables} == {"exact"}
