"""The generated schemas of ``scale.py``: realistic table and column names, foreign keys, a few
rows, as statements valid in SQLite, DuckDB and PostgreSQL; and the database they go into."""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROWS = 8

AREAS = ("sales", "billing", "crm", "inventory", "shipping", "hr", "payroll", "support", "marketing", "finance",
         "procurement", "analytics", "web", "mobile", "partner", "legal", "facility", "fleet", "audit", "risk",
         "loyalty", "pricing", "catalog", "warehouse", "returns")
ENTITIES = ("customer", "order", "invoice", "payment", "product", "supplier", "employee", "ticket", "campaign",
            "contract", "asset", "vehicle", "shipment", "account", "event", "store", "region", "coupon",
            "refund", "review", "subscription", "lead", "opportunity", "quote", "budget")
SUFFIXES = ("s", "_history", "_snapshots", "_daily_totals", "_audit_log")
#: (name, type, sample value for row r) — a table takes ~17 of these after its keys, rotated per table.
COLUMNS: tuple[tuple[str, str, Any], ...] = (
    ("name", "VARCHAR(120)", lambda r: f"'item {r}'"),
    ("code", "VARCHAR(20)", lambda r: f"'C{r:05d}'"),
    ("status", "VARCHAR(20)", lambda r: ("'active'", "'closed'", "'pending'")[r % 3]),
    ("category", "VARCHAR(40)", lambda r: ("'standard'", "'premium'")[r % 2]),
    ("description", "VARCHAR(400)", lambda r: f"'note number {r}'"),
    ("created_at", "TIMESTAMP", lambda r: f"'2025-{1 + r % 12:02d}-{1 + r % 28:02d} 10:00:00'"),
    ("updated_at", "TIMESTAMP", lambda r: f"'2025-{1 + r % 12:02d}-{1 + r % 28:02d} 12:00:00'"),
    ("valid_from", "DATE", lambda r: f"'2024-{1 + r % 12:02d}-01'"),
    ("amount", "NUMERIC(12, 2)", lambda r: f"{10.5 * r:.2f}"),
    ("currency", "VARCHAR(3)", lambda r: ("'EUR'", "'USD'")[r % 2]),
    ("quantity", "INTEGER", lambda r: str(r * 3)),
    ("unit_price", "NUMERIC(10, 2)", lambda r: f"{2.25 * r:.2f}"),
    ("discount_rate", "NUMERIC(5, 4)", lambda r: f"{(r % 10) / 100:.4f}"),
    ("tax_amount", "NUMERIC(12, 2)", lambda r: f"{1.9 * r:.2f}"),
    ("country_code", "VARCHAR(2)", lambda r: ("'DE'", "'FR'", "'US'")[r % 3]),
    ("city", "VARCHAR(80)", lambda r: ("'Berlin'", "'Lyon'", "'Austin'")[r % 3]),
    ("postal_code", "VARCHAR(12)", lambda r: f"'{10000 + r}'"),
    ("is_active", "BOOLEAN", lambda r: ("TRUE", "FALSE")[r % 2]),
    ("priority", "INTEGER", lambda r: str(r % 5)),
    ("source_system", "VARCHAR(40)", lambda r: ("'erp'", "'web'")[r % 2]),
    ("external_ref", "VARCHAR(64)", lambda r: f"'EXT-{r}'"),
    ("created_by", "VARCHAR(60)", lambda r: ("'system'", "'import'")[r % 2]),
)
COLUMNS_PER_TABLE = 18  # + the primary key and one or two foreign keys: about 20


def table_names(count: int) -> list[str]:
    names = [f"{area}_{entity}{suffix}" for suffix in SUFFIXES for area in AREAS for entity in ENTITIES]
    if count > len(names):
        raise SystemExit(f"at most {len(names)} tables")
    return names[:count]


def schema_statements(count: int) -> tuple[list[str], list[str]]:
    """CREATE TABLE and INSERT statements valid in SQLite, DuckDB and PostgreSQL; the table names.

    Every table after the first references an earlier one (and every third a second one), so
    the foreign keys form a connected graph; ids 1..ROWS exist everywhere, so rows satisfy them.
    """
    names = table_names(count)
    statements: list[str] = []
    for i, name in enumerate(names):
        # a parent drawn among the earlier tables (seeded per table): early tables become hubs
        # referenced by a few dozen tables, as customers or products are, but no single table is
        # referenced by all of them (DuckDB's own open time grows with the square of the foreign
        # keys that point at one table: 1,000 of them cost 6-10 s per connect)
        rng = random.Random(i)
        parents = [names[rng.randrange(i)]] if i else []
        if i > 2 and i % 3 == 0:
            second = names[rng.randrange(i)]
            if second not in parents:
                parents.append(second)
        cols = ["id INTEGER PRIMARY KEY"]
        cols += [f"{p}_id INTEGER REFERENCES {p} (id)" for p in parents]
        chosen = [COLUMNS[(i + k) % len(COLUMNS)] for k in range(COLUMNS_PER_TABLE)]
        cols += [f"{c} {t}" for c, t, _ in chosen]
        statements.append(f"CREATE TABLE {name} ({', '.join(cols)})")
        rows = []
        for r in range(1, ROWS + 1):
            values = [str(r)] + [str(1 + (r + j) % ROWS) for j in range(len(parents))]
            values += [v(r) for _, _, v in chosen]
            rows.append(f"({', '.join(values)})")
        statements.append(f"INSERT INTO {name} VALUES {', '.join(rows)}")
    return statements, names


# ---------------------------------------------------------------------------------- engines


class Database:
    """One generated database: its datasource URL, and DDL on it."""

    def __init__(self, engine: str, work: Path, postgres_url: str) -> None:
        self.engine = engine
        self.schema = f"nl2sql_scale_{os.getpid()}"
        self.path = work / ("schema.sqlite" if engine == "sqlite" else "schema.duckdb")
        self.postgres_url = postgres_url

    @property
    def url(self) -> str:
        if self.engine == "sqlite":
            return f"sqlite:///{self.path}"
        if self.engine == "duckdb":
            return f"duckdb:///{self.path}"
        return self.postgres_url

    @property
    def schemas(self) -> list[str] | None:
        return [self.schema] if self.engine == "postgres" else None

    def execute(self, statements: Sequence[str]) -> None:
        if self.engine == "sqlite":
            con = sqlite3.connect(self.path)
            con.execute("PRAGMA foreign_keys = ON")
            for s in statements:
                con.execute(s)
            con.commit()
            con.close()
        elif self.engine == "duckdb":
            import duckdb

            con = duckdb.connect(str(self.path))
            for s in statements:
                con.execute(s)
            con.close()
        else:
            from sqlalchemy import create_engine, text

            engine = create_engine(self.postgres_url)
            with engine.connect() as con:
                con.execute(text(f"CREATE SCHEMA IF NOT EXISTS {self.schema}"))
                con.execute(text(f"SET search_path TO {self.schema}"))
                for start in range(0, len(statements), 400):  # commit often: one lock per table
                    for s in statements[start:start + 400]:
                        con.execute(text(s))
                    con.commit()
                    con.execute(text(f"SET search_path TO {self.schema}"))
                created = [s.split()[2] for s in statements if s.startswith("CREATE TABLE")]
                for start in range(0, len(created), 200):  # only this schema's tables; few locks at a time
                    for name in created[start:start + 200]:
                        con.execute(text(f"ANALYZE {self.schema}.{name}"))
                    con.commit()
            engine.dispose()

    def drop(self) -> None:
        if self.engine != "postgres":
            return
        from sqlalchemy import create_engine, text

        engine = create_engine(self.postgres_url)
        with engine.connect() as con:  # table by table: one CASCADE over thousands exhausts the lock table
            names = con.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = :s"),
                                {"s": self.schema}).scalars().all()
            for start in range(0, len(names), 200):
                for name in names[start:start + 200]:
                    con.execute(text(f'DROP TABLE IF EXISTS {self.schema}."{name}" CASCADE'))
                con.commit()
            con.execute(text(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE"))
            con.commit()
        engine.dispose()
