"""The bundled demo: real DuckDB and SQLite files, a valid datasources file, deterministic rows."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import duckdb
import pytest

from nl2sql_assets.config import load_datasources
from nl2sql_assets.demo import DEMO_DATASOURCE_IDS, DEMO_QUESTIONS, create_demo


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo") / "home"
    create_demo(home)
    return home


def db_path(url: str) -> str:
    return url.split(":///", 1)[1]


def sqlite_tables(path: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def duckdb_tables(path: str) -> list[str]:
    conn = duckdb.connect(path, read_only=True)
    try:
        return [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    finally:
        conn.close()


def test_datasources_file_is_valid_and_names_every_demo(demo_home: Path) -> None:
    configs = load_datasources(demo_home / "datasources.yaml")
    assert [c.id for c in configs] == list(DEMO_DATASOURCE_IDS)
    by_id = {c.id: c for c in configs}
    assert by_id["commerce"].is_duckdb and by_id["hr"].scheme == "sqlite"
    assert {c.tenant for c in configs} == {"acme", "globex"}
    assert by_id["support"].tenant == "globex"
    for config in configs:
        assert config.description and config.domains and config.example_questions and config.metrics
        assert Path(db_path(config.url)).is_file()
        assert Path(db_path(config.url)).is_absolute()
    # the commerce entry names a copy of its dbt project's manifest next to the databases
    assert by_id["commerce"].dbt is not None and by_id["commerce"].dbt.manifest.is_file()
    assert by_id["commerce"].dbt.manifest == demo_home / "demo" / "commerce_dbt" / "manifest.json"
    assert by_id["hr"].dbt is None


def test_at_least_25_tables_with_rows(demo_home: Path) -> None:
    configs = {c.id: c for c in load_datasources(demo_home / "datasources.yaml")}
    commerce = duckdb_tables(db_path(configs["commerce"].url))
    hr = sqlite_tables(db_path(configs["hr"].url))
    support = sqlite_tables(db_path(configs["support"].url))
    assert len(commerce) + len(hr) + len(support) >= 25
    assert {"customers", "orders", "order_items", "payments", "returns", "inventory"} <= set(commerce)
    assert {"employees", "departments", "salaries", "payslips", "time_off_requests"} <= set(hr)
    conn = duckdb.connect(db_path(configs["commerce"].url), read_only=True)
    try:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in commerce}
    finally:
        conn.close()
    assert all(n > 0 for n in counts.values()), counts
    assert 500 <= counts["orders"] <= 5000 and counts["order_items"] > counts["orders"]
    with sqlite3.connect(db_path(configs["hr"].url)) as hr_conn:
        assert hr_conn.execute("SELECT count(*) FROM employees").fetchone()[0] == 300


def test_foreign_keys_composite_and_self_references(demo_home: Path) -> None:
    hr = str(demo_home / "demo" / "hr.sqlite")
    with sqlite3.connect(hr) as conn:
        emp_fks = conn.execute("PRAGMA foreign_key_list(employees)").fetchall()
        reviews_fks = conn.execute("PRAGMA foreign_key_list(performance_reviews)").fetchall()
        lines_fks = conn.execute("PRAGMA foreign_key_list(payslip_lines)").fetchall()
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # every non-CEO employee has a manager who exists
        assert conn.execute("SELECT count(*) FROM employees WHERE manager_id IS NULL").fetchone()[0] == 1
    assert any(fk[2] == "employees" and fk[3] == "manager_id" for fk in emp_fks)
    assert sorted(fk[3] for fk in reviews_fks if fk[2] == "employees") == ["employee_id", "reviewer_id"]
    composite = [fk for fk in lines_fks if fk[2] == "payslips"]
    assert len(composite) == 2 and {fk[0] for fk in composite} == {composite[0][0]}  # one FK, two columns

    conn = duckdb.connect(str(demo_home / "demo" / "commerce.duckdb"), read_only=True)
    try:
        fks = conn.execute(
            "SELECT table_name, constraint_column_names, referenced_table, referenced_column_names "
            "FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY'").fetchall()
        comments = dict(conn.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall())
        column_comment = conn.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'orders' AND column_name = 'total'").fetchone()[0]
        views = [r[0] for r in conn.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
    finally:
        conn.close()
    assert ("returns", ["order_id", "line_no"], "order_items", ["order_id", "line_no"]) in [
        (t, list(c), r, list(rc)) for t, c, r, rc in fks]
    order_to_addresses = [c for t, c, r, _ in fks if t == "orders" and r == "addresses"]
    assert sorted(col for cols in order_to_addresses for col in cols) == ["billing_address_id", "shipping_address_id"]
    assert all(comments[t] for t in comments), "every DuckDB table has a COMMENT"
    assert column_comment and "subtotal" in column_comment
    assert views == ["monthly_revenue"]


def test_pii_columns_hold_realistic_values(demo_home: Path) -> None:
    conn = duckdb.connect(str(demo_home / "demo" / "commerce.duckdb"), read_only=True)
    try:
        email, phone = conn.execute("SELECT email, phone FROM customers LIMIT 1").fetchone()
        ip = conn.execute("SELECT client_ip FROM payments LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    assert re.fullmatch(r"[a-z.]+\d+@[a-z.-]+\.[a-z]+", email)
    assert re.fullmatch(r"\+\d{1,3} \d{2,3} \d{3} \d{4}", phone)
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", ip)
    with sqlite3.connect(demo_home / "demo" / "hr.sqlite") as hr:
        ibans = [r[0] for r in hr.execute("SELECT iban FROM employees")]
        ssn = hr.execute("SELECT national_id FROM employees LIMIT 1").fetchone()[0]
    assert re.fullmatch(r"\d{3}-\d{2}-\d{4}", ssn)
    for iban in ibans:  # valid ISO 13616 check digits
        rearranged = iban[4:] + iban[:4]
        assert int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1, iban


def test_sqlite_datasources_carry_annotations(demo_home: Path) -> None:
    hr = {c.id: c for c in load_datasources(demo_home / "datasources.yaml")}["hr"]
    assert hr.annotations.tables["employees"].startswith("Everyone employed")
    assert "manager" in hr.annotations.columns["employees.manager_id"].lower()
    assert "surname" in hr.annotations.synonyms["employees.last_name"]
    # every annotated table and column exists
    tables = set(sqlite_tables(str(demo_home / "demo" / "hr.sqlite"))) | {"active_employees"}
    assert set(hr.annotations.tables) <= tables
    with sqlite3.connect(demo_home / "demo" / "hr.sqlite") as conn:
        for key in hr.annotations.columns:
            table, column = key.split(".")
            assert column in [r[1] for r in conn.execute(f"PRAGMA table_info({table})")], key


def test_second_call_keeps_files_and_overwrite_rebuilds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = create_demo(home)
    files = sorted((home / "demo").iterdir())
    stamps = {p: p.stat().st_mtime_ns for p in [*files, path]}
    assert create_demo(home) == path
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert sorted((home / "demo").iterdir()) == files, "no temporary files left behind"

    path.write_text("datasources: []\n", encoding="utf-8")  # a user's edits survive a re-run
    create_demo(home)
    assert load_datasources(path) == []
    create_demo(home, overwrite=True)
    assert [c.id for c in load_datasources(path)] == list(DEMO_DATASOURCE_IDS)


def test_deterministic_across_homes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    create_demo(a)
    create_demo(b)
    for name in ("hr.sqlite", "support.sqlite"):
        with sqlite3.connect(a / "demo" / name) as ca, sqlite3.connect(b / "demo" / name) as cb:
            assert list(ca.iterdump()) == list(cb.iterdump())
    dumps = []
    for home in (a, b):
        conn = duckdb.connect(str(home / "demo" / "commerce.duckdb"), read_only=True)
        try:
            dumps.append([conn.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                          for t in ("orders", "order_items", "customers", "returns")])
        finally:
            conn.close()
    assert dumps[0] == dumps[1]
    text_a = (a / "datasources.yaml").read_text().replace(str(a), "HOME")
    assert text_a == (b / "datasources.yaml").read_text().replace(str(b), "HOME")


def test_custom_datasources_path(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "ds.yaml"
    assert create_demo(tmp_path / "home", datasources_path=target) == target
    assert not (tmp_path / "home" / "datasources.yaml").exists()
    assert len(load_datasources(target)) == 3


def test_demo_questions_name_real_tables(demo_home: Path) -> None:
    configs = {c.id: c for c in load_datasources(demo_home / "datasources.yaml")}
    for q in DEMO_QUESTIONS:
        url = configs[q.datasource].url
        tables = set(duckdb_tables(db_path(url)) if configs[q.datasource].is_duckdb else sqlite_tables(db_path(url)))
        assert set(q.tables) <= tables, q


def test_adapters_read_the_demo(demo_home: Path) -> None:
    """Through the product's own adapters: 25+ tables, keys, documentation and PII flags."""
    from datetime import UTC, datetime

    from nl2sql_assets.adapters import open_adapter

    snapshots = {}
    for config in load_datasources(demo_home / "datasources.yaml"):
        adapter = open_adapter(config, stats_budget_s=20)
        try:
            snapshots[config.id] = adapter.read_snapshot(datetime(2026, 1, 1, tzinfo=UTC))
        finally:
            adapter.close()
    assert sum(1 for s in snapshots.values() for t in s.tables if t.kind == "table") >= 25
    assert snapshots["commerce"].datasource.dialect == "duckdb" and snapshots["hr"].datasource.dialect == "sqlite"

    commerce, hr = snapshots["commerce"], snapshots["hr"]
    returns = commerce.table("returns")
    assert returns is not None and [(fk.columns, fk.ref_table, fk.ref_columns, fk.source)
                                    for fk in returns.foreign_keys] == [
        (["order_id", "line_no"], "order_items", ["order_id", "line_no"], "foreign_key"),
        (["order_id"], "orders", ["order_id"], "dbt")]  # the demo's dbt project declares the second
    orders = commerce.table("orders")
    assert orders is not None and orders.comment and orders.row_count == 1500
    assert sorted(fk.columns[0] for fk in orders.foreign_keys if fk.ref_table == "addresses") == [
        "billing_address_id", "shipping_address_id"]
    employees = hr.table("employees")
    assert employees is not None and employees.description and employees.description.startswith("Everyone")
    assert any(fk.columns == ["manager_id"] and fk.ref_table == "employees" for fk in employees.foreign_keys)
    manager = employees.column("manager_id")
    assert manager is not None and "supervisor" in manager.synonyms

    flagged = {(ds, t.name, c.name) for ds, s in snapshots.items() for t in s.tables for c in t.columns if c.pii}
    for expected in [("commerce", "customers", "email"), ("commerce", "customers", "phone"),
                     ("hr", "employees", "iban"), ("hr", "employees", "work_email"),
                     ("hr", "employees", "national_id"), ("support", "contacts", "email")]:
        assert expected in flagged, expected
    # the commerce dbt project: descriptions over the comments, values, metrics, domains, a warning
    assert returns.text == "Returned order lines (RMAs) and their refunds, one row per return request"
    assert returns.comment == "Returned order lines and their refunds"
    assert commerce.table("shipments").column("carrier").stats.top_values == ["DHL", "UPS", "PostNL", "FedEx"]
    assert {"booked_revenue", "monthly_revenue_total"} <= {m.name for m in commerce.datasource.metrics}
    assert commerce.datasource.domains == ["commerce", "sales", "logistics", "after_sales"]
    assert commerce.warnings == ["dbt model 'model.commerce.metricflow_time_spine' "
                                 "(commerce.main.metricflow_time_spine) matches no table"]
    for s in snapshots.values():
        for t in s.tables:
            for c in t.columns:
                if c.pii and c.stats is not None:
                    assert c.stats.min_value is None and c.stats.max_value is None and not c.stats.top_values
