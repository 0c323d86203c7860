"""SQLAlchemy adapter: any SQLAlchemy URL (SQLite, PostgreSQL, MySQL/MariaDB, ...).

The adapter only wires three parts, each in its own module:

* :mod:`nl2sql_assets.adapters.sqlalchemy_engine`: the engine and one read-only connection
  (SQLite files open with ``mode=ro``, PostgreSQL sessions set
  ``default_transaction_read_only``, MySQL/MariaDB sessions ``TRANSACTION READ ONLY``);
* :mod:`nl2sql_assets.adapters.sqlalchemy_catalog`: structure, read in bulk through a dialect
  fast path (SQLite, PostgreSQL, MySQL/MariaDB) or SQLAlchemy's multi-table reflection, and
  which schemas are indexed and under which name (see :mod:`nl2sql_assets.adapters.base`);
* :mod:`nl2sql_assets.adapters.sqlalchemy_stats`: statistics queries, identifiers quoted by the
  dialect's own ``IdentifierPreparer`` (through SQLAlchemy Core).

Passwords never reach an error text or a log line.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Literal

import sqlalchemy as sa

from nl2sql_assets.adapters.base import with_inferred_joins
from nl2sql_assets.adapters.failures import describe_exception, unavailable
from nl2sql_assets.adapters.sqlalchemy_catalog import CatalogReader
from nl2sql_assets.adapters.sqlalchemy_engine import SQLAlchemyConnector
from nl2sql_assets.adapters.sqlalchemy_stats import SQLAlchemyStatsBackend
from nl2sql_assets.adapters.stats import DEFAULT_PROBE_ROWS, DEFAULT_SAMPLE_ROWS, CarriedStats, compute_statistics
from nl2sql_assets.adapters.structure import RawTable, assemble_snapshot, build_tables
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import DatasourceError
from nl2sql_assets.schema.models import SchemaSnapshot, Table

logger = logging.getLogger(__name__)


class SQLAlchemyAdapter:
    """Reads any SQLAlchemy datasource. Connects on the first read; ``close`` releases it."""

    def __init__(self, config: DatasourceConfig, *, stats_budget_s: float = 30.0,
                 sample_rows: int = DEFAULT_SAMPLE_ROWS, probe_rows: int | None = DEFAULT_PROBE_ROWS,
                 reflection: Literal["auto", "inspector"] = "auto") -> None:
        """``reflection="inspector"`` forces SQLAlchemy's generic reflection (the dialect fast
        paths are meant to give the same result; tests compare the two)."""
        self.config = config
        self.stats_budget_s = stats_budget_s
        self.sample_rows = sample_rows
        self.probe_rows = probe_rows
        self.reflection = reflection
        self._connector = SQLAlchemyConnector(config)
        self._warnings: list[str] = []

    @property
    def dialect(self) -> str:
        """The SQL dialect (``sqlite``, ``postgresql``, ``mariadb``, ``mysql``, ...)."""
        return self._connector.dialect

    def close(self) -> None:
        """Close the connection and dispose of the engine; the next read reconnects."""
        self._connector.close()

    def __enter__(self) -> SQLAlchemyAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_raw(self) -> list[RawTable]:
        """The catalog as raw records, through the dialect's fast path or bulk reflection."""
        conn = self._connector.connection()
        secrets = self._connector.secrets
        catalog = CatalogReader(self.config, self.dialect, self._connector.default_schema, secrets)
        self._warnings = catalog.warnings
        started = time.perf_counter()
        try:
            raw = catalog.read(conn, self.reflection)
        except DatasourceError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise unavailable(self.config.id, exc, secrets, "reading the catalog failed") from None
        logger.debug("datasource %s: read %d tables (%s) in %.3fs", self.config.id, len(raw), self.dialect,
                     time.perf_counter() - started)
        return raw

    def read_structure(self) -> list[Table]:
        """Tables, views, columns, keys, comments, annotations and name-based PII flags; no row scans."""
        return build_tables(self.read_raw(), self.config.annotations)

    def read_snapshot(self, captured_at: datetime, *, with_stats: bool = True,
                      previous: SchemaSnapshot | None = None) -> SchemaSnapshot:
        """A full snapshot; statistics within ``stats_budget_s`` when ``with_stats`` (kept from
        ``previous`` for the tables whose structure it shares, while young enough)."""
        tables = self.read_structure()
        warnings = list(self._warnings)
        backend = None
        if with_stats:
            conn = self._connector.connection()
            backend = SQLAlchemyStatsBackend(conn, self.dialect, self._connector.default_schema)
            tables, stat_warnings = compute_statistics(
                tables, backend, budget_s=self.stats_budget_s,
                sample_rows=self.sample_rows, probe_rows=self.probe_rows, read_at=captured_at,
                carried=CarriedStats.from_previous(previous, self.config.statistics.reuse_max_age_hours, captured_at),
                describe_error=lambda exc: describe_exception(exc, self._connector.secrets),
            )
            warnings.extend(stat_warnings)
        tables, join_warnings = with_inferred_joins(tables, backend)
        warnings.extend(join_warnings)
        return assemble_snapshot(self.config, self.dialect, tables, captured_at, warnings)
