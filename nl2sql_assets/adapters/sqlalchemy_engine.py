"""Engine and connection setup for SQLAlchemy datasources: read-only sessions, clear failures.

Connections are read-only where the database allows it: SQLite files open with
``mode=ro`` (a missing file is an error, never a new empty database), PostgreSQL sessions
set ``default_transaction_read_only``, MySQL/MariaDB sessions ``TRANSACTION READ ONLY``.
Every failure (bad URL, unknown dialect, missing driver, refused connection) becomes a
:class:`~nl2sql_assets.errors.DatasourceUnavailableError` whose text never holds a password:
the connector collects every secret it sees in the URL (:attr:`SQLAlchemyConnector.secrets`)
so callers can redact their own error texts too.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from nl2sql_assets.adapters.failures import describe_exception, secrets_of, unavailable
from nl2sql_assets.config import DatasourceConfig, redact_text, redact_url
from nl2sql_assets.errors import DatasourceUnavailableError
from nl2sql_assets.urls import UrlSyntaxError

CONNECT_TIMEOUT_S = 10
#: Session defaults: no statement (catalog reads included) runs longer, and no statement waits
#: longer for another session's lock (``LOCK TABLE``, DDL), than this; statistics set tighter
#: bounds per table (:meth:`SQLAlchemyStatsBackend.limit_time`) and restore these.
STATEMENT_TIMEOUT_S = 120.0
LOCK_TIMEOUT_S = 5.0


def session_limits_sql(dialect: str, statement_s: float, lock_s: float) -> str | None:
    """The statement that bounds a session's statements and lock waits; None where the
    dialect has no such settings (SQLite waits at most its busy timeout anyway).

    >>> session_limits_sql("postgresql", 120, 5)
    'SET statement_timeout = 120000; SET lock_timeout = 5000'
    >>> session_limits_sql("mariadb", 2.5, 0.2)
    'SET SESSION max_statement_time = 2.5, SESSION lock_wait_timeout = 1'
    """
    if dialect == "postgresql":  # 0 would mean "no limit": at least one millisecond
        return (f"SET statement_timeout = {max(1, round(statement_s * 1000))}; "
                f"SET lock_timeout = {max(1, round(lock_s * 1000))}")
    lock = max(1, math.ceil(lock_s))  # whole seconds only
    if dialect == "mariadb":
        return (f"SET SESSION max_statement_time = {max(0.001, round(statement_s, 3))!r}, "
                f"SESSION lock_wait_timeout = {lock}")
    if dialect == "mysql":
        return (f"SET SESSION max_execution_time = {max(1, round(statement_s * 1000))}, "
                f"SESSION lock_wait_timeout = {lock}")
    return None


class SQLAlchemyConnector:
    """One datasource's engine and its single connection, created on first use.

    Split from the adapter so that catalog reading and statistics see only a connection, and
    the URL handling (secrets, drivers, read-only options) lives in one place.
    """

    def __init__(self, config: DatasourceConfig) -> None:
        self.config = config
        self.secrets: list[str] = secrets_of(config.url)  # the resolved ones join in make_url
        # the session's default schema (the URL's database on MySQL/MariaDB), known once connected
        self.default_schema: str | None = None
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._url: URL | None = None

    def fail(self, message: str) -> DatasourceUnavailableError:
        """The error to raise, with every known secret redacted from ``message``."""
        return DatasourceUnavailableError(self.config.id, redact_text(message, self.secrets))

    def make_url(self) -> URL:
        """The parsed URL, each ``${VAR}`` value put into its own component (so a password may
        hold ``@ : / # % ?``); every credential in it joins :attr:`secrets`.

        Raises:
            ConfigError: a ``${VAR}`` is not set.
            DatasourceUnavailableError: the URL does not parse (password masked).
        """
        if self._url is not None:
            return self._url
        self.secrets = sorted(set(self.secrets) | set(self.config.secrets()), key=len, reverse=True)
        try:
            url = self.config.sqlalchemy_url()
        except UrlSyntaxError as exc:
            raise self.fail(f"bad URL: {exc.reason}") from None
        self._url = url
        return url

    def create_engine(self) -> Engine:
        """The engine, with read-only and connect-timeout options for the known drivers (no pool:
        one connection per adapter)."""
        if self._engine is not None:
            return self._engine
        url = self.make_url()
        try:
            url.get_dialect()  # an unknown name fails here, before any connection
        except sa.exc.NoSuchModuleError:
            raise self.fail(f"unknown database type '{url.drivername}' (no SQLAlchemy dialect of that name)"
                            ) from None
        except ImportError as exc:
            raise self.fail(f"missing driver for '{url.drivername}': {exc}") from None
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
            raise self.fail(f"missing driver for '{url.drivername}': {exc} (install the DBAPI package)") from None
        except (sa.exc.ArgumentError, TypeError, ValueError) as exc:
            raise self.fail(f"bad URL {redact_url(self.config.url)!r}: {describe_exception(exc, self.secrets)}"
                            ) from None
        return self._engine

    def _sqlite_creator(self, url: URL) -> Any:
        """A read-only connection factory for a SQLite file, after checking that it exists."""
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        path = Path(database).expanduser()
        if not path.is_file():
            raise self.fail(f"SQLite file not found: {path} (refusing to create an empty database)")
        uri = f"file:{pathname2url(str(path.absolute()))}?mode=ro"

        def connect() -> sqlite3.Connection:
            return sqlite3.connect(uri, uri=True, check_same_thread=False)

        return connect

    def connection(self) -> Connection:
        """The open read-only connection (autocommit where the driver allows it), created once."""
        if self._conn is not None:
            return self._conn
        engine = self.create_engine()
        try:
            conn = engine.connect()
        except ImportError as exc:
            raise self.fail(f"missing driver for '{engine.url.drivername}': {exc}") from None
        except sa.exc.SQLAlchemyError as exc:
            raise unavailable(self.config.id, exc, self.secrets, "cannot connect") from None
        try:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        except sa.exc.ArgumentError:
            pass
        try:
            if self.dialect in ("mysql", "mariadb"):
                conn.exec_driver_sql("SET SESSION TRANSACTION READ ONLY")
            limits = session_limits_sql(self.dialect, STATEMENT_TIMEOUT_S, LOCK_TIMEOUT_S)
            if limits:  # a locked catalog or table must fail the read, not hang it
                conn.exec_driver_sql(limits)
            self.default_schema = sa.inspect(conn).default_schema_name
        except sa.exc.SQLAlchemyError as exc:
            conn.close()
            raise unavailable(self.config.id, exc, self.secrets, "cannot start a session") from None
        self._conn = conn
        return conn

    @property
    def dialect(self) -> str:
        """The SQL dialect (``sqlite``, ``postgresql``, ``mariadb``, ``mysql``, ...)."""
        if self._engine is None:
            return self.make_url().get_backend_name()
        dialect = self._engine.dialect
        if dialect.name == "mysql" and getattr(dialect, "is_mariadb", False):
            return "mariadb"
        return dialect.name

    def close(self) -> None:
        """Close the connection and dispose of the engine; the next use reconnects."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
