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

from nl2sql_assets.adapters.sqlalchemy_engine import LOCK_TIMEOUT_S, STATEMENT_TIMEOUT_S, session_limits_sql
from nl2sql_assets.adapters.stats import ColumnPlan, RowCount, Sample, TableKey
from nl2sql_assets.schema.models import Column, Table

_MINMAX_FAMILIES = frozenset({"integer", "float", "decimal", "text", "date", "datetime", "time"})
_NO_DISTINCT_FAMILIES = frozenset({"json", "other", "array"})
_PG_TABLESAMPLE_FACTOR = 20
_TEXT_SQL_DIALECTS = frozenset({"sqlite", "postgresql", "mysql", "mariadb"})
_SAMPLE_SEED = 0
#: How long statistics wait for another session's lock on a table before skipping it.
STATS_LOCK_WAIT_S = 2.0
_PG_LOCKED, _PG_CANCELED = "55P03", "57014"  # lock_not_available, query_canceled (statement_timeout)
_MY_LOCKED, _MY_TOO_LONG = {1205}, {1969, 3024}  # lock wait timeout; max_statement_time / max_execution_time

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
        self._limits = (STATEMENT_TIMEOUT_S, LOCK_TIMEOUT_S)  # the session's, set by the connector
        self._sqlite_deadline: float | None = None

    # time limits (stats.TimeLimits) -------------------------------------------------------------
    def limit_time(self, seconds: float | None) -> None:
        """Bound each following statement to ``seconds`` and each wait for a lock to
        :data:`STATS_LOCK_WAIT_S` (a locked table is skipped, not waited for); None restores the
        session's defaults. SQLite has no lock to wait for beyond its busy timeout: a progress
        handler interrupts a statement past the deadline."""
        if seconds is None:
            self._apply(STATEMENT_TIMEOUT_S, LOCK_TIMEOUT_S, None)
        else:
            statement = max(seconds, 0.001)
            self._apply(statement, min(STATS_LOCK_WAIT_S, statement), time.monotonic() + statement)

    def _apply(self, statement_s: float, lock_s: float, deadline: float | None) -> None:
        self._limits = (statement_s, lock_s)
        if self.dialect == "sqlite":
            self._set_sqlite_deadline(deadline)
            return
        sql = session_limits_sql(self.dialect, statement_s, lock_s)
        if sql:
            self.conn.exec_driver_sql(sql)

    def _set_sqlite_deadline(self, deadline: float | None) -> None:
        self._sqlite_deadline = deadline
        raw = self.conn.connection.driver_connection
        if deadline is None:
            raw.set_progress_handler(None, 0)  # type: ignore[union-attr]
        else:
            raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)  # type: ignore[union-attr]

    def timeout_reason(self, exc: BaseException) -> str | None:
        """What a statement that failed on a time or lock limit met; None for any other failure."""
        orig = getattr(exc, "orig", None) or exc
        code = getattr(orig, "pgcode", None)
        number = orig.args[0] if orig.args and isinstance(orig.args[0], int) else None
        text = str(orig).lower()
        if code == _PG_LOCKED or number in _MY_LOCKED or "database is locked" in text:
            return f"the table is locked by another session (no lock within {self._limits[1]:g} s)"
        if code == _PG_CANCELED or number in _MY_TOO_LONG or (self.dialect == "sqlite" and "interrupted" in text):
            return f"a statement ran out of time ({self._limits[0]:.1f} s left of the budget)"
        return None

    # SQL text (known dialects) ----------------------------------------------------------------
    def _ref(self, table: Table) -> str:
        prefix = f"{self.quote(table.schema_name)}." if table.schema_name else ""
        return prefix + self.quote(table.name)

    def _sample_sql(self, table: Table, columns: Sequence[str], sample: Sample) -> str:
        cols = ", ".join(self.quote(c) for c in columns) or "1"
        source = self._ref(table)
        if sample.tablesample_percent is not None:
            # REPEATABLE: the probe and the aggregate read the same blocks, so the PII probe sees
            # every row min, max and top values come from
            source += f" TABLESAMPLE SYSTEM ({float(sample.tablesample_percent)!r}) REPEATABLE ({_SAMPLE_SEED})"
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
                                     name="ts", seed=sa.literal_column(str(_SAMPLE_SEED)))
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
            kept = self._sqlite_deadline
            self._set_sqlite_deadline(time.monotonic() + timeout_s)
            try:
                return int(self.conn.execute(count_sql).scalar_one()), "exact", "row count: COUNT(*)"
            except sa.exc.OperationalError:
                pass  # interrupted: fall back to the rowid bound
            finally:
                self._set_sqlite_deadline(kept)
            try:
                top = self.conn.execute(sa.select(sa.func.max(sa.literal_column("rowid")))
                                        .select_from(self._table(table, []))).scalar()
            except sa.exc.DBAPIError:
                return None
            return (int(top), "estimated", "row count: max(rowid), COUNT(*) ran out of time") if top else None
        if self.dialect == "postgresql":
            kept = self._limits
            self.conn.exec_driver_sql(f"SET statement_timeout = {max(1, int(timeout_s * 1000))}")
            try:
                return int(self.conn.execute(count_sql).scalar_one()), "exact", "row count: COUNT(*)"
            except sa.exc.OperationalError:
                return None
            finally:
                self._apply(*kept, self._sqlite_deadline)  # back to the table's limits, not the server's default
        return None

    def choose_sample(self, table: Table, estimate: int | None, sample_rows: int) -> Sample:
        if (self.dialect == "postgresql" and estimate is not None
                and estimate > _PG_TABLESAMPLE_FACTOR * sample_rows):
            percent = round(min(100.0, max(0.001, 300.0 * sample_rows / estimate)), 4)
            return Sample(limit=sample_rows, tablesample_percent=percent)
        return Sample(limit=sample_rows)

    def probe(self, table: Table, columns: Sequence[str], sample: Sample) -> list[tuple[object, ...]]:
        if self.text_sql:
            return self._rows(self._sample_sql(table, columns, sample))
        s = self._sample(table, columns, sample)
        return [tuple(r) for r in self.conn.execute(sa.select(*(s.c[c] for c in columns)))]

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
