"""The production instance config (deploy/dagster.postgres.yaml) on the local PostgreSQL.

A fresh database ``dagster_<random>`` holds the instance: a sensor tick adds the partition,
a run materializes it, and the runs, partitions, materializations and pool limits are read
back from PostgreSQL. The database is dropped afterwards.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from tests.dagster.helpers import latest_metadata, run_requests, tick

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture
def pg_dagster_home(postgres_url: str, shop_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    url = sa.make_url(postgres_url)
    name = f"dagster_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    home = shop_home / "dagster_pg"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.postgres.yaml", home / "dagster.yaml")
    for var, value in {"DAGSTER_PG_HOST": url.host, "DAGSTER_PG_PORT": str(url.port or 5432),
                       "DAGSTER_PG_USER": url.username, "DAGSTER_PG_PASSWORD": url.password or "",
                       "DAGSTER_PG_DB": name, "DAGSTER_HOME": str(home)}.items():
        monkeypatch.setenv(var, value or "")
    try:
        yield home
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.mark.usefixtures("pg_dagster_home")
def test_sensor_tick_and_run_recorded_in_postgres(postgres_url: str) -> None:
    with dg.DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        result = tick(instance)
        assert isinstance(result, dg.SensorResult) and result.run_requests
        runs = run_requests(instance, result)
        assert all(r.success for r in runs)
        key = next(r.partition_key for r in result.run_requests if r.tags["datasource"] == "shop")
        assert key in instance.get_dynamic_partitions("datasource_versions")
        assert latest_metadata(instance, "chroma_collection", key)["live_version"] == key.split("@")[1]
        pools = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
        assert pools.get("nl2sql_index") == 1
        run_ids = {r.run_id for r in runs}
    # read it back from PostgreSQL itself, not through the instance
    db = sa.make_url(postgres_url).set(database=os.environ["DAGSTER_PG_DB"])
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        stored_runs = set(conn.exec_driver_sql("SELECT run_id FROM runs").scalars())
        materialized = conn.exec_driver_sql(
            "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
            "AND partition = %(key)s", {"key": key}).scalar()
        partitions = set(conn.exec_driver_sql(
            "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'datasource_versions'").scalars())
    engine.dispose()
    assert run_ids <= stored_runs
    assert materialized == 4
    assert key in partitions
