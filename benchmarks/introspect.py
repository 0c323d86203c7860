"""How long does introspection take for a wide schema? (SQLite and DuckDB)

Generates ``--tables`` tables of ``--columns`` columns in a SQLite file and a DuckDB file
(a primary key, a foreign key to the previous table in every fifth table, mixed column
types, a few rows each), then times through the public API:

- ``fingerprint_s``: what a drift check costs: open the adapter, ``read_structure()``,
  ``compute_fingerprint`` (best of ``--repeat`` runs; every run is listed);
- ``full_snapshot_s``: ``read_snapshot`` with statistics (one run, generous budget).

Wall-clock seconds are what users wait; ``*_cpu_s`` (this process's CPU time) tells how much
of it is ours when the machine is shared. The 1-minute load average is printed too.

Prints one JSON document. Usage::

    .venv/bin/python benchmarks/introspect.py [--tables 1000] [--columns 20] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.schema.fingerprint import compute_fingerprint

_TYPES = ["VARCHAR(40)", "INTEGER", "DECIMAL(10, 2)", "DATE", "VARCHAR(12)"]
ROWS_PER_TABLE = 5


def schema_ddl(tables: int, columns: int) -> list[str]:
    """CREATE TABLE and INSERT statements valid in both SQLite and DuckDB."""
    statements = []
    for i in range(tables):
        cols = ["id INTEGER PRIMARY KEY"]
        has_fk = i > 0 and i % 5 == 0
        if has_fk:
            cols.append(f"parent_id INTEGER REFERENCES t{i - 1:04d} (id)")
        while len(cols) < columns:
            n = len(cols)
            cols.append(f"c{n:02d}_{['name', 'qty', 'amount', 'day', 'status'][n % 5]} {_TYPES[n % 5]}")
        statements.append(f"CREATE TABLE t{i:04d} ({', '.join(cols)})")
        rows = []
        for r in range(1, ROWS_PER_TABLE + 1):
            values = [str(r)] + ([str(r)] if has_fk else [])
            while len(values) < columns:
                n = len(values)
                values.append([f"'name {r}'", str(r * n), f"{r}.50", f"'2024-01-{r:02d}'",
                               f"'{['open', 'paid'][r % 2]}'"][n % 5])
            rows.append(f"({', '.join(values)})")
        statements.append(f"INSERT INTO t{i:04d} VALUES {', '.join(rows)}")
    return statements


def build_sqlite(path: Path, statements: list[str]) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    with con:
        for stmt in statements:
            con.execute(stmt)
    con.close()


def build_duckdb(path: Path, statements: list[str]) -> None:
    import duckdb

    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    con.execute("BEGIN")
    for stmt in statements:
        con.execute(stmt)
    con.execute("COMMIT")
    con.close()


def measure(url: str, repeat: int, budget_s: float) -> dict[str, object]:
    config = DatasourceConfig(id="bench", url=url)
    runs = []
    cpu_runs = []
    fingerprint = ""
    table_count = column_count = 0
    for _ in range(repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        adapter = open_adapter(config)
        try:
            tables = adapter.read_structure()
            fingerprint = compute_fingerprint(tables)
        finally:
            adapter.close()
        runs.append(time.perf_counter() - started)
        cpu_runs.append(time.process_time() - cpu_started)
        table_count, column_count = len(tables), sum(len(t.columns) for t in tables)
    started, cpu_started = time.perf_counter(), time.process_time()
    adapter = open_adapter(config, stats_budget_s=budget_s)
    try:
        snapshot = adapter.read_snapshot(datetime.now(UTC))
    finally:
        adapter.close()
    full, full_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert snapshot.fingerprint == fingerprint, "read_structure and read_snapshot disagree"
    return {
        "tables": table_count,
        "columns": column_count,
        "fingerprint_s": round(min(runs), 4),
        "fingerprint_median_s": round(statistics.median(runs), 4),
        "fingerprint_runs_s": [round(r, 4) for r in runs],
        "fingerprint_cpu_s": round(min(cpu_runs), 4),
        "full_snapshot_s": round(full, 3),
        "full_snapshot_cpu_s": round(full_cpu, 3),
        "row_count_status": dict(Counter(t.row_count_status for t in snapshot.tables)),
        "fingerprint": fingerprint[:16],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--out-dir", type=Path, default=None, help="where the generated databases go")
    parser.add_argument("--repeat", type=int, default=5, help="fingerprint runs per engine")
    parser.add_argument("--budget", type=float, default=600.0, help="statistics budget (s) of the full run")
    parser.add_argument("--engines", default="sqlite,duckdb")
    args = parser.parse_args(argv)
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="nl2sql-introspect-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    statements = schema_ddl(args.tables, args.columns)
    result: dict[str, object] = {"tables": args.tables, "columns": args.columns,
                                 "rows_per_table": ROWS_PER_TABLE, "out_dir": str(out_dir), "engines": {}}
    engines: dict[str, object] = {}
    for engine in args.engines.split(","):
        started = time.perf_counter()
        if engine == "sqlite":
            path = out_dir / "introspect.sqlite"
            build_sqlite(path, statements)
            url = f"sqlite:///{path}"
        elif engine == "duckdb":
            path = out_dir / "introspect.duckdb"
            build_duckdb(path, statements)
            url = f"duckdb:///{path}"
        else:
            parser.error(f"unknown engine {engine!r} (sqlite, duckdb)")
        build_s = time.perf_counter() - started
        figures = measure(url, args.repeat, args.budget)
        figures["build_s"] = round(build_s, 2)
        figures["fingerprint_under_1s"] = figures["fingerprint_s"] < 1.0  # type: ignore[operator]
        engines[engine] = figures
    result["engines"] = engines
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    result["cpu_count"] = os.cpu_count()
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
