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

import sqlite3
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from nl2sql_assets.adapters.failures import describe_exception, secrets_of, unavailable
from nl2sql_assets.config import DatasourceConfig, redact_text, redact_url
from nl2sql_assets.errors import DatasourceUnavailableError

CONNECT_TIMEOUT_S = 10


class SQLAlchemyConnector:
    """One datasource's engine and its single connection, created on first use.

    Split from the adapter so that catalog reading and statistics see only a connection, and
    the URL handling (secrets, drivers, read-only options) lives in one place.
    """

    def __init__(self, config: DatasourceConfig) -> None:
        self.config = config
        self.secrets: list[str] = secrets_of(config.url)
        # the session's default schema (the URL's database on MySQL/MariaDB), known once connected
        self.default_schema: str | None = None
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._url: URL | None = None

    def fail(self, message: str) -> DatasourceUnavailableError:
        """The error to raise, with every known secret redacted from ``message``."""
        return DatasourceUnavailableError(self.config.id, redact_text(message, self.secrets))

    def make_url(self) -> URL:
        """The parsed URL (environment references resolved); its password joins :attr:`secrets`."""
        if self._url is not None:
            return self._url
        resolved = self.config.resolved_url()
        self.secrets = sorted(set(self.secrets) | set(secrets_of(resolved)), key=len, reverse=True)
        try:
            url = sa.engine.make_url(resolved)
        except (sa.exc.ArgumentError, ValueError) as exc:
            raise self.fail(f"bad URL {redact_url(self.config.url)!r}: {describe_exception(exc, self.secrets)}"
                            ) from None
        if url.password:
            self.secrets = sorted(set(self.secrets) | {str(url.password)}, key=len, reverse=True)
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
