"""Every adapter against a real database: SQLite and DuckDB files, PostgreSQL and MariaDB servers.

One parametrized suite; each test builds the schema of ``tests/fixtures/sql/adapters/<engine>.sql``
in a fresh database (or PostgreSQL schema) and drops it afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
import sqlite3
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from nl2sql_assets.adapters import datasource_info, open_adapter
from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter
from nl2sql_assets.adapters.stats import BUDGET_EXHAUSTED, VIEW_NOTE
from nl2sql_assets.config import ConfigError, DatasourceConfig
from nl2sql_assets.errors import DatasourceError, DatasourceUnavailableError
from nl2sql_assets.schema.fingerprint import compute_fingerprint, compute_metadata_hash
from nl2sql_assets.schema.models import SchemaSnapshot, Table
from tests.conftest import FIXTURES, MARIADB_URL, POSTGRES_URL, require_server

DDL = FIXTURES / "sql" / "adapters"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
HOSTILE = 'x"; DROP TABLE y; --'
HOSTILE_BACKTICK = "x`; DROP TABLE y; --"
HOSTILE_COLUMNS = ["select", "Mixed Case", "semi;colon", "ünïcødé 表", "pct%s", "co:lon"]
PII_VALUES = [
    "alice@example.com", "bob@example.org", "carol@example.net", "dave@example.com", "erin@example.com",
    "Alice Archer", "Bob Baker", "Carol Cole", "Dave Doe", "Erin East",
    "+1 415 555 0101", "+1 415 555 0102", "+44 20 7946 0958", "+49 30 1234567",
    "4111 1111 1111 1111", "5500 0000 0000 0004", "3400 0000 0000 009",
]
PASSWORD = "Sup3rS3cretPw"
ENGINES = [
    "sqlite",
    "duckdb",
    pytest.param("postgresql", marks=pytest.mark.server),
    pytest.param("mariadb", marks=pytest.mark.server),
]


def split_statements(sql: str) -> list[str]:
    """Statements end with ``;`` at the end of a line (identifiers may hold ``;`` mid-line)."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("-- "))
    return [s.strip() for s in re.split(r";[ \t]*(?:\n|$)", body) if s.strip()]


@dataclass
class Target:
    """A database built from the engine's DDL file, and how to reach it."""

    engine: str
    url: str
    schemas: list[str] | None
    schema_name: str | None
    run: Callable[[str], list[tuple[object, ...]]]
    quote: Callable[[str], str]
    path: Path | None = None

    def config(self, **overrides: object) -> DatasourceConfig:
        fields: dict[str, object] = {"id": f"ds_{self.engine}", "url": self.url, "schemas": self.schemas}
        fields.update(overrides)
        return DatasourceConfig.model_validate(fields)

    def snapshot(self, **kwargs: object) -> SchemaSnapshot:
        config = kwargs.pop("config", None) or self.config()
        adapter = open_adapter(config, **kwargs)  # type: ignore[arg-type]
        try:
            return adapter.read_snapshot(NOW)
        finally:
            adapter.close()

    def structure(self, config: DatasourceConfig | None = None) -> list[Table]:
        adapter = open_adapter(config or self.config())
        try:
            return adapter.read_structure()
        finally:
            adapter.close()


def _dbapi_runner(url: str, prelude: list[str] | None = None) -> Callable[[str], list[tuple[object, ...]]]:
    def run(sql: str) -> list[tuple[object, ...]]:
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        raw = engine.raw_connection()
        try:
            cur = raw.cursor()
            for stmt in prelude or []:
                cur.execute(stmt)
            rows: list[tuple[object, ...]] = []
            for stmt in split_statements(sql):
                cur.execute(stmt)
                if cur.description:
                    rows = [tuple(r) for r in cur.fetchall()]
            raw.commit()
            return rows
        finally:
            raw.close()
            engine.dispose()
    return run


@pytest.fixture(params=ENGINES)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    engine = request.param
    ddl = (DDL / f"{engine}.sql").read_text(encoding="utf-8")
    if engine == "sqlite":
        path = tmp_path / "shop.sqlite"

        def run_sqlite(sql: str) -> list[tuple[object, ...]]:
            con = sqlite3.connect(path)
            try:
                rows: list[tuple[object, ...]] = []
                for stmt in split_statements(sql):
                    rows = con.execute(stmt).fetchall()
                con.commit()
                return rows
            finally:
                con.close()

        run_sqlite(ddl)
        yield Target(engine, f"sqlite:///{path}", None, None, run_sqlite,
                     lambda n: '"' + n.replace('"', '""') + '"', path)
    elif engine == "duckdb":
        import duckdb

        path = tmp_path / "shop.duckdb"

        def run_duckdb(sql: str) -> list[tuple[object, ...]]:
            con = duckdb.connect(str(path))
            try:
                rows: list[tuple[object, ...]] = []
                for stmt in split_statements(sql):
                    rows = con.execute(stmt).fetchall()
                return rows
            finally:
                con.close()

        run_duckdb(ddl)
        yield Target(engine, f"duckdb:///{path}", None, "main", run_duckdb,
                     lambda n: '"' + n.replace('"', '""') + '"', path)
    elif engine == "postgresql":
        schema = request.getfixturevalue("pg_schema")
        run_pg = _dbapi_runner(POSTGRES_URL, [f'SET search_path TO "{schema}"'])
        run_pg(ddl)
        yield Target(engine, POSTGRES_URL, [schema], schema, run_pg, lambda n: '"' + n.replace('"', '""') + '"')
    else:
        url = request.getfixturevalue("mariadb_url")
        run_my = _dbapi_runner(url)
        run_my(ddl)
        yield Target(engine, url, None, None, run_my, lambda n: "`" + n.replace("`", "``") + "`")


def _table(tables: list[Table] | SchemaSnapshot, name: str) -> Table:
    items = tables.tables if isinstance(tables, SchemaSnapshot) else tables
    found = [t for t in items if t.name == name]
    assert len(found) == 1, f"{name} not found in {[t.name for t in items]}"
    return found[0]


# --------------------------------------------------------------------------------------------
# structure
# --------------------------------------------------------------------------------------------
def test_structure_tables_views_keys(target: Target) -> None:
    tables = target.structure()
    names = {t.name for t in tables}
    expected = {"customers", "products", "orders", "order_items", "shipments", "warehouses", "events",
                "paid_orders", HOSTILE, "y", "order"}
    if target.engine == "mariadb":
        expected.add(HOSTILE_BACKTICK)
    assert names == expected
    assert {t.schema_name for t in tables} == {target.schema_name}
    assert _table(tables, "paid_orders").kind == "view"
    assert [c.name for c in _table(tables, "paid_orders").columns] == ["order_id", "customer_id", "total"]
    assert _table(tables, "orders").kind == "table"

    customers = _table(tables, "customers")
    assert customers.primary_key == ["customer_id"]
    assert [c.name for c in customers.columns] == ["customer_id", "email", "full_name", "phone", "status",
                                                  "created_at"]
    assert [c.ordinal for c in customers.columns] == [1, 2, 3, 4, 5, 6]
    email = customers.column("email")
    assert email is not None and email.nullable is False and email.type_family == "text"
    assert customers.column("customer_id").is_primary_key  # type: ignore[union-attr]
    assert customers.column("customer_id").nullable is False  # type: ignore[union-attr]
    assert customers.column("created_at").type_family == "datetime"  # type: ignore[union-attr]
    assert _table(tables, "products").column("price").type_family == "decimal"  # type: ignore[union-attr]
    assert _table(tables, "orders").column("ordered_on").type_family == "date"  # type: ignore[union-attr]

    items = _table(tables, "order_items")
    assert items.primary_key == ["order_id", "product_id"]
    assert sorted((fk.ref_table, tuple(fk.pairs)) for fk in items.foreign_keys) == [
        ("orders", (("order_id", "order_id"),)), ("products", (("product_id", "product_id"),))]
    assert all(fk.ref_schema == target.schema_name for fk in items.foreign_keys)

    shipments = _table(tables, "shipments")
    assert len(shipments.foreign_keys) == 1
    composite = shipments.foreign_keys[0]
    assert composite.ref_table == "order_items"
    assert composite.pairs == [("order_id", "order_id"), ("product_id", "product_id")]
    assert shipments.column("order_id").is_foreign_key and shipments.column("product_id").is_foreign_key  # type: ignore[union-attr]
    assert not shipments.column("carrier").is_foreign_key  # type: ignore[union-attr]

    orders = _table(tables, "orders")
    assert [(fk.ref_table, fk.pairs) for fk in orders.foreign_keys] == [("customers", [("customer_id", "customer_id")])]
    assert [u.columns for u in _table(tables, "products").unique_constraints] == [["sku"]]
    assert [sorted(u.columns) for u in _table(tables, "warehouses").unique_constraints] == [["code", "region"]]
    assert all(t.row_count is None and all(c.stats is None for c in t.columns) for t in tables)


def test_comments_from_the_database(target: Target) -> None:
    tables = target.structure()
    customers, orders = _table(tables, "customers"), _table(tables, "orders")
    if target.engine == "sqlite":  # SQLite has no comments: annotations are the way
        assert customers.comment is None and customers.column("email").comment is None  # type: ignore[union-attr]
        return
    assert customers.comment == "People who buy from the shop"
    assert orders.comment == "One row per checkout"
    assert customers.column("email").comment == "Login e-mail address"  # type: ignore[union-attr]
    assert customers.column("phone").comment is None  # type: ignore[union-attr]
    assert _table(tables, "products").comment is None


def test_annotations_overlay_comments_and_count_in_metadata_hash(target: Target) -> None:
    prefix = f"{target.schema_name}." if target.schema_name else ""
    config = target.config(annotations={
        "tables": {"customers": "Shop customers", f"{prefix}orders": "Checkouts", "nope": "typo"},
        "columns": {"customers.email": "Where receipts go", f"{prefix}orders.total": "Gross amount"},
        "synonyms": {"orders.total": ["revenue", "amount"], "orders.missing": ["x"]},
    })
    snap = target.snapshot(config=config, stats_budget_s=30)
    customers, orders = snap.table("customers"), snap.table("orders")
    assert customers is not None and orders is not None
    assert customers.description == "Shop customers" and orders.description == "Checkouts"
    assert customers.column("email").description == "Where receipts go"  # type: ignore[union-attr]
    total = orders.column("total")
    assert total is not None and total.description == "Gross amount" and total.synonyms == ["amount", "revenue"]
    if target.engine != "sqlite":
        assert customers.comment == "People who buy from the shop"  # the database comment stays
        assert customers.text == "Shop customers"
    assert any("'nope'" in w for w in snap.warnings)
    assert any("orders.missing" in w for w in snap.warnings)
    plain = target.snapshot(stats_budget_s=0)
    assert plain.fingerprint == snap.fingerprint
    assert plain.metadata_hash != snap.metadata_hash


def test_read_structure_equals_full_snapshot_hashes(target: Target) -> None:
    """The drift check's fast path agrees with the full snapshot (value-based PII flags included)."""
    config = target.config(description="Web shop", domains=["commerce"],
                           annotations={"columns": {"orders.total": "Gross amount"}})
    adapter = open_adapter(config, sample_rows=20)
    try:
        structure = adapter.read_structure()
        snap = adapter.read_snapshot(NOW)
        info = datasource_info(config, adapter.dialect)
    finally:
        adapter.close()
    assert compute_fingerprint(structure) == snap.fingerprint
    assert compute_metadata_hash(info, structure) == snap.metadata_hash
    assert snap.datasource.dialect == target.engine
    assert snap.datasource.description == "Web shop" and snap.datasource.domains == ["commerce"]
    # value-based flags differ between the two and must not matter
    assert not _table(structure, "shipments").column("contact").pii  # type: ignore[union-attr]
    assert snap.table("shipments").column("contact").pii  # type: ignore[union-attr]
    # a second snapshot of an unchanged database: same hashes
    again = target.snapshot(config=config)
    assert (again.fingerprint, again.metadata_hash) == (snap.fingerprint, snap.metadata_hash)


def test_structure_change_changes_fingerprint(target: Target) -> None:
    before = compute_fingerprint(target.structure())
    target.run("ALTER TABLE products ADD COLUMN weight_kg DECIMAL(8, 3)")
    after_tables = target.structure()
    assert compute_fingerprint(after_tables) != before
    assert _table(after_tables, "products").columns[-1].name == "weight_kg"


# --------------------------------------------------------------------------------------------
# hostile identifiers
# --------------------------------------------------------------------------------------------
def test_hostile_identifiers_are_indexed_and_drop_nothing(target: Target) -> None:
    snap = target.snapshot(stats_budget_s=60)
    hostile = snap.table(HOSTILE)
    assert hostile is not None and hostile.kind == "table"
    assert [c.name for c in hostile.columns] == HOSTILE_COLUMNS
    assert hostile.row_count == 1 and hostile.row_count_status == "exact"
    stats = {c.name: c.stats for c in hostile.columns}
    assert stats["select"] is not None and stats["select"].min_value == "1"
    assert stats["pct%s"].max_value == "5"  # type: ignore[union-attr]
    assert stats["semi;colon"].min_value == "a;b"  # type: ignore[union-attr]
    assert stats["ünïcødé 表"].min_value == "ünï"  # type: ignore[union-attr]
    assert stats["co:lon"].min_value == "6"  # type: ignore[union-attr]
    assert snap.table("order").row_count == 1  # type: ignore[union-attr]
    if target.engine == "mariadb":
        backtick = snap.table(HOSTILE_BACKTICK)
        assert backtick is not None and [c.name for c in backtick.columns] == ["back`tick"]
        assert backtick.row_count == 1
    assert not [w for w in snap.warnings if "failed" in w]
    # nothing was dropped or changed
    assert target.run("SELECT i FROM y") == [(42,)]
    assert target.run(f"SELECT COUNT(*) FROM {target.quote(HOSTILE)}") == [(1,)]


# --------------------------------------------------------------------------------------------
# PII
# --------------------------------------------------------------------------------------------
def test_pii_flags_by_name_and_value_and_no_value_leaks(target: Target, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    snap = target.snapshot(stats_budget_s=60)
    customers, shipments = snap.table("customers"), snap.table("shipments")
    assert customers is not None and shipments is not None
    flags = {c.name: c.pii_kind for c in customers.columns}
    assert flags == {"customer_id": None, "email": "email", "full_name": "person_name", "phone": "phone",
                     "status": None, "created_at": None}
    ship = {c.name: c.pii_kind for c in shipments.columns}
    assert ship["contact"] == "email" and ship["payment_ref"] == "card_number" and ship["carrier"] is None
    for table in (customers, shipments):
        for column in table.columns:
            assert column.stats is not None
            if column.pii:
                assert column.stats.min_value is None and column.stats.max_value is None
                assert column.stats.top_values == []
                assert column.stats.distinct_count is not None  # counts are fine
                assert "withheld" in (column.stats.note or "")
    text = snap.model_dump_json()
    leaked = [v for v in PII_VALUES if v in text or v in caplog.text]
    assert leaked == []
    # non-PII statistics are still there
    status = customers.column("status")
    assert status is not None and status.stats is not None and status.stats.top_values == ["active", "inactive"]


def test_structure_only_flags_pii_by_name(target: Target) -> None:
    customers = _table(target.structure(), "customers")
    assert customers.column("email").pii and customers.column("email").pii_kind == "email"  # type: ignore[union-attr]
    assert not customers.column("status").pii  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------
def test_exact_statistics_of_small_tables(target: Target) -> None:
    snap = target.snapshot(stats_budget_s=60)
    orders = snap.table("orders")
    assert orders is not None
    assert orders.row_count == 6 and orders.row_count_status == "exact" and orders.stats_note is None
    total = orders.column("total").stats  # type: ignore[union-attr]
    assert total is not None and total.status == "exact" and total.sample_size == 6
    assert total.null_fraction == pytest.approx(1 / 6, abs=1e-5)
    assert total.distinct_count == 5
    assert float(total.min_value) == 0.0 and float(total.max_value) == 149.0  # type: ignore[arg-type]
    status = orders.column("status").stats  # type: ignore[union-attr]
    assert status is not None and status.distinct_count == 3 and status.top_values == ["paid", "open", "refunded"]
    ordered_on = orders.column("ordered_on").stats  # type: ignore[union-attr]
    assert ordered_on is not None and ordered_on.min_value == "2024-06-01" and ordered_on.max_value == "2024-06-05"
    assert snap.table("products").column("title").stats.top_values == []  # type: ignore[union-attr] # all distinct
    view = snap.table("paid_orders")
    assert view is not None and view.row_count_status == "skipped" and view.stats_note == VIEW_NOTE
    assert snap.table("y").row_count == 1  # type: ignore[union-attr]


def test_sampling_a_table_bigger_than_the_sample(target: Target) -> None:
    snap = target.snapshot(stats_budget_s=60, sample_rows=20)
    events = snap.table("events")
    assert events is not None
    assert events.row_count_status in ("exact", "estimated")
    assert events.row_count is not None and events.row_count >= 20
    if events.row_count_status == "exact":
        assert events.row_count == 60
    assert events.stats_note is not None and "sample" in events.stats_note
    for column in events.columns:
        assert column.stats is not None and column.stats.status == "sampled"
        assert column.stats.sample_size == 20 and "first 20 rows" in (column.stats.note or "")
    kind = events.column("kind").stats  # type: ignore[union-attr]
    assert kind is not None and kind.top_values == ["view", "click"]
    assert snap.table("orders").row_count_status == "exact"  # type: ignore[union-attr] # smaller than the sample


def test_zero_budget_skips_every_table(target: Target) -> None:
    snap = target.snapshot(stats_budget_s=0)
    for table in snap.tables:
        assert table.row_count is None and table.row_count_status == "skipped"
        expected = VIEW_NOTE if table.kind == "view" else BUDGET_EXHAUSTED
        assert table.stats_note == expected
        assert all(c.stats is not None and c.stats.status == "skipped" and c.stats.note == expected
                   for c in table.columns)


def test_without_stats(target: Target) -> None:
    adapter = open_adapter(target.config())
    try:
        snap = adapter.read_snapshot(NOW, with_stats=False)
    finally:
        adapter.close()
    assert all(t.row_count is None and all(c.stats is None for c in t.columns) for t in snap.tables)


# --------------------------------------------------------------------------------------------
# schemas filter
# --------------------------------------------------------------------------------------------
def _make_other_schema(target: Target, request: pytest.FixtureRequest) -> str:
    other = f"o_{uuid.uuid4().hex[:8]}"
    ddl = (DDL / "other_schema.sql").read_text(encoding="utf-8").replace("{schema}", target.quote(other))
    create = "DATABASE" if target.engine == "mariadb" else "SCHEMA"
    target.run(f"CREATE {create} {target.quote(other)}")
    cascade = "" if target.engine == "mariadb" else " CASCADE"
    request.addfinalizer(lambda: target.run(f"DROP {create} IF EXISTS {target.quote(other)}{cascade}"))
    target.run(ddl)
    return other


@pytest.mark.parametrize("target", ["duckdb", pytest.param("postgresql", marks=pytest.mark.server),
                                    pytest.param("mariadb", marks=pytest.mark.server)], indirect=True)
def test_schemas_filter(target: Target, request: pytest.FixtureRequest) -> None:
    other = _make_other_schema(target, request)
    if target.engine == "duckdb":  # default: every schema of the file
        default = {(t.schema_name, t.name) for t in target.structure()}
        assert ("main", "orders") in default and (other, "audit_log") in default
        main_only = target.structure(target.config(schemas=["main"]))
        assert {t.schema_name for t in main_only} == {"main"}
        just_other = target.structure(target.config(schemas=[other]))
        assert {(t.schema_name, t.name) for t in just_other} == {(other, "audit_log")}
        return
    # PostgreSQL: the configured test schema; MariaDB: the URL's database by default
    assert "audit_log" not in {t.name for t in target.structure()}
    own = target.schema_name if target.engine == "postgresql" else re.sub(r"\?.*$", "", target.url).rsplit("/", 1)[1]
    both = target.structure(target.config(schemas=[own, other]))
    pairs = {(t.schema_name, t.name) for t in both}
    assert (target.schema_name, "orders") in pairs
    assert (other, "audit_log") in pairs
    just_other = target.structure(target.config(schemas=[other]))
    assert {(t.schema_name, t.name) for t in just_other} == {(other, "audit_log")}


@pytest.mark.parametrize("target", ENGINES, indirect=True)
def test_unknown_configured_schema_is_a_clear_error(target: Target) -> None:
    with pytest.raises(DatasourceError, match="nosuchschema") as info:
        target.structure(target.config(schemas=["nosuchschema"]))
    assert info.value.datasource_id == f"ds_{target.engine}"


# --------------------------------------------------------------------------------------------
# read-only
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["sqlite", "duckdb"], indirect=True)
def test_files_are_opened_read_only(target: Target) -> None:
    assert target.path is not None
    digest = hashlib.sha256(target.path.read_bytes()).hexdigest()
    target.snapshot(stats_budget_s=60)
    assert hashlib.sha256(target.path.read_bytes()).hexdigest() == digest


def test_missing_files_are_errors_and_not_created(tmp_path: Path) -> None:
    for url, path in ((f"sqlite:///{tmp_path / 'nope.sqlite'}", tmp_path / "nope.sqlite"),
                      (f"duckdb:///{tmp_path / 'nope.duckdb'}", tmp_path / "nope.duckdb")):
        adapter = open_adapter(DatasourceConfig(id="gone", url=url))
        with pytest.raises(DatasourceUnavailableError, match="not found") as info:
            adapter.read_structure()
        adapter.close()
        assert info.value.datasource_id == "gone" and "gone" in str(info.value)
        assert not path.exists()


def test_locked_duckdb_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time\n"
         f"con = duckdb.connect({str(path)!r}); con.execute('CREATE TABLE t(i INT)')\n"
         "print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        adapter = open_adapter(DatasourceConfig(id="busy", url=f"duckdb:///{path}"))
        with pytest.raises(DatasourceUnavailableError, match="locked") as info:
            adapter.read_structure()
        assert info.value.datasource_id == "busy"
    finally:
        holder.communicate(input="", timeout=30)


def test_broken_sqlite_view_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "broken.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE a (id INTEGER PRIMARY KEY); CREATE TABLE b (x INTEGER);"
                      "CREATE VIEW v AS SELECT x FROM b; DROP TABLE b;")
    con.close()
    snap = open_adapter(DatasourceConfig(id="broken", url=f"sqlite:///{path}")).read_snapshot(NOW)
    assert [t.name for t in snap.tables] == ["a"]
    assert any("view v skipped" in w for w in snap.warnings)


@pytest.mark.parametrize("target", ["sqlite", pytest.param("postgresql", marks=pytest.mark.server),
                                    pytest.param("mariadb", marks=pytest.mark.server)], indirect=True)
def test_dialect_fast_path_matches_sqlalchemy_reflection(target: Target) -> None:
    """The catalog fast paths and SQLAlchemy's bulk reflection agree (declared-type spelling aside).

    Where they differ, the catalog is right and SQLAlchemy is not, so those spots are left out:
    its MySQL reflection parses SHOW CREATE TABLE and reports the column ``back`tick`` as
    ``back``tick``, reports view columns as nullable, and its SQLite reflection misses
    column-level ``UNIQUE`` (so the fast path's unique constraints must only be a superset).
    """
    fast = SQLAlchemyAdapter(target.config(), reflection="auto")
    generic = SQLAlchemyAdapter(target.config(), reflection="inspector")
    try:
        a, b = fast.read_structure(), generic.read_structure()
    finally:
        fast.close()
        generic.close()

    def shape(tables: list[Table]) -> list[object]:
        return sorted(
            (t.schema_name, t.name, t.kind, t.comment, tuple(t.primary_key),
             tuple((c.name, c.type_family, c.nullable or t.kind == "view", c.comment, c.is_primary_key,
                    c.is_foreign_key, c.pii_kind) for c in t.columns),
             tuple(sorted((tuple(fk.columns), fk.ref_schema, fk.ref_table, tuple(fk.ref_columns))
                          for fk in t.foreign_keys)))
            for t in tables if t.name != HOSTILE_BACKTICK)

    def uniques(tables: list[Table]) -> set[tuple[str, tuple[str, ...]]]:
        return {(t.name, tuple(u.columns)) for t in tables for u in t.unique_constraints}

    assert shape(a) == shape(b)
    assert uniques(a) >= uniques(b)
    assert ("warehouses", ("region", "code")) in uniques(b)
    assert ("products", ("sku",)) in uniques(a)


# --------------------------------------------------------------------------------------------
# credentials and errors
# --------------------------------------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


@pytest.mark.server
@pytest.mark.parametrize("form", ["literal", "env"])
def test_password_never_in_snapshot_logs_or_errors(form: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    require_server(POSTGRES_URL, "PostgreSQL")
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("H1_PG_PASSWORD", PASSWORD)
    secret = PASSWORD if form == "literal" else "${H1_PG_PASSWORD}"
    run = _dbapi_runner(POSTGRES_URL, [f'SET search_path TO "{pg_schema}"'])
    run((DDL / "postgresql.sql").read_text(encoding="utf-8"))
    config = DatasourceConfig(id="pg_secret", url=f"postgresql+psycopg2://postgres:{secret}@127.0.0.1:5432/test",
                              schemas=[pg_schema])
    adapter = open_adapter(config, sample_rows=20)
    try:
        structure = adapter.read_structure()
        snap = adapter.read_snapshot(NOW)
    finally:
        adapter.close()
    assert snap.table("customers") is not None and structure
    assert PASSWORD not in snap.model_dump_json()
    assert PASSWORD not in json.dumps([t.model_dump(mode="json") for t in structure])

    bad = DatasourceConfig(id="pg_down", url=f"postgresql+psycopg2://postgres:{secret}@127.0.0.1:{_closed_port()}/test")
    with pytest.raises(DatasourceUnavailableError) as info:
        open_adapter(bad).read_structure()
    assert "pg_down" in str(info.value) and "unreachable" in str(info.value)
    assert PASSWORD not in _all_text(info.value)
    assert info.value.__cause__ is None

    for record in caplog.records:
        assert PASSWORD not in record.getMessage()
        assert PASSWORD not in str(record.args)
    assert PASSWORD not in caplog.text


def test_encoded_password_is_redacted_in_both_forms() -> None:
    port = _closed_port()
    for url in (f"postgresql+psycopg2://bob:p%40ss%2Fw0rd@127.0.0.1:{port}/db",
                f"mysql+pymysql://bob:p%40ss%2Fw0rd@127.0.0.1:{port}/db"):
        with pytest.raises(DatasourceUnavailableError) as info:
            open_adapter(DatasourceConfig(id="enc", url=url)).read_structure()
        text = _all_text(info.value)
        assert "p%40ss%2Fw0rd" not in text and "p@ss/w0rd" not in text
        assert "unreachable" in str(info.value)


def test_bad_url_unknown_driver_and_missing_driver() -> None:
    bad_port = DatasourceConfig(id="badurl", url=f"postgresql+psycopg2://u:{PASSWORD}@127.0.0.1:notaport/db")
    with pytest.raises(DatasourceUnavailableError, match="bad URL") as info:
        open_adapter(bad_port).read_structure()
    assert PASSWORD not in _all_text(info.value)

    unknown = DatasourceConfig(id="nodriver", url=f"postgresql+nosuchdriver://u:{PASSWORD}@127.0.0.1/db")
    with pytest.raises(DatasourceUnavailableError, match="unknown database type") as info:
        open_adapter(unknown).read_structure()
    assert PASSWORD not in _all_text(info.value)

    missing = DatasourceConfig(id="nodbapi", url=f"mysql+mysqldb://u:{PASSWORD}@127.0.0.1/db")
    with pytest.raises(DatasourceUnavailableError, match="missing driver") as info:
        open_adapter(missing).read_structure()
    assert "nodbapi" in str(info.value) and PASSWORD not in _all_text(info.value)


def test_missing_env_var_names_the_entry() -> None:
    config = DatasourceConfig(id="needs_env", url="postgresql+psycopg2://u:${H1_SURELY_UNSET_VAR}@127.0.0.1/db")
    with pytest.raises(ConfigError, match="H1_SURELY_UNSET_VAR") as info:
        open_adapter(config).read_structure()
    assert info.value.entry == "needs_env" and info.value.field == "url"


@pytest.mark.server
def test_postgres_role_without_schema_usage(pg_schema: str) -> None:
    run = _dbapi_runner(POSTGRES_URL, [f'SET search_path TO "{pg_schema}"'])
    run((DDL / "postgresql.sql").read_text(encoding="utf-8"))
    role = f"r_{uuid.uuid4().hex[:10]}"
    admin = _dbapi_runner(POSTGRES_URL)
    admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        url = POSTGRES_URL.replace("postgres@", f"{role}:{PASSWORD}@", 1)
        with pytest.raises(DatasourceUnavailableError, match="permission denied") as info:
            open_adapter(DatasourceConfig(id="pg_role", url=url, schemas=[pg_schema])).read_structure()
        assert pg_schema in str(info.value) and PASSWORD not in _all_text(info.value)
        # all schemas (the default): the unusable one is skipped, with a warning
        every = open_adapter(DatasourceConfig(id="pg_role", url=url)).read_snapshot(NOW, with_stats=False)
        assert f"schema {pg_schema} skipped: the role lacks USAGE on it" in every.warnings
        assert pg_schema not in {t.schema_name for t in every.tables}
        # with USAGE but no SELECT: structure is readable, statistics fail per table with a note
        admin(f'GRANT USAGE ON SCHEMA "{pg_schema}" TO "{role}"')
        snap = open_adapter(DatasourceConfig(id="pg_role", url=url, schemas=[pg_schema])).read_snapshot(NOW)
        orders = snap.table("orders")
        assert orders is not None and orders.row_count_status == "skipped"
        assert "permission denied" in (orders.stats_note or "")
        assert any("permission denied" in w for w in snap.warnings)
        assert PASSWORD not in snap.model_dump_json()
    finally:
        admin(f'DROP OWNED BY "{role}"; DROP ROLE IF EXISTS "{role}"')


@pytest.mark.server
def test_mariadb_user_without_privileges(mariadb_url: str) -> None:
    user = f"u_{uuid.uuid4().hex[:10]}"
    admin = _dbapi_runner(MARIADB_URL)
    for host in ("%", "localhost", "127.0.0.1"):
        admin(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY '{PASSWORD}'")
    try:
        url = mariadb_url.replace("root@", f"{user}:{PASSWORD}@", 1)
        with pytest.raises(DatasourceUnavailableError, match="permission denied") as info:
            open_adapter(DatasourceConfig(id="my_user", url=url)).read_structure()
        assert "my_user" in str(info.value) and PASSWORD not in _all_text(info.value)
        wrong = mariadb_url.replace("root@", f"{user}:Wr0ngPassw0rd@", 1)
        with pytest.raises(DatasourceUnavailableError) as info:
            open_adapter(DatasourceConfig(id="my_user", url=wrong)).read_structure()
        assert "Wr0ngPassw0rd" not in _all_text(info.value)
    finally:
        for host in ("%", "localhost", "127.0.0.1"):
            admin(f"DROP USER IF EXISTS '{user}'@'{host}'")


@pytest.mark.server
def test_postgres_tablesample_for_large_tables(pg_schema: str) -> None:
    run = _dbapi_runner(POSTGRES_URL, [f'SET search_path TO "{pg_schema}"'])
    run((DDL / "postgresql.sql").read_text(encoding="utf-8"))
    run("ANALYZE events")
    config = DatasourceConfig(id="pg_sample", url=POSTGRES_URL, schemas=[pg_schema])
    snap = open_adapter(config, sample_rows=2).read_snapshot(NOW)
    events = snap.table("events")
    assert events is not None
    assert events.row_count == 60 and events.row_count_status == "estimated"
    assert "TABLESAMPLE SYSTEM" in (events.stats_note or "") and "reltuples" in (events.stats_note or "")
    assert all(c.stats is not None and c.stats.status == "sampled" for c in events.columns)
