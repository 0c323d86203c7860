"""The adapter seam: read a datasource's structure (cheaply) or its full snapshot.

``read_structure`` is what a drift check costs: tables, columns, keys, comments,
annotations and name-based PII flags; no statistics, no row scans. ``read_snapshot`` adds
statistics (and value-based PII flags) within a time budget. For the same database,
``compute_fingerprint(read_structure())`` and ``compute_metadata_hash(info, read_structure())``
equal the snapshot's ``fingerprint`` and ``metadata_hash``.

Schema names: where the database has a schema level, tables carry its real name
(PostgreSQL ``public``, DuckDB ``main``); SQLite (no schema level) and MySQL/MariaDB (schema ==
database) use ``None`` for the URL's own database.

Every full snapshot ends with :func:`with_inferred_joins`: join keys the database does not
declare (warehouses, SQLite files), inferred from names, types and keys and checked on sampled
values when statistics run, stored as ``ForeignKey(source="inferred")`` (never fingerprinted,
so drift does not depend on sampled data).

This module imports no adapter: the concrete adapters import its helpers, and the factory
that picks one (:func:`nl2sql_assets.adapters.factory.open_adapter`) imports the adapters, so
the import graph stays one-way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from nl2sql_assets.adapters.join_values import add_inferred_joins
from nl2sql_assets.adapters.stats import StatsBackend
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.schema.models import DatasourceInfo, MetricDefinition, SchemaSnapshot, Table


class SchemaAdapter(Protocol):
    """What the indexing pipeline and the drift check need from any datasource."""

    config: DatasourceConfig

    @property
    def dialect(self) -> str:
        """``sqlite``, ``duckdb``, ``postgresql``, ``mariadb``, ``mysql``, ... (the SQL the datasource speaks)."""
        ...

    def read_structure(self) -> list[Table]:
        """Tables, columns, keys and comments; no statistics. Raises DatasourceError."""
        ...

    def read_snapshot(self, captured_at: datetime, *, with_stats: bool = True,
                      previous: SchemaSnapshot | None = None) -> SchemaSnapshot:
        """A full snapshot: structure, annotations, PII flags and statistics (those of ``previous``
        kept for unchanged tables while young). Raises DatasourceError."""
        ...

    def close(self) -> None:
        """Release the connection; the next read reconnects."""
        ...


def default_schema(config: DatasourceConfig, dialect: str) -> str | None:
    """The schema name of tables the snapshot leaves unqualified: ``main`` for SQLite, the URL's
    database for MySQL/MariaDB; None where every table carries its real schema name.

    >>> default_schema(DatasourceConfig(id="a", url="sqlite:///x.db"), "sqlite")
    'main'
    >>> default_schema(DatasourceConfig(id="a", url="mysql+pymysql://u:pw@h/shop"), "mariadb")
    'shop'
    """
    if dialect == "sqlite":
        return "main"
    if dialect in ("mysql", "mariadb"):
        from sqlalchemy.engine.url import make_url  # third-party and slow to import: only for MySQL URLs

        try:
            return make_url(config.resolved_url()).database or None
        except Exception:  # noqa: BLE001 - a URL that does not parse fails on connect, with a clear error
            return None
    return None


def datasource_info(config: DatasourceConfig, dialect: str) -> DatasourceInfo:
    """The snapshot's datasource section, from the datasources-file entry (the URL only for its
    database name, never its credentials)."""
    return DatasourceInfo(
        id=config.id,
        dialect=dialect,
        description=config.description,
        domains=list(config.domains),
        example_questions=list(config.example_questions),
        tenant=config.tenant,
        metrics=[MetricDefinition(name=m.name, definition=m.definition, grain=m.grain,
                                  description=m.description) for m in config.metrics],
        default_schema=default_schema(config, dialect),
    )


JOIN_CHECK_BUDGET_S = 10.0


def with_inferred_joins(tables: list[Table], backend: StatsBackend | None) -> tuple[list[Table], list[str]]:
    """The full-snapshot hook every adapter calls last: inferred joins added (value-checked
    through ``backend``, the statistics connection, when statistics run), and warnings."""
    return add_inferred_joins(tables, backend, budget_s=JOIN_CHECK_BUDGET_S)
