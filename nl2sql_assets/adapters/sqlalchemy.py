"""SQLAlchemy adapter: any SQLAlchemy URL (SQLite, PostgreSQL, MySQL/MariaDB, ...).

Structure is read in bulk. The generic path uses SQLAlchemy's multi-table reflection
(``Inspector.get_multi_columns``, ``get_multi_pk_constraint``, ``get_multi_foreign_keys``,
``get_multi_unique_constraints``, ``get_multi_table_comment``) once per schema. SQLite and
PostgreSQL have a faster dialect path with the same result shape: SQLite joins
``sqlite_master`` with ``pragma_table_xinfo``/``pragma_foreign_key_list``/``pragma_index_list``
(three queries for the whole file), PostgreSQL reads ``pg_catalog`` in three queries.

Schema names (see :mod:`nl2sql_assets.adapters.base`): SQLite tables have ``schema_name=None``;
MySQL/MariaDB tables of the URL's database have ``None`` (other databases listed in
``schemas`` keep their name); PostgreSQL and every other dialect keep the real schema name.
By default every non-system schema is indexed (PostgreSQL: not ``pg_catalog``,
``information_schema``, ``pg_toast*``, ``pg_temp*``; schemas the role may not use are skipped
with a warning); ``schemas`` in the config restricts it, and a listed schema that is missing
or not usable is an error.

Connections are read-only where the database allows it: SQLite files open with
``mode=ro`` (a missing file is an error, never a new empty database), PostgreSQL sessions
set ``default_transaction_read_only``, MySQL/MariaDB sessions ``TRANSACTION READ ONLY``.
Identifiers in statistics queries are quoted by the dialect's own ``IdentifierPreparer``
(through SQLAlchemy Core). Passwords never reach an error text or a log line.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.request import pathname2url

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.engine.reflection import ObjectKind, ObjectScope

from nl2sql_assets.adapters.failures import describe_exception, secrets_of, unavailable
from nl2sql_assets.adapters.stats import (
    DEFAULT_PROBE_ROWS, DEFAULT_SAMPLE_ROWS, ColumnPlan, RowCount, Sample, TableKey, compute_statistics,
)
from nl2sql_assets.adapters.structure import (
    RawColumn, RawForeignKey, RawTable, assemble_snapshot, build_tables,
)
from nl2sql_assets.config import DatasourceConfig, redact_text, redact_url
from nl2sql_assets.errors import DatasourceError, DatasourceUnavailableError
from nl2sql_assets.schema.models import Column, SchemaSnapshot, Table

logger = logging.getLogger(__name__)

SYSTEM_SCHEMAS = frozenset({
    "information_schema", "pg_catalog", "performance_schema", "mysql", "sys", "INFORMATION_SCHEMA",
    "guest", "db_owner", "db_accessadmin", "db_securityadmin", "db_ddladmin", "db_backupoperator",
    "db_datareader", "db_datawriter", "db_denydatareader", "db_denydatawriter",
})
CONNECT_TIMEOUT_S = 10
_SINGLE_SCHEMA_DIALECTS = {"sqlite", "mysql", "mariadb"}
_MINMAX_FAMILIES = frozenset({"integer", "float", "decimal", "text", "date", "datetime", "time"})
_NO_DISTINCT_FAMILIES = frozenset({"json", "other", "array"})
_PG_RELKINDS = ("r", "p", "v", "m", "f")
_PG_TABLESAMPLE_FACTOR = 20
_TEXT_SQL_DIALECTS = frozenset({"sqlite", "postgresql", "mysql", "mariadb"})


# --------------------------------------------------------------------------------------------
# SQLite: three catalog queries for the whole file
# --------------------------------------------------------------------------------------------
_SQLITE_USER_OBJECTS = "m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
_SQLITE_TABLES = f"SELECT m.name, m.type FROM sqlite_master AS m WHERE {_SQLITE_USER_OBJECTS}"
_SQLITE_COLUMNS = (
    "SELECT m.name, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk, p.hidden "
    "FROM sqlite_master AS m JOIN pragma_table_xinfo(m.name) AS p "
    f"WHERE {_SQLITE_USER_OBJECTS} ORDER BY m.name, p.cid"
)
_SQLITE_COLUMNS_ONE = (
    "SELECT ?, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value, p.pk, p.hidden "
    "FROM pragma_table_xinfo(?) AS p ORDER BY p.cid"
)
_SQLITE_FKS = (
    "SELECT m.name, f.id, f.seq, f.\"table\", f.\"from\", f.\"to\" "
    "FROM sqlite_master AS m JOIN pragma_foreign_key_list(m.name) AS f "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY m.name, f.id, f.seq"
)
_SQLITE_UNIQUES = (
    "SELECT m.name, il.name, ii.seqno, ii.name "
    "FROM sqlite_master AS m JOIN pragma_index_list(m.name) AS il JOIN pragma_index_info(il.name) AS ii "
    "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
    "AND il.\"unique\" = 1 AND il.origin = 'u' ORDER BY m.name, il.name, ii.seqno"
)

# --------------------------------------------------------------------------------------------
# PostgreSQL: three pg_catalog queries for all indexed schemas
# --------------------------------------------------------------------------------------------
_PG_SCHEMAS = (
    "SELECT n.nspname, has_schema_privilege(n.oid, 'USAGE') FROM pg_namespace AS n "
    "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
    "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'"
)
_PG_REL_FILTER = (
    "c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition AND n.nspname = ANY(:schemas)"
)
_PG_RELATIONS = (
    "SELECT c.oid, n.nspname, c.relname, c.relkind, obj_description(c.oid, 'pg_class') "
    "FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    f"WHERE {_PG_REL_FILTER}"
)
_PG_COLUMNS = (
    "SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
    "pg_get_expr(d.adbin, d.adrelid), col_description(a.attrelid, a.attnum) "
    "FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
    f"WHERE a.attnum > 0 AND NOT a.attisdropped AND {_PG_REL_FILTER} "
    "ORDER BY a.attrelid, a.attnum"
)
_PG_CONSTRAINTS = (
    "SELECT co.conrelid, co.conname, co.contype, "
    "ARRAY(SELECT a.attname::text FROM unnest(co.conkey) WITH ORDINALITY AS k(num, pos) "
    "      JOIN pg_attribute AS a ON a.attrelid = co.conrelid AND a.attnum = k.num ORDER BY k.pos), "
    "rn.nspname, rc.relname, "
    "ARRAY(SELECT a.attname::text FROM unnest(co.confkey) WITH ORDINALITY AS k(num, pos) "
    "      JOIN pg_attribute AS a ON a.attrelid = co.confrelid AND a.attnum = k.num ORDER BY k.pos) "
    "FROM pg_constraint AS co JOIN pg_class AS c ON c.oid = co.conrelid "
    "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_class AS rc ON rc.oid = co.confrelid "
    "LEFT JOIN pg_namespace AS rn ON rn.oid = rc.relnamespace "
    f"WHERE co.contype IN ('p', 'u', 'f') AND {_PG_REL_FILTER} ORDER BY co.conrelid, co.conname"
)
# --------------------------------------------------------------------------------------------
# MySQL / MariaDB: three information_schema queries (SQLAlchemy's MySQL reflection parses
# SHOW CREATE TABLE and returns a column named ``a`b`` as ``a``b``; the catalog does not)
# --------------------------------------------------------------------------------------------
_MY_TABLES = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_COMMENT FROM information_schema.TABLES "
    "WHERE TABLE_SCHEMA IN :schemas AND TABLE_TYPE IN ('BASE TABLE', 'VIEW', 'SYSTEM VERSIONED')"
)
_MY_COLUMNS = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_COMMENT "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN :schemas "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
)
_MY_CONSTRAINTS = (
    "SELECT tc.TABLE_SCHEMA, tc.TABLE_NAME, tc.CONSTRAINT_NAME, tc.CONSTRAINT_TYPE, k.COLUMN_NAME, "
    "k.REFERENCED_TABLE_SCHEMA, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME "
    "FROM information_schema.TABLE_CONSTRAINTS AS tc JOIN information_schema.KEY_COLUMN_USAGE AS k "
    "ON k.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND k.TABLE_SCHEMA = tc.TABLE_SCHEMA "
    "AND k.TABLE_NAME = tc.TABLE_NAME AND k.CONSTRAINT_NAME = tc.CONSTRAINT_NAME "
    "WHERE tc.TABLE_SCHEMA IN :schemas AND tc.CONSTRAINT_TYPE IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
    "ORDER BY tc.TABLE_SCHEMA, tc.TABLE_NAME, tc.CONSTRAINT_NAME, k.ORDINAL_POSITION"
)
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

    def __init__(self, adapter: SQLAlchemyAdapter, conn: Connection) -> None:
        self.adapter = adapter
        self.conn = conn
        self.dialect = adapter.dialect
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
            default_db = self.adapter._default_schema
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


class SQLAlchemyAdapter:
    """Reads any SQLAlchemy datasource. Connects on the first read; ``close`` releases it."""

    def __init__(self, config: DatasourceConfig, *, stats_budget_s: float = 30.0,
                 sample_rows: int = DEFAULT_SAMPLE_ROWS, probe_rows: int = DEFAULT_PROBE_ROWS,
                 reflection: Literal["auto", "inspector"] = "auto") -> None:
        """``reflection="inspector"`` forces SQLAlchemy's generic reflection (the dialect fast
        paths are meant to give the same result; tests compare the two)."""
        self.config = config
        self.stats_budget_s = stats_budget_s
        self.sample_rows = sample_rows
        self.probe_rows = probe_rows
        self.reflection = reflection
        self._secrets = secrets_of(config.url)
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._url: URL | None = None
        self._default_schema: str | None = None
        self._warnings: list[str] = []

    # -- connection -------------------------------------------------------------------------
    def _fail(self, message: str) -> DatasourceUnavailableError:
        return DatasourceUnavailableError(self.config.id, redact_text(message, self._secrets))

    def _make_url(self) -> URL:
        if self._url is not None:
            return self._url
        resolved = self.config.resolved_url()
        self._secrets = sorted(set(self._secrets) | set(secrets_of(resolved)), key=len, reverse=True)
        try:
            url = sa.engine.make_url(resolved)
        except (sa.exc.ArgumentError, ValueError) as exc:
            raise self._fail(f"bad URL {redact_url(self.config.url)!r}: {describe_exception(exc, self._secrets)}"
                             ) from None
        if url.password:
            self._secrets = sorted(set(self._secrets) | {str(url.password)}, key=len, reverse=True)
        self._url = url
        return url

    def _create_engine(self) -> Engine:
        if self._engine is not None:
            return self._engine
        url = self._make_url()
        try:
            url.get_dialect()  # an unknown name fails here, before any connection
        except sa.exc.NoSuchModuleError:
            raise self._fail(f"unknown database type '{url.drivername}' (no SQLAlchemy dialect of that name)"
                             ) from None
        except ImportError as exc:
            raise self._fail(f"missing driver for '{url.drivername}': {exc}") from None
        backend, driver = url.get_backend_name(), url.get_driver_name()
        kwargs: dict[str, Any] = {"poolclass": sa.pool.NullPool, "hide_parameters": True}
        connect_args: dict[str, Any] = {}
        if backend == "sqlite":
            creator = self._sqlite_creator(url)
            if creator is not None:
                kwargs["creator"] = creator
        elif backend == "postgresql" and driver in ("psycopg2", "psycopg"):
            if "connect_timeout" not in url.query:
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
            if "options" not in url.query:
                connect_args["options"] = "-c default_transaction_read_only=on"
        elif backend in ("mysql", "mariadb") and driver in ("pymysql", "mysqldb", "mariadbconnector"):
            if "connect_timeout" not in url.query:
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
        if connect_args:
            kwargs["connect_args"] = connect_args
        try:
            self._engine = sa.create_engine(url, **kwargs)
        except ImportError as exc:
            raise self._fail(f"missing driver for '{url.drivername}': {exc} (install the DBAPI package)") from None
        except (sa.exc.ArgumentError, TypeError, ValueError) as exc:
            raise self._fail(f"bad URL {redact_url(self.config.url)!r}: {describe_exception(exc, self._secrets)}"
                             ) from None
        return self._engine

    def _sqlite_creator(self, url: URL) -> Any:
        """A read-only connection factory for a SQLite file, after checking that it exists."""
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        path = Path(database).expanduser()
        if not path.is_file():
            raise self._fail(f"SQLite file not found: {path} (refusing to create an empty database)")
        uri = f"file:{pathname2url(str(path.absolute()))}?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, check_same_thread=False)

        return connect

    def _connection(self) -> Connection:
        if self._conn is not None:
            return self._conn
        engine = self._create_engine()
        try:
            conn = engine.connect()
        except ImportError as exc:
            raise self._fail(f"missing driver for '{engine.url.drivername}': {exc}") from None
        except sa.exc.SQLAlchemyError as exc:
            raise unavailable(self.config.id, exc, self._secrets, "cannot connect") from None
        try:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        except sa.exc.ArgumentError:
            pass
        try:
            if self.dialect in ("mysql", "mariadb"):
                conn.exec_driver_sql("SET SESSION TRANSACTION READ ONLY")
            self._default_schema = sa.inspect(conn).default_schema_name
        except sa.exc.SQLAlchemyError as exc:
            conn.close()
            raise unavailable(self.config.id, exc, self._secrets, "cannot start a session") from None
        self._conn = conn
        return conn

    @property
    def dialect(self) -> str:
        """The SQL dialect (``sqlite``, ``postgresql``, ``mariadb``, ``mysql``, ...)."""
        if self._engine is None:
            return self._make_url().get_backend_name()
        dialect = self._engine.dialect
        if dialect.name == "mysql" and getattr(dialect, "is_mariadb", False):
            return "mariadb"
        return dialect.name

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> SQLAlchemyAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- structure --------------------------------------------------------------------------
    def read_raw(self) -> list[RawTable]:
        """The catalog as raw records, through the dialect's fast path or bulk reflection."""
        conn = self._connection()
        self._warnings = []
        started = time.perf_counter()
        try:
            if self.reflection == "auto" and self.dialect == "sqlite":
                raw = self._read_sqlite(conn)
            elif self.reflection == "auto" and self.dialect == "postgresql":
                raw = self._read_postgresql(conn)
            elif self.reflection == "auto" and self.dialect in ("mysql", "mariadb"):
                raw = self._read_mysql(conn)
            else:
                raw = self._read_inspector(conn)
        except DatasourceError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise unavailable(self.config.id, exc, self._secrets, "reading the catalog failed") from None
        logger.debug("datasource %s: read %d tables (%s) in %.3fs", self.config.id, len(raw), self.dialect,
                     time.perf_counter() - started)
        return raw

    def read_structure(self) -> list[Table]:
        """Tables, views, columns, keys, comments, annotations and name-based PII flags; no row scans."""
        return build_tables(self.read_raw(), self.config.annotations)

    def read_snapshot(self, captured_at: datetime, *, with_stats: bool = True) -> SchemaSnapshot:
        """A full snapshot; statistics within ``stats_budget_s`` when ``with_stats``."""
        tables = self.read_structure()
        warnings = list(self._warnings)
        if with_stats:
            tables, stat_warnings = compute_statistics(
                tables, SQLAlchemyStatsBackend(self, self._connection()), budget_s=self.stats_budget_s,
                sample_rows=self.sample_rows, probe_rows=self.probe_rows,
                describe_error=lambda exc: describe_exception(exc, self._secrets),
            )
            warnings.extend(stat_warnings)
        return assemble_snapshot(self.config, self.dialect, tables, captured_at, warnings)

    # SQLite -------------------------------------------------------------------------------
    def _read_sqlite(self, conn: Connection) -> list[RawTable]:
        if self.config.schemas and set(self.config.schemas) != {"main"}:
            raise DatasourceError(self.config.id, "SQLite has no schemas besides 'main'; configured "
                                                  f"schemas: {', '.join(self.config.schemas)}")
        tables = {name: RawTable(None, name, kind) for name, kind in conn.exec_driver_sql(_SQLITE_TABLES)}
        try:
            column_rows = list(conn.exec_driver_sql(_SQLITE_COLUMNS))
        except sa.exc.OperationalError:  # one broken view fails the join: read table by table
            column_rows = []
            for name in sorted(tables):
                try:
                    column_rows.extend(conn.exec_driver_sql(_SQLITE_COLUMNS_ONE, (name, name)))
                except sa.exc.OperationalError as exc:
                    self._warnings.append(f"{tables[name].kind} {name} skipped: "
                                          f"{describe_exception(exc, self._secrets)}")
                    tables.pop(name)
        pk_positions: dict[str, list[tuple[int, str]]] = {}
        for table, _cid, name, dtype, notnull, default, pk, hidden in column_rows:
            raw = tables.get(table)
            if raw is None or hidden == 1:  # hidden == 1: a virtual table's hidden column
                continue
            raw.columns.append(RawColumn(name, dtype or "", not notnull, default))
            if pk:
                pk_positions.setdefault(table, []).append((pk, name))
        for table, cols in pk_positions.items():
            tables[table].primary_key = [name for _, name in sorted(cols)]
        by_lower = {name.lower(): name for name in tables}
        fks: dict[tuple[str, int], RawForeignKey] = {}
        for table, fk_id, _seq, ref, col, ref_col in conn.exec_driver_sql(_SQLITE_FKS):
            if table not in tables:
                continue
            ref_name = by_lower.get(str(ref).lower(), ref)
            fk = fks.get((table, fk_id))
            if fk is None:
                fk = fks[(table, fk_id)] = RawForeignKey(None, [], None, ref_name, [])
                tables[table].foreign_keys.append(fk)
            fk.columns.append(col)
            fk.ref_columns.append(ref_col)  # None: the referenced table's primary key, resolved below
        for (_table, _id), fk in fks.items():
            if any(c is None for c in fk.ref_columns):
                target = tables.get(fk.ref_table)
                pk = target.primary_key if target else []
                fk.ref_columns = list(pk) if len(pk) == len(fk.columns) else [c or "" for c in fk.ref_columns]
        uniques: dict[tuple[str, str], list[str]] = {}
        for table, index, _seq, col in conn.exec_driver_sql(_SQLITE_UNIQUES):
            if table in tables:
                uniques.setdefault((table, index), []).append(col)
        for (table, _index), cols in uniques.items():
            tables[table].uniques.append((None, cols))
        return list(tables.values())

    # PostgreSQL ---------------------------------------------------------------------------
    def _pg_schemas(self, conn: Connection) -> list[str]:
        present = {name: bool(usable) for name, usable in conn.execute(sa.text(_PG_SCHEMAS))}
        if self.config.schemas is None:
            unusable = sorted(n for n, ok in present.items() if not ok)
            for name in unusable:
                self._warnings.append(f"schema {name} skipped: the role lacks USAGE on it")
            return sorted(n for n, ok in present.items() if ok)
        missing = [s for s in self.config.schemas if s not in present]
        if missing:
            raise DatasourceError(self.config.id, f"configured schemas not found: {', '.join(missing)}")
        denied = [s for s in self.config.schemas if not present[s]]
        if denied:
            raise DatasourceUnavailableError(
                self.config.id, f"permission denied: the role lacks USAGE on schema {', '.join(denied)}")
        return list(self.config.schemas)

    def _read_postgresql(self, conn: Connection) -> list[RawTable]:
        schemas = self._pg_schemas(conn)
        params = {"schemas": schemas}
        tables: dict[int, RawTable] = {}
        for oid, schema, name, relkind, comment in conn.execute(sa.text(_PG_RELATIONS), params):
            tables[oid] = RawTable(schema, name, "view" if relkind in ("v", "m") else "table", comment)
        for oid, name, dtype, notnull, default, comment in conn.execute(sa.text(_PG_COLUMNS), params):
            raw = tables.get(oid)
            if raw is not None:
                raw.columns.append(RawColumn(name, dtype, not notnull, default, comment))
        for oid, cname, ctype, cols, ref_schema, ref_table, ref_cols in conn.execute(
                sa.text(_PG_CONSTRAINTS), params):
            raw = tables.get(oid)
            if raw is None:
                continue
            if ctype == "p":
                raw.primary_key = list(cols)
            elif ctype == "u":
                raw.uniques.append((cname, list(cols)))
            else:
                raw.foreign_keys.append(RawForeignKey(cname, list(cols), ref_schema, ref_table, list(ref_cols)))
        return list(tables.values())

    # MySQL / MariaDB ----------------------------------------------------------------------
    def _read_mysql(self, conn: Connection) -> list[RawTable]:
        schemas = self._inspector_schemas(sa.inspect(conn))
        default = self._default_schema
        names = [s or default for s in schemas]

        def key(schema: str) -> str | None:
            return None if schema == default else schema

        def run(sql: str) -> sa.CursorResult[Any]:
            stmt = sa.text(sql).bindparams(sa.bindparam("schemas", expanding=True))
            return conn.execute(stmt, {"schemas": names})

        tables: dict[tuple[str | None, str], RawTable] = {}
        for schema, name, ttype, comment in run(_MY_TABLES):
            view = ttype == "VIEW"
            tables[(key(schema), name)] = RawTable(key(schema), name, "view" if view else "table",
                                                   None if view else comment)
        for schema, name, col, ctype, nullable, default_value, comment in run(_MY_COLUMNS):
            raw = tables.get((key(schema), name))
            if raw is not None:
                if default_value is not None and str(default_value).upper() == "NULL":
                    default_value = None
                raw.columns.append(RawColumn(col, str(ctype), nullable == "YES",
                                             None if default_value is None else str(default_value), comment))
        fks: dict[tuple[str | None, str, str], RawForeignKey] = {}
        uniques: dict[tuple[str | None, str, str], list[str]] = {}
        for schema, name, cname, ctype, col, ref_schema, ref_table, ref_col in run(_MY_CONSTRAINTS):
            raw = tables.get((key(schema), name))
            if raw is None:
                continue
            if ctype == "PRIMARY KEY":
                raw.primary_key.append(col)
            elif ctype == "UNIQUE":
                if (key(schema), name, cname) not in uniques:
                    uniques[(key(schema), name, cname)] = []
                    raw.uniques.append((cname, uniques[(key(schema), name, cname)]))
                uniques[(key(schema), name, cname)].append(col)
            else:
                fk = fks.get((key(schema), name, cname))
                if fk is None:
                    fk = fks[(key(schema), name, cname)] = RawForeignKey(cname, [], key(ref_schema), ref_table, [])
                    raw.foreign_keys.append(fk)
                fk.columns.append(col)
                fk.ref_columns.append(ref_col)
        return list(tables.values())

    # Generic: SQLAlchemy bulk reflection ---------------------------------------------------
    def _inspector_schemas(self, inspector: sa.Inspector) -> list[str | None]:
        dialect = self.dialect
        if dialect == "sqlite":
            if self.config.schemas and set(self.config.schemas) != {"main"}:
                raise DatasourceError(self.config.id, "SQLite has no schemas besides 'main'")
            return [None]
        present = set(inspector.get_schema_names())
        if self.config.schemas is not None:
            missing = [s for s in self.config.schemas if s not in present]
            if missing:
                raise DatasourceError(self.config.id, f"configured schemas not found: {', '.join(missing)}")
            if dialect in _SINGLE_SCHEMA_DIALECTS:
                return [None if s == self._default_schema else s for s in self.config.schemas]
            return list(self.config.schemas)
        if dialect in _SINGLE_SCHEMA_DIALECTS:
            return [None]
        return sorted(s for s in present if s not in SYSTEM_SCHEMAS and not s.startswith("pg_"))

    def _read_inspector(self, conn: Connection) -> list[RawTable]:
        inspector = sa.inspect(conn)
        dialect = conn.dialect
        out: list[RawTable] = []
        single = self.dialect in _SINGLE_SCHEMA_DIALECTS
        for schema in self._inspector_schemas(inspector):
            schema_name = schema if (schema is not None or single) else self._default_schema
            views = set(inspector.get_view_names(schema))
            try:
                views |= set(inspector.get_materialized_view_names(schema))
            except NotImplementedError:
                pass
            kind, scope = ObjectKind.ANY, ObjectScope.DEFAULT
            with warnings.catch_warnings():  # "did not recognize type": the column is kept, typed ''
                warnings.simplefilter("ignore", sa.exc.SAWarning)
                columns = inspector.get_multi_columns(schema=schema, kind=kind, scope=scope)
            pks = inspector.get_multi_pk_constraint(schema=schema, kind=kind, scope=scope)
            fks = inspector.get_multi_foreign_keys(schema=schema, kind=kind, scope=scope)
            uniques = _optional(lambda: inspector.get_multi_unique_constraints(schema=schema, kind=kind,
                                                                               scope=scope))
            comments = (_optional(lambda: inspector.get_multi_table_comment(schema=schema, kind=kind, scope=scope))
                        if dialect.supports_comments else {})
            for key, cols in columns.items():
                name = key[1]
                raw = RawTable(schema_name, name, "view" if name in views else "table",
                               (comments.get(key) or {}).get("text"))
                raw.columns = [RawColumn(c["name"], _type_text(c["type"], dialect), bool(c.get("nullable", True)),
                                         None if c.get("default") is None else str(c["default"]), c.get("comment"))
                               for c in cols]
                raw.primary_key = list((pks.get(key) or {}).get("constrained_columns") or [])
                raw.uniques = [(u.get("name"), list(u["column_names"])) for u in uniques.get(key, [])]
                for fk in fks.get(key, []):
                    ref_schema = fk.get("referred_schema")
                    if ref_schema is None or (single and ref_schema == self._default_schema):
                        ref_schema = schema_name if not single or ref_schema is None else None
                    raw.foreign_keys.append(RawForeignKey(fk.get("name"), list(fk["constrained_columns"]),
                                                          ref_schema, fk["referred_table"],
                                                          list(fk["referred_columns"])))
                out.append(raw)
        return out


def _optional(read: Any) -> dict[Any, Any]:
    """A reflection call some dialects do not implement: empty when not implemented."""
    try:
        return dict(read())
    except NotImplementedError:
        return {}


def _type_text(type_: Any, dialect: sa.Dialect) -> str:
    """A reflected type as the dialect spells it (``VARCHAR(20)``), else its generic name."""
    try:
        return str(type_.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - NullType and exotic types do not compile; the name will do
        return "" if isinstance(type_, sa.types.NullType) else str(type(type_).__name__).upper()
