"""Write a demo dataset into a new SQLite file.

SQLite has no ``COMMENT ON``: the documentation of these tables travels as ``annotations``
in the datasources file instead (see :mod:`nl2sql_assets.demo.build`).
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from pathlib import Path

from nl2sql_assets.demo.dataset import DemoDataset


def _sqlite_value(value: object) -> object:
    """Dates and timestamps as ISO text, the form SQLite's date functions read."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    return value


def write_sqlite(path: Path, data: DemoDataset) -> None:
    """Create the tables and views, insert the rows, and refuse data that breaks a foreign key."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA foreign_keys = ON")  # the data files must hold consistent keys
        with conn:
            for table in data.tables:
                conn.execute(table.ddl())
            for view in data.views:
                conn.execute(view.sql)
            for table in data.tables:
                conn.executemany(table.insert_sql(), [tuple(_sqlite_value(v) for v in row)
                                                      for row in data.rows.get(table.name, [])])
        bad = conn.execute("PRAGMA foreign_key_check").fetchall()
        if bad:  # pragma: no cover - an inconsistent data file
            raise RuntimeError(f"demo data violates foreign keys: {bad[:3]}")
    finally:
        conn.close()
