"""One ``index`` command, many runs: the prepared per-run event-log shards record exactly what
Dagster would record itself, and the shared resources give the same index as fresh ones."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.app.audit import build_audit
from nl2sql_assets.app.instance import prepare_instance
from nl2sql_assets.app.run_shards import RunShards
from nl2sql_assets.app.runner import IndexResources, run_index
from nl2sql_assets.config import Settings
from tests.dagster.conftest import (  # noqa: F401 - fixtures
    HashEmbeddingsResource,
    dagster_home,
    instance,
    settings,
    shop_home,
)


def _event_types(instance: dg.DagsterInstance, run_id: str) -> Counter[str]:
    return Counter(e.dagster_event_type.value for e in instance.all_logs(run_id) if e.dagster_event_type is not None)


def _index(settings: Settings, instance: dg.DagsterInstance) -> dict[str, object]:
    resources = IndexResources(settings, embeddings=HashEmbeddingsResource())
    try:
        results = {r.datasource_id: r for r in run_index(settings, instance=instance, resources=resources)}
        audit = build_audit(settings, instance, resources=resources)
    finally:
        resources.close()
    return {"results": results, "audit": audit}


def test_runs_record_their_events_in_prepared_shards(instance: dg.DagsterInstance, settings: Settings) -> None:
    done = _index(settings, instance)
    results, audit = done["results"], done["audit"]
    assert {r.status for r in results.values()} == {"new_version"}  # type: ignore[attr-defined]
    assert audit.consistent  # type: ignore[attr-defined]
    for result in results.values():  # type: ignore[attr-defined]
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.is_success
        shard = settings.dagster_home / "history" / "runs" / f"{result.run_id}.db"
        with sqlite3.connect(shard) as conn:  # the events are in the run's own shard, as Dagster writes them
            stored = conn.execute("SELECT count(*) FROM event_logs").fetchone()[0]
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert stored == len(instance.all_logs(result.run_id)) > 10
        types = _event_types(instance, result.run_id)
        assert types["PIPELINE_SUCCESS"] == 1 and types["ASSET_MATERIALIZATION"] >= 4
        key = dg.AssetKey("chroma_collection")
        assert instance.get_latest_materialization_event(key) is not None


def test_prepared_shards_record_the_same_as_dagster_alone(
        instance: dg.DagsterInstance, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    prepared = _index(settings, instance)

    other = Path(tempfile.mkdtemp(prefix="dagster_home_plain_", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        monkeypatch.setenv("DAGSTER_HOME", str(other))
        monkeypatch.setenv("NL2SQL_HOME", str(settings.home / "second"))
        shutil.copy(settings.datasources_path, settings.home / "datasources_copy.yaml")
        monkeypatch.setenv("NL2SQL_DATASOURCES", str(settings.home / "datasources_copy.yaml"))
        plain_settings = Settings.from_env()

        def no_template(self: RunShards) -> Path:
            raise OSError("disabled for the comparison")

        monkeypatch.setattr(RunShards, "_build_template", no_template)
        plain_instance = prepare_instance(plain_settings)
        try:
            plain = _index(plain_settings, plain_instance)
            for ds, result in prepared["results"].items():  # type: ignore[attr-defined]
                twin = plain["results"][ds]  # type: ignore[index]
                fingerprint = result.schema_version.split("_")[1]  # the timestamps differ by the clock
                assert (result.status, fingerprint) == (twin.status, twin.schema_version.split("_")[1])
                assert _event_types(instance, result.run_id) == _event_types(plain_instance, twin.run_id)
            counts = {d.datasource_id: (d.expected_chunks, d.present_chunks, d.chunk_counts)
                      for d in prepared["audit"].datasources}  # type: ignore[attr-defined]
            assert counts == {d.datasource_id: (d.expected_chunks, d.present_chunks, d.chunk_counts)
                              for d in plain["audit"].datasources}  # type: ignore[attr-defined]
        finally:
            plain_instance.dispose()
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_template_is_removed_and_nothing_is_prepared_off_sqlite(instance: dg.DagsterInstance) -> None:
    shards = RunShards(instance)
    assert shards.enabled
    template_folder = shards._folder
    assert template_folder is not None and template_folder.is_dir()
    storage = instance.event_log_storage
    assert "_connect" in vars(storage)  # one engine per shard while the command runs
    assert storage.has_table("asset_check_executions") and storage.has_table("asset_check_executions")
    assert not storage.has_table("no_such_table")
    run_id = shards.new_run_id()
    with shards.ready(run_id):
        with storage.run_connection(run_id) as conn:  # type: ignore[attr-defined]
            assert conn.exec_driver_sql("SELECT count(*) FROM event_logs").scalar() == 0
        engine = shards._engines[run_id]
        with storage.run_connection(run_id):  # type: ignore[attr-defined]
            assert shards._engines[run_id] is engine
    assert run_id not in shards._engines  # disposed with its run
    shards.close()
    assert not template_folder.exists() and not shards.enabled
    assert "_connect" not in vars(storage) and "has_table" not in vars(storage)  # Dagster's own methods again
    assert not shards._engines
    shards.close()  # twice is fine
    with dg.DagsterInstance.ephemeral() as ephemeral:
        off = RunShards(ephemeral)
        assert not off.enabled
        with off.ready(off.new_run_id()):
            pass


def test_each_run_reads_only_its_own_datasource_upstream(instance: dg.DagsterInstance, settings: Settings) -> None:
    """A run's provenance names its datasource alone (it once named every datasource of the
    file, and each of N runs read N upstream records)."""
    results = _index(settings, instance)["results"]
    records = instance.fetch_materializations(dg.AssetKey("schema_snapshot"), limit=10).records
    assert len(records) == len(results) == 2  # type: ignore[arg-type]
    for record in records:
        datasource = record.partition_key.split("@")[0]
        inputs = {k.removeprefix("dagster/input_data_version/")
                  for k in record.asset_materialization.tags if k.startswith("dagster/input_data_version/")}
        assert inputs == {f"datasource/{datasource}"}
        assert record.run_id == results[datasource].run_id  # type: ignore[index]


def _synchronous(path: Path) -> int:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql("PRAGMA synchronous").scalar())
    finally:
        engine.dispose()


def test_wal_sync_normal_only_for_the_instance_files_and_only_inside(
        instance: dg.DagsterInstance, settings: Settings, tmp_path: Path) -> None:
    from nl2sql_assets.app.run_shards import wal_sync_normal

    inside = settings.dagster_home / "history" / "runs" / "index.db"
    outside = tmp_path / "elsewhere.db"
    assert _synchronous(inside) == 2  # FULL: SQLite's default
    with wal_sync_normal(instance):
        assert _synchronous(inside) == 1  # NORMAL
        assert _synchronous(outside) == 2  # another database of the process is left alone
        instance.add_dynamic_partitions("datasource_versions", ["a@1"])
    assert _synchronous(inside) == 2  # the hook is gone with the block
    assert instance.has_dynamic_partition("datasource_versions", "a@1")
