"""Picking the adapter for a datasource's URL.

The factory sits apart from :mod:`nl2sql_assets.adapters.base` because it must import every
concrete adapter, and the adapters import the seam's helpers from ``base``: with the factory
there, ``base`` would import the adapters and the adapters ``base`` (a cycle).
"""

from __future__ import annotations

from nl2sql_assets.adapters.base import SchemaAdapter
from nl2sql_assets.adapters.duckdb import DuckDBAdapter
from nl2sql_assets.adapters.sqlalchemy import SQLAlchemyAdapter
from nl2sql_assets.adapters.stats import DEFAULT_SAMPLE_ROWS
from nl2sql_assets.config import DatasourceConfig


def open_adapter(config: DatasourceConfig, *, stats_budget_s: float = 30.0,
                 sample_rows: int | None = None) -> SchemaAdapter:
    """The adapter for a datasource's URL: native DuckDB for ``duckdb://``, SQLAlchemy otherwise.

    Nothing connects until the first read. ``sample_rows`` overrides the rows sampled per
    table for statistics (default :data:`nl2sql_assets.adapters.stats.DEFAULT_SAMPLE_ROWS`).
    """
    rows = sample_rows or DEFAULT_SAMPLE_ROWS
    if config.is_duckdb:
        return DuckDBAdapter(config, stats_budget_s=stats_budget_s, sample_rows=rows)
    return SQLAlchemyAdapter(config, stats_budget_s=stats_budget_s, sample_rows=rows)
