"""compute_statistics: statuses, sampling, the time budget, PII withholding, failures.

Runs against a real in-memory DuckDB through the DuckDB adapter's statistics backend; the
clock is passed in, so budget behaviour is deterministic.
"""

from __future__ import annotations

import doctest
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from nl2sql_assets.adapters import stats
from nl2sql_assets.adapters.duckdb import DuckDBStatsBackend
from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter
from nl2sql_assets.adapters.stats import BUDGET_EXHAUSTED, VIEW_NOTE, compute_statistics
from nl2sql_assets.adapters.structure import RawColumn, RawTable, build_tables
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.schema.models import Table


def test_doctests() -> None:
    assert doctest.testmod(stats).failed == 0


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.execute("CREATE TABLE people (id INTEGER, contact VARCHAR, status VARCHAR, score DOUBLE, joined_on DATE)")
    con.execute("""INSERT INTO people SELECT i, 'user' || i || '@example.com',
                   CASE WHEN i % 4 = 0 THEN 'gone' ELSE 'active' END,
                   CASE WHEN i % 5 = 0 THEN NULL ELSE i / 2 END, DATE '2000-01-01' + CAST(i AS INTEGER)
                   FROM range(1, 41) t(i)""")
    con.execute("CREATE TABLE tiny (k VARCHAR)")
    con.execute("INSERT INTO tiny VALUES ('b'), ('a'), ('b'), ('a'), ('c'), ('c'), (NULL)")
    con.execute("CREATE VIEW v AS SELECT * FROM tiny")
    yield con
    con.close()


def _tables(*names: str) -> list[Table]:
    shapes = {
        "people": [RawColumn("id", "INTEGER"), RawColumn("contact", "VARCHAR"), RawColumn("status", "VARCHAR"),
                   RawColumn("score", "DOUBLE"), RawColumn("joined_on", "DATE")],
        "tiny": [RawColumn("k", "VARCHAR")],
        "v": [RawColumn("k", "VARCHAR")],
        "missing": [RawColumn("x", "INTEGER")],
    }
    return build_tables([RawTable("main", n, "view" if n == "v" else "table", None, shapes[n]) for n in names])


def _by_name(tables: list[Table]) -> dict[str, Table]:
    return {t.name: t for t in tables}


def test_exact_statistics_when_the_sample_holds_the_table(con: duckdb.DuckDBPyConnection) -> None:
    out, warnings = compute_statistics(_tables("people", "tiny", "v"), DuckDBStatsBackend(con), budget_s=60)
    tables = _by_name(out)
    assert warnings == []
    people = tables["people"]
    assert people.row_count == 40 and people.row_count_status == "exact" and people.stats_note is None
    score = people.column("score").stats  # type: ignore[union-attr]
    assert score is not None and score.status == "exact" and score.null_fraction == pytest.approx(0.2)
    assert score.distinct_count == 32 and score.min_value == "0.5" and score.max_value == "19.5"
    joined = people.column("joined_on").stats  # type: ignore[union-attr]
    assert joined is not None and joined.min_value == "2000-01-02" and joined.max_value == "2000-02-10"
    status = people.column("status").stats  # type: ignore[union-attr]
    assert status is not None and status.top_values == ["active", "gone"]
    tiny = tables["tiny"].column("k").stats  # type: ignore[union-attr]
    assert tiny is not None and tiny.top_values == ["a", "b", "c"]  # ties: by value
    assert tiny.null_fraction == pytest.approx(1 / 7) and tiny.distinct_count == 3
    assert tables["v"].row_count_status == "skipped" and tables["v"].stats_note == VIEW_NOTE


def test_value_pii_is_flagged_and_withheld(con: duckdb.DuckDBPyConnection) -> None:
    out, _ = compute_statistics(_tables("people"), DuckDBStatsBackend(con), budget_s=60)
    contact = out[0].column("contact")
    assert contact is not None and contact.pii and contact.pii_kind == "email"
    assert contact.stats is not None and contact.stats.min_value is None and contact.stats.max_value is None
    assert contact.stats.top_values == [] and contact.stats.distinct_count == 40
    assert "@" not in out[0].model_dump_json()


def test_sampled_statistics_for_tables_bigger_than_the_sample(con: duckdb.DuckDBPyConnection) -> None:
    out, _ = compute_statistics(_tables("people"), DuckDBStatsBackend(con), budget_s=60, sample_rows=10)
    people = out[0]
    assert people.row_count == 40 and people.row_count_status == "estimated"
    assert "duckdb_tables().estimated_size" in (people.stats_note or "")
    ids = people.column("id").stats  # type: ignore[union-attr]
    assert ids is not None and ids.status == "sampled" and ids.sample_size == 10
    assert ids.distinct_count == 10 and "first 10 rows" in (ids.note or "")


def test_budget_runs_out_part_way(con: duckdb.DuckDBPyConnection) -> None:
    ticks = iter(range(1000))
    out, warnings = compute_statistics(_tables("people", "tiny", "people", "tiny"), DuckDBStatsBackend(con),
                                       budget_s=5, clock=lambda: float(next(ticks)))
    statuses = [t.row_count_status for t in out]
    assert statuses[0] == "exact"
    assert statuses[-1] == "skipped" and out[-1].stats_note == BUDGET_EXHAUSTED
    assert all(c.stats is not None and c.stats.note == BUDGET_EXHAUSTED for c in out[-1].columns)
    assert warnings == []


def test_zero_budget_skips_everything_without_a_query() -> None:
    con = duckdb.connect()  # no tables at all: any query would fail
    out, warnings = compute_statistics(_tables("people", "v"), DuckDBStatsBackend(con), budget_s=0)
    assert [t.stats_note for t in out] == [BUDGET_EXHAUSTED, VIEW_NOTE]
    assert warnings == []


def test_a_failing_table_is_skipped_with_a_reason(con: duckdb.DuckDBPyConnection) -> None:
    out, warnings = compute_statistics(
        _tables("missing", "tiny"), DuckDBStatsBackend(con), budget_s=60,
        describe_error=lambda exc: f"{type(exc).__name__}: redacted")
    tables = _by_name(out)
    assert tables["missing"].row_count_status == "skipped"
    assert tables["missing"].stats_note == "statistics query failed: CatalogException: redacted"
    assert warnings == ["table main.missing: statistics query failed: CatalogException: redacted"]
    assert tables["tiny"].row_count == 7


def test_name_flagged_columns_are_not_probed_but_still_withheld(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE users (email VARCHAR, kind VARCHAR)")
    con.execute("INSERT INTO users VALUES ('x', 'a'), ('y', 'a'), ('x', 'b'), ('x', 'a')")
    tables = build_tables([RawTable("main", "users", "table", None,
                                    [RawColumn("email", "VARCHAR"), RawColumn("kind", "VARCHAR")])])
    out, _ = compute_statistics(tables, DuckDBStatsBackend(con), budget_s=60)
    email = out[0].column("email")
    assert email is not None and email.pii_kind == "email"
    assert email.stats is not None and email.stats.top_values == [] and email.stats.max_value is None
    assert out[0].column("kind").stats.top_values == ["a", "b"]  # type: ignore[union-attr]


def test_very_wide_tables_split_the_aggregate() -> None:
    con = duckdb.connect()
    names = [f"c{i}" for i in range(stats.AGGREGATE_COLUMNS_PER_QUERY * 2 + 7)]
    con.execute(f"CREATE TABLE wide ({', '.join(f'{n} INTEGER' for n in names)})")
    con.execute(f"INSERT INTO wide VALUES ({', '.join(str(i) for i in range(len(names)))})")
    tables = build_tables([RawTable("main", "wide", "table", None, [RawColumn(n, "INTEGER") for n in names])])
    out, warnings = compute_statistics(tables, DuckDBStatsBackend(con), budget_s=60)
    assert warnings == [] and out[0].row_count == 1
    assert [c.stats.min_value for c in out[0].columns] == [str(i) for i in range(len(names))]  # type: ignore[union-attr]


def test_a_table_exactly_the_size_of_the_sample_is_exact_when_counted(tmp_path: Path) -> None:
    path = tmp_path / "ten.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE ten (i INTEGER)")
    con.executemany("INSERT INTO ten VALUES (?)", [(i,) for i in range(10)])
    con.commit()
    con.close()
    config = DatasourceConfig(id="ten", url=f"sqlite:///{path}")
    exact = SQLAlchemyAdapter(config, sample_rows=10).read_snapshot(datetime(2026, 1, 1, tzinfo=UTC)).tables[0]
    assert (exact.row_count, exact.row_count_status, exact.stats_note) == (10, "exact", None)
    assert exact.columns[0].stats.status == "exact"  # type: ignore[union-attr]
    sampled = SQLAlchemyAdapter(config, sample_rows=4).read_snapshot(datetime(2026, 1, 1, tzinfo=UTC)).tables[0]
    assert (sampled.row_count, sampled.row_count_status) == (10, "exact")  # COUNT(*) within the budget
    assert sampled.columns[0].stats.status == "sampled" and sampled.columns[0].stats.sample_size == 4  # type: ignore[union-attr]
    assert sampled.stats_note == "statistics from a sample (first 4 rows); row count: COUNT(*)"
