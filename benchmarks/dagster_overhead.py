"""What does running indexing through Dagster cost, against the plain library path?

Generates ``--datasources`` small SQLite databases (default 50; 4 tables each, foreign keys,
a few rows) and indexes the same data twice, each path in its own fresh ``NL2SQL_HOME``
(schema store, embedding cache, Chroma) so neither profits from the other's caches:

- ``plain``: :func:`nl2sql_assets.pipeline.index.index_datasource` per datasource, one
  embedding service for all (what tests and the library use, no Dagster);
- ``dagster``: what ``nl2sql-assets index`` does: drift detection, one partition per datasource
  and one in-process ``index_job`` run each, recorded on a SQLite Dagster instance
  (the embedded default ``dagster.yaml``), resources shared by the runs.

Then both again with nothing changed (``*_unchanged``): the plain path re-indexes every
datasource (all unchanged), the Dagster path detects no drift and launches no run.
With ``--tmpfs-instance`` the Dagster path is also measured with ``DAGSTER_HOME`` on
``/dev/shm``, which separates Dagster's own work from the disk's fsync latency (its SQLite
event log commits every event). With ``--postgres-instance URL`` it is also measured on the
production instance config (``deploy/dagster.postgres.yaml``) in a fresh database on that
server (created and dropped).

Prints one JSON object; ``ratio`` = dagster seconds / plain seconds (target: at most 3).

Usage::

    python benchmarks/dagster_overhead.py --workdir /tmp/bench_dagster [--datasources 50] [--tmpfs-instance]
        [--postgres-instance postgresql+psycopg2://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import yaml

ENTITIES = ("customer", "order", "product", "invoice", "payment", "shipment", "supplier", "employee",
            "ticket", "campaign", "contract", "vehicle", "account", "warehouse", "region", "store")


def make_datasource(path: Path, n: int) -> str:
    """A small SQLite database whose names differ per datasource (so chunks differ too)."""
    a, b, c, d = (ENTITIES[(n + k * 5) % len(ENTITIES)] for k in range(4))
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(f"""
            CREATE TABLE {a}s_{n} ({a}_id INTEGER PRIMARY KEY, name TEXT NOT NULL, created_at TEXT, status TEXT);
            CREATE TABLE {b}s_{n} ({b}_id INTEGER PRIMARY KEY, {a}_id INTEGER REFERENCES {a}s_{n}({a}_id),
                                   amount NUMERIC(10, 2), note TEXT);
            CREATE TABLE {c}s_{n} ({c}_id INTEGER PRIMARY KEY, title TEXT, price NUMERIC(10, 2), category TEXT);
            CREATE TABLE {d}_{c}_links_{n} ({d}_id INTEGER, {c}_id INTEGER REFERENCES {c}s_{n}({c}_id),
                                   quantity INTEGER, PRIMARY KEY ({d}_id, {c}_id));
        """)
        conn.executemany(f"INSERT INTO {a}s_{n} VALUES (?, ?, ?, ?)",
                         [(i, f"{a} {i}", f"2025-0{1 + i % 9}-01", ["open", "closed"][i % 2]) for i in range(1, 21)])
        conn.executemany(f"INSERT INTO {b}s_{n} VALUES (?, ?, ?, ?)",
                         [(i, 1 + i % 20, 3.5 * i, None) for i in range(1, 41)])
    return f"sqlite:///{path}"


def fresh_home(root: Path, name: str, datasources: list[dict[str, object]]) -> Path:
    home = root / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "datasources.yaml").write_text(yaml.safe_dump({"datasources": datasources}), encoding="utf-8")
    return home


def use_home(home: Path, dagster_home: Path | None = None) -> None:
    for var in ("NL2SQL_DATASOURCES", "SCHEMA_STORE_URL", "CHROMA_HOST", "CHROMA_PORT", "EMBEDDING_PROVIDER",
                "EMBEDDING_MODEL", "ENRICHMENT"):
        os.environ.pop(var, None)
    os.environ["NL2SQL_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(dagster_home or home / "dagster")


def run_plain(home: Path) -> dict[str, object]:
    from nl2sql_assets.config import Settings, load_datasources
    from nl2sql_assets.indexing.embeddings import build_embedding_service
    from nl2sql_assets.pipeline.index import index_datasource
    from nl2sql_assets.indexing.vector_store import build_vector_store
    from nl2sql_assets.schema.store import build_schema_store

    use_home(home)
    settings = Settings.from_env()
    started = time.perf_counter()
    configs = load_datasources(settings.datasources_path)
    store = build_schema_store(settings)
    service = build_embedding_service(settings)
    vectors = build_vector_store(settings, service)
    passes = []
    for _ in range(2):  # the index, then again with nothing changed
        t0 = time.perf_counter()
        outcomes = [index_datasource(config, store, vectors) for config in configs]
        passes.append({"seconds": round(time.perf_counter() - t0, 3),
                       "statuses": sorted({o.status for o in outcomes}),
                       "embedded": sum(o.refresh.embedded for o in outcomes),
                       "chunks": sum(o.refresh.total for o in outcomes)})
    total = time.perf_counter() - started
    store.close()
    first_overhead = total - passes[0]["seconds"] - passes[1]["seconds"]  # type: ignore[operator]
    return {"seconds": round(passes[0]["seconds"] + first_overhead, 3), "first": passes[0],  # type: ignore[operator]
            "unchanged": passes[1], "setup_seconds": round(first_overhead, 3)}


def run_dagster_on_postgres(home: Path, server_url: str) -> dict[str, object]:
    """The Dagster path on deploy/dagster.postgres.yaml, in a fresh database (dropped afterwards)."""
    import uuid

    import sqlalchemy as sa

    url = sa.make_url(server_url)
    name = f"dagster_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    dagster_home = home / "dagster_pg"
    dagster_home.mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "deploy" / "dagster.postgres.yaml", dagster_home / "dagster.yaml")
    os.environ.update({"DAGSTER_PG_HOST": url.host or "127.0.0.1", "DAGSTER_PG_PORT": str(url.port or 5432),
                       "DAGSTER_PG_USER": url.username or "postgres", "DAGSTER_PG_PASSWORD": url.password or "",
                       "DAGSTER_PG_DB": name})
    try:
        return run_dagster(home, dagster_home=dagster_home)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def run_dagster(home: Path, dagster_home: Path | None = None) -> dict[str, object]:
    from nl2sql_assets.config import Settings
    from nl2sql_assets.app.instance import prepare_instance
    from nl2sql_assets.app.runner import IndexResources, run_index

    use_home(home, dagster_home)
    settings = Settings.from_env()
    started = time.perf_counter()
    instance = prepare_instance(settings)
    resources = IndexResources(settings)
    setup = time.perf_counter() - started
    passes = []
    try:
        for _ in range(2):
            t0 = time.perf_counter()
            results = run_index(settings, instance=instance, resources=resources)
            passes.append({"seconds": round(time.perf_counter() - t0, 3),
                           "statuses": sorted({r.status for r in results}),
                           "runs": sum(1 for r in results if r.run_id),
                           "failed": [r.line() for r in results if r.status == "failed"]})
        events = sum(len(instance.all_logs(run.run_id)) for run in instance.get_runs())
    finally:
        resources.close()
        instance.dispose()
    runs = max(int(passes[0]["runs"]), 1)  # type: ignore[call-overload]
    return {"seconds": round(passes[0]["seconds"] + setup, 3), "first": passes[0],  # type: ignore[operator]
            "unchanged": passes[1], "setup_seconds": round(setup, 3), "event_log_entries": events,
            "events_per_run": round(events / runs, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="where databases and homes are written (wiped)")
    parser.add_argument("--datasources", type=int, default=50)
    parser.add_argument("--tmpfs-instance", action="store_true", help="also measure with DAGSTER_HOME on /dev/shm")
    parser.add_argument("--postgres-instance", metavar="URL", help="also measure on a PostgreSQL Dagster instance")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("TQDM_DISABLE", "1")

    work = args.workdir.absolute()
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    entries = [{"id": f"ds_{n:03d}", "url": make_datasource(data / f"ds_{n:03d}.db", n),
                "description": f"Small generated datasource number {n}"} for n in range(args.datasources)]

    plain = run_plain(fresh_home(work, "plain", entries))
    dagster = run_dagster(fresh_home(work, "dagster", entries))
    out: dict[str, object] = {
        "benchmark": "dagster_overhead",
        "datasources": args.datasources,
        "tables_per_datasource": 4,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "plain": plain,
        "dagster": dagster,
        "ratio": round(float(dagster["seconds"]) / float(plain["seconds"]), 2),  # type: ignore[arg-type]
        "ratio_unchanged": round(float(dagster["unchanged"]["seconds"])  # type: ignore[index]
                                 / float(plain["unchanged"]["seconds"]), 2),  # type: ignore[index]
        "dagster_seconds_per_run": round(float(dagster["first"]["seconds"])  # type: ignore[index]
                                         / max(int(dagster["first"]["runs"]), 1), 3),  # type: ignore[index]
        "plain_seconds_per_datasource": round(float(plain["first"]["seconds"]) / args.datasources, 3),  # type: ignore[index]
        "target_ratio": 3.0,
    }
    if args.tmpfs_instance and Path("/dev/shm").is_dir():
        shm = Path(tempfile.mkdtemp(prefix="dagster_home_", dir="/dev/shm"))
        try:
            fast = run_dagster(fresh_home(work, "dagster_tmpfs", entries), dagster_home=shm)
        finally:
            shutil.rmtree(shm, ignore_errors=True)
        out["dagster_tmpfs_instance"] = fast
        out["ratio_tmpfs_instance"] = round(float(fast["seconds"]) / float(plain["seconds"]), 2)  # type: ignore[arg-type]
    if args.postgres_instance:
        pg = run_dagster_on_postgres(fresh_home(work, "dagster_pg", entries), args.postgres_instance)
        out["dagster_postgres_instance"] = pg
        out["ratio_postgres_instance"] = round(float(pg["seconds"]) / float(plain["seconds"]), 2)  # type: ignore[arg-type]
    out["target_met"] = float(out["ratio"]) <= 3.0  # type: ignore[arg-type]
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
