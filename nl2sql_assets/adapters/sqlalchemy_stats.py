"""Statistics queries for SQLAlchemy datasources (the :class:`~nl2sql_assets.adapters.stats.StatsBackend`
of :class:`~nl2sql_assets.adapters.sqlalchemy.SQLAlchemyAdapter`).

Kept apart from the adapter because it is a different concern (sampling SQL per dialect,
bounded row counts) and changes for different reasons than catalog reading. It needs only a
connection, the dialect name and the default schema, so it does not import the adapter.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from nl2sql_assets.adapters.stats import ColumnPlan, RowCount, Sample, TableKey
from nl2sql_assets.schema.models import Column, Table

_MINMAX_FAMILIES = frozenset({"integer", "float", "decimal", "text", "date", "datetime", "time"})
_NO_DISTINCT_FAMILIES = frozenset({"json", "other", "array"})
_PG_TABLESAMPLE_FACTOR = 20
_TEXT_SQL_DIALECTS = frozenset({"sqlite", "postgresql", "mysql", "mariadb"})

_PG_ESTIMATES = (
    "SELECT n.nspname, c.relname, c.reltuples FROM pg_class AS c "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p', 'm', 'f') AND n.nspname = ANY(:schemas)"
)


class SQLAlchemyStatsBackend:
    """Statistics queries for the connected dialect.

    SQLite, PostgreSQL and MySQL/MariaDB get SQL text with every identifier quoted by the
    dialect's ``IdentifierPreparer.quote_identifier`` (compiling Core statements cost ~15 ms a
    table, more than running them); other dialects get SQLAlchemy Core statements, which know
    their ``LIMIT``/``TOP`` spelling.
    """

    def __init__(self, conn: Connection, dialect: str, default_schema: str | None) -> None:
        """``dialect`` as the adapter names it (``mariadb`` apart from ``mysql``); ``default_schema``
        is the session's (the URL's database on MySQL/MariaDB), which tables with
        ``schema_name=None`` live in."""
        self.conn = conn
        self.dialect = dialect
        self.default_schema = default_schema
        self.text_sql = self.dialect in _TEXT_SQL_DIALECTS
        self.quote = conn.dialect.identifier_preparer.quote_identifier
        self.text_type = "CHAR" if self.dialect in ("mysql", "mariadb") else "TEXT"
        self.query_errors: tuple[type[BaseException], ...] = (sa.exc.DBAPIError, sa.exc.CompileError,
                                                               sqlite3.Error)

    # SQL text (known dialects) ----------------------------------------------------------------
    def _ref(self, table: Table) -> str:
        prefix = f"{self.quote(table.schema_name)}." if table.schema_name else ""
        return prefix + self.quote(table.name)

    def _sample_sql(self, table: Table, columns: Sequence[str], sample: Sample) -> str:
        cols = ", ".join(self.quote(c) for c in columns) or "1"
        source = self._ref(table)
        if sample.tablesample_percent is not None:
            source += f" TABLESAMPLE SYSTEM ({float(sample.tablesample_percent)!r})"
        return f"SELECT {cols} FROM {source} LIMIT {int(sample.limit)}"

    def _rows(self, sql: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in self.conn.exec_driver_sql(sql)]

    # SQLAlchemy Core (any other dialect) --------------------------------------------------------
    def _table(self, table: Table, columns: Sequence[str]) -> sa.TableClause:
        return sa.table(table.name, *(sa.column(c) for c in columns), schema=table.schema_name)

    def _sample(self, table: Table, columns: Sequence[str], sample: Sample) -> sa.Subquery:
        tbl = self._table(table, columns)
        if sample.tablesample_percent is not None:
            sampled = sa.tablesample(tbl, sa.func.system(sa.literal_column(repr(sample.tablesample_percent))),
                                     name="ts")
            select = sa.select(*(sampled.c[c] for c in columns))
        else:
            select = sa.select(*(tbl.c[c] for c in columns)) if columns else sa.select(sa.literal_column("1"))
            select = select.select_from(tbl)
        return select.limit(sample.limit).subquery("s")

    def estimated_row_counts(self, tables: Sequence[Table]) -> dict[TableKey, tuple[int, str]]:
        wanted = {(t.schema_name, t.name) for t in tables}
        out: dict[TableKey, tuple[int, str]] = {}
        if self.dialect == "postgresql":
            schemas = sorted({t.schema_name for t in tables if t.schema_name})
            for schema, name, tuples in self.conn.execute(sa.text(_PG_ESTIMATES), {"schemas": schemas}):
                if (schema, name) in wanted and tuples is not None and tuples > 0:
                    out[(schema, name)] = (int(tuples), "pg_class.reltuples (planner estimate)")
        elif self.dialect in ("mysql", "mariadb"):
            default_db = self.default_schema
            schemas = sorted({t.schema_name or default_db for t in tables if (t.schema_name or default_db)})
            rows = self.conn.execute(sa.text(
                "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA IN :schemas").bindparams(sa.bindparam("schemas", expanding=True)),
                {"schemas": schemas})
            for schema, name, count in rows:
                key = (None if schema == default_db else schema, name)
                if key in wanted and count is not None:
                    out[key] = (int(count), "information_schema.TABLES.TABLE_ROWS (estimate)")
        return out

    def bounded_row_count(self, table: Table, timeout_s: float) -> RowCount | None:
        if timeout_s <= 0:
            return None
        count_sql = sa.select(sa.func.count()).select_from(self._table(table, []))
        if self.dialect == "sqlite":
            raw = self.conn.connection.driver_connection
            deadline = time.monotonic() + timeout_s
            raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)  # type: ignore[union-attr]
            try:
                return int(self.conn.execute(count_sql).scalar_one()), "exact", "row count: COUNT(*)"
            except sa.exc.OperationalError:
                pass  # interrupted: fall back to the rowid bound
            finally:
                raw.set_progress_handler(None, 0)  # type: ignore[union-attr]
            try:
                top = self.conn.execute(sa.select(sa.func.max(sa.literal_column("rowid")))
                                        .select_from(self._table(table, []))).scalar()
            except sa.exc.DBAPIError:
                return None
            return (int(top), "estimated", "row count: max(rowid), COUNT(*) ran out of time") if top else None
        if self.dialect == "postgresql":
            self.conn.exec_driver_sql(f"SET statement_timeout = {max(1, int(timeout_s * 1000))}")
            try:
                return int(self.conn.execute(count_sql).scalar_one()), "exact", "row count: COUNT(*)"
            except sa.exc.OperationalError:
                return None
            finally:
                self.conn.exec_driver_sql("RESET statement_timeout")
        return None

    def choose_sample(self, table: Table, estimate: int | None, sample_rows: int) -> Sample:
        if (self.dialect == "postgresql" and estimate is not None
                and estimate > _PG_TABLESAMPLE_FACTOR * sample_rows):
            percent = round(min(100.0, max(0.001, 300.0 * sample_rows / estimate)), 4)
            return Sample(limit=sample_rows, tablesample_percent=percent)
        return Sample(limit=sample_rows)

    def probe(self, table: Table, columns: Sequence[str], limit: int) -> list[tuple[object, ...]]:
        if self.text_sql:
            return self._rows(self._sample_sql(table, columns, Sample(limit=limit)))
        tbl = self._table(table, columns)
        rows = self.conn.execute(sa.select(*(tbl.c[c] for c in columns)).select_from(tbl).limit(limit))
        return [tuple(r) for r in rows]

    def aggregate(self, table: Table, plans: Sequence[ColumnPlan], sample: Sample) -> tuple[object, ...]:
        if self.text_sql:
            parts = ["COUNT(*)"]
            for plan in plans:
                q = self.quote(plan.name)
                parts.append(f"COUNT({q})")
                if plan.distinct:
                    parts.append(f"COUNT(DISTINCT {q})")
                if plan.minmax:
                    parts.extend((f"MIN({q})", f"MAX({q})"))
            inner = self._sample_sql(table, [p.name for p in plans], sample)
            return self._rows(f"SELECT {', '.join(parts)} FROM ({inner}) AS s")[0]
        s = self._sample(table, [p.name for p in plans], sample)
        parts: list[Any] = [sa.func.count()]
        for plan in plans:
            col = s.c[plan.name]
            parts.append(sa.func.count(col))
            if plan.distinct:
                parts.append(sa.func.count(sa.distinct(col)))
            if plan.minmax:
                parts.extend((sa.func.min(col), sa.func.max(col)))
        return tuple(self.conn.execute(sa.select(*parts).select_from(s)).one())

    def top_values(self, table: Table, columns: Sequence[str], sample: Sample) -> list[tuple[int, object, int]]:
        if self.text_sql:
            inner = self._sample_sql(table, columns, sample)
            sql = " UNION ALL ".join(
                f"SELECT {i}, CAST({self.quote(c)} AS {self.text_type}), COUNT(*) FROM ({inner}) AS s{i} "
                f"WHERE {self.quote(c)} IS NOT NULL GROUP BY {self.quote(c)}"
                for i, c in enumerate(columns))
            return [(int(k), v, int(n)) for k, v, n in self._rows(sql)]  # type: ignore[call-overload]
        branches = []
        for position, name in enumerate(columns):
            s = self._sample(table, [name], sample)
            col = s.c[name]
            branches.append(sa.select(sa.literal_column(str(position)), sa.cast(col, sa.String()), sa.func.count())
                            .select_from(s).where(col.is_not(None)).group_by(col))
        query = branches[0] if len(branches) == 1 else sa.union_all(*branches)
        return [(int(k), v, int(n)) for k, v, n in self.conn.execute(query)]

    def supports_distinct(self, column: Column) -> bool:
        if self.dialect == "sqlite":
            return True
        if self.dialect == "postgresql" and column.declared_type.lower() == "jsonb":
            return True
        return column.type_family not in _NO_DISTINCT_FAMILIES

    def supports_minmax(self, column: Column) -> bool:
        if self.dialect == "sqlite":
            return column.type_family in _MINMAX_FAMILIES or column.type_family == "other"
        return column.type_family in _MINMAX_FAMILIES
