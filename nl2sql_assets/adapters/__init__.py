"""Datasource adapters: read a database's structure (cheap: drift checks) or a full snapshot.

``open_adapter(config)`` picks the adapter for the URL (native DuckDB for ``duckdb://``,
SQLAlchemy otherwise; see :mod:`nl2sql_assets.adapters.factory`); the seam every adapter
implements is in :mod:`nl2sql_assets.adapters.base`.
"""

from nl2sql_assets.adapters.base import SchemaAdapter, datasource_info
from nl2sql_assets.adapters.factory import open_adapter

__all__ = ["SchemaAdapter", "datasource_info", "open_adapter"]
