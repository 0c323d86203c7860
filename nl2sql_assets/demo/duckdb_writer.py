"""Write a demo dataset into a new DuckDB file, documented with ``COMMENT ON``."""

from __future__ import annotations

import csv
import tempfile
from datetime import datetime
from pathlib import Path

from nl2sql_assets.demo.dataset import DemoDataset, DemoTable, Row


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _csv_cell(value: object) -> object:
    """The spelling ``read_csv`` below parses back: ``\\N`` for NULL, lower-case booleans."""
    if value is None:
        return r"\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return value


def _batches(table: DemoTable, rows: list[Row]) -> list[list[Row]]:
    """Parents before children for a self-reference: DuckDB checks foreign keys per statement."""
    self_ref = next((c for c in table.columns if f"REFERENCES {table.name}(" in c.constraints), None)
    if self_ref is None:
        return [rows]
    index = [c.name for c in table.columns].index(self_ref.name)
    return [[r for r in rows if r[index] is None], [r for r in rows if r[index] is not None]]


def write_duckdb(path: Path, data: DemoDataset) -> None:
    """Load through CSV files: DuckDB binds parameters slowly (~100 µs a row), read_csv is 5x faster."""
    import duckdb

    conn = duckdb.connect(str(path))
    try:
        with tempfile.TemporaryDirectory(prefix="nl2sql-demo-") as scratch:
            for table in data.tables:
                conn.execute(table.ddl())
                conn.execute(f"COMMENT ON TABLE {table.name} IS {_sql_literal(table.doc)}")
                for col in table.columns:
                    if col.doc:
                        conn.execute(f"COMMENT ON COLUMN {table.name}.{col.name} IS {_sql_literal(col.doc)}")
            for table in data.tables:
                types = ", ".join(f"{_sql_literal(c.name)}: {_sql_literal(c.type)}" for c in table.columns)
                for number, batch in enumerate(_batches(table, data.rows.get(table.name, []))):
                    csv_path = Path(scratch) / f"{table.name}.{number}.csv"
                    with csv_path.open("w", newline="", encoding="utf-8") as handle:
                        csv.writer(handle).writerows([_csv_cell(v) for v in row] for row in batch)
                    conn.execute(
                        f"INSERT INTO {table.name} SELECT * FROM read_csv({_sql_literal(str(csv_path))}, "
                        f"header = false, auto_detect = false, nullstr = '\\N', quote = '\"', escape = '\"', "
                        f"columns = {{{types}}})"
                    )
        for view in data.views:
            conn.execute(view.sql)
            conn.execute(f"COMMENT ON VIEW {view.name} IS {_sql_literal(view.doc)}")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()
