"""The adapter seam: read a datasource's structure (cheaply) or its full snapshot.

``read_fingerprint`` is what a drift check costs: structure only, no statistics, no row
scans. ``read_snapshot`` adds statistics within a time budget.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.schema.models import SchemaSnapshot, Table


class SchemaAdapter(Protocol):
    config: DatasourceConfig

    def read_structure(self) -> list[Table]:
        """Tables, columns, keys and comments; no statistics. Raises DatasourceError."""
        ...

    def read_snapshot(self, captured_at: datetime, *, with_stats: bool = True) -> SchemaSnapshot:
        """A full snapshot: structure, annotations, PII flags and statistics. Raises DatasourceError."""
        ...

    def close(self) -> None:
        ...


def open_adapter(config: DatasourceConfig, *, stats_budget_s: float = 30.0) -> SchemaAdapter:
    """The adapter for a datasource's URL: native DuckDB for ``duckdb://``, SQLAlchemy otherwise."""
    if config.is_duckdb:
        from nl2sql_assets.adapters.duckdb import DuckDBAdapter

        return DuckDBAdapter(config, stats_budget_s=stats_budget_s)
    from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter

    return SQLAlchemyAdapter(config, stats_budget_s=stats_budget_s)
