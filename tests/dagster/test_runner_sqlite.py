"""The CLI's kept-open SQLite connection: which files, and that Dagster's closes stop deleting the WAL."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from nl2sql_assets.app.instance import sqlite_instance_files, sqlite_kept_open


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def test_instance_files_are_the_shared_sqlite_databases(instance: dg.DagsterInstance, settings) -> None:
    home = settings.dagster_home
    assert sorted(sqlite_instance_files(instance)) == sorted([
        home / "history" / "runs.db", home / "history" / "runs" / "index.db", home / "schedules" / "schedules.db"])


def test_wal_survives_dagster_closes_only_while_kept_open(instance: dg.DagsterInstance, settings) -> None:
    index = settings.dagster_home / "history" / "runs" / "index.db"
    instance.add_dynamic_partitions("datasource_versions", ["a@1"])  # a write; its connection closes
    assert not _wal(index).exists()  # the last connection closed: checkpointed and deleted
    with sqlite_kept_open(instance):
        instance.add_dynamic_partitions("datasource_versions", ["a@2"])
        assert _wal(index).exists()  # not the last connection any more: no checkpoint, no delete
        assert instance.has_dynamic_partition("datasource_versions", "a@2")
    instance.add_dynamic_partitions("datasource_versions", ["a@3"])
    assert not _wal(index).exists()
    assert set(instance.get_dynamic_partitions("datasource_versions")) == {"a@1", "a@2", "a@3"}


def test_nothing_to_hold_on_an_in_memory_instance() -> None:
    with dg.DagsterInstance.ephemeral() as ephemeral:
        assert sqlite_instance_files(ephemeral) == []
        with sqlite_kept_open(ephemeral):
            pass
