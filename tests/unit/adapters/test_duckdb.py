"""DuckDB adapter helpers and a small real file."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from nl2sql_assets.adapters import duckdb as duckdb_adapter
from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.adapters.duckdb import DuckDBAdapter, duckdb_path, quote_identifier
from nl2sql_assets.config import DatasourceConfig


def test_doctests() -> None:
    assert doctest.testmod(duckdb_adapter).failed == 0


def test_paths() -> None:
    assert duckdb_path("duckdb:///data/x.duckdb") == "data/x.duckdb"
    assert duckdb_path("duckdb:////abs/x.duckdb") == "/abs/x.duckdb"
    assert duckdb_path("duckdb:///x.duckdb?access_mode=read_only") == "x.duckdb"
    assert duckdb_path("duckdb:///:memory:") is None


def test_quoting_round_trips(tmp_path: Path) -> None:
    con = duckdb.connect()
    for name in ['a"b', 'x"; DROP TABLE y; --', "select", "Ünï 表"]:
        assert con.execute(f"SELECT 1 AS {quote_identifier(name)}").description[0][0] == name  # type: ignore[index]


def test_small_file(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, note VARCHAR)")
    con.execute("INSERT INTO t VALUES (1, 'a'), (2, 'a'), (3, 'b'), (4, 'a'), (5, NULL)")
    con.close()
    adapter = open_adapter(DatasourceConfig(id="x", url=f"duckdb:///{path}"))
    assert isinstance(adapter, DuckDBAdapter) and adapter.dialect == "duckdb"
    with adapter:
        snap = adapter.read_snapshot(datetime(2026, 1, 1, tzinfo=UTC))
    t = snap.tables[0]
    assert (t.schema_name, t.name, t.primary_key, t.row_count) == ("main", "t", ["id"], 5)
    assert t.column("note").stats.top_values == ["a", "b"]  # type: ignore[union-attr]
    # closed: the file can be opened for writing again
    duckdb.connect(str(path)).close()


def test_the_read_only_connection_caps_duckdbs_block_cache(tmp_path: Path) -> None:
    """DuckDB caches what it reads up to 80% of the machine: a 3,000-table file held 1.5 GB."""
    path = tmp_path / "capped.duckdb"
    duckdb.connect(str(path)).close()
    adapter = DuckDBAdapter(DatasourceConfig(id="capped", url=f"duckdb:///{path}"))
    try:
        limit = adapter._fetch("SELECT current_setting('memory_limit')")[0][0]
    finally:
        adapter.close()
    assert limit == "244.1 MiB"  # 256 MB, as DuckDB prints it
