"""``schema_drift_sensor`` ticks with ``build_sensor_context`` (no daemon), against real SQLite databases."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.config import Settings
from tests.dagster.conftest import run_sql, write_datasources
from tests.dagster.helpers import run_requests, tick


def _entries(home: Path) -> list[dict[str, object]]:
    return yaml.safe_load((home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]


def test_first_tick_adds_a_partition_and_requests_a_run_per_datasource(instance: dg.DagsterInstance) -> None:
    result = tick(instance)
    assert isinstance(result, dg.SensorResult)
    keys = sorted(r.partition_key for r in result.run_requests)
    assert [k.split("@")[0] for k in keys] == ["crm", "shop"]
    for request in result.run_requests:
        assert request.run_key == request.partition_key
        ds, version = request.partition_key.split("@")
        assert request.tags["datasource"] == ds and request.tags["schema_version"] == version
        assert request.tags["nl2sql/fingerprint"].startswith(version.split("_")[1])
    (add,) = result.dynamic_partitions_requests
    assert add.partitions_def_name == "datasource_versions" and sorted(add.partition_keys) == keys
    cursor = json.loads(result.cursor)
    assert set(cursor["datasources"]) == {"crm", "shop"}
    assert all(len(s["fingerprint"]) == 64 and len(s["metadata_hash"]) == 64 for s in cursor["datasources"].values())
    # the sensor registers nothing
    from nl2sql_assets.schema.store import build_schema_store

    assert build_schema_store(Settings.from_env()).list_datasources() == []


def test_ticks_are_idempotent_while_a_run_is_pending(instance: dg.DagsterInstance) -> None:
    first = tick(instance)
    second = tick(instance, first.cursor)
    assert [r.run_key for r in second.run_requests] == [r.run_key for r in first.run_requests]


def test_after_the_runs_nothing_changed_is_a_skip(instance: dg.DagsterInstance) -> None:
    first = tick(instance)
    assert all(r.success for r in run_requests(instance, first))
    second = tick(instance, first.cursor)
    skip = second.skip_reason if isinstance(second, dg.SensorResult) else second
    assert isinstance(skip, dg.SkipReason)
    assert "unchanged" in (skip.skip_message or "")
    assert not (isinstance(second, dg.SensorResult) and second.run_requests)


def test_new_column_gives_a_new_partition(instance: dg.DagsterInstance, shop_home: Path) -> None:
    first = tick(instance)
    run_requests(instance, first)
    shop = next(r for r in first.run_requests if r.tags["datasource"] == "shop")
    url = next(e["url"] for e in _entries(shop_home) if e["id"] == "shop")
    run_sql(str(url), "ALTER TABLE orders ADD COLUMN coupon TEXT;")
    result = tick(instance, first.cursor)
    (request,) = result.run_requests
    assert request.tags["datasource"] == "shop" and request.partition_key != shop.partition_key
    assert request.tags["nl2sql/request"] == "new_version"


def test_metadata_only_change_reruns_the_current_partition(instance: dg.DagsterInstance, shop_home: Path) -> None:
    first = tick(instance)
    run_requests(instance, first)
    entries = _entries(shop_home)
    entries[0]["annotations"] = {"tables": {"orders": "One row per order placed in the shop"}}
    write_datasources(shop_home / "datasources.yaml", entries)
    result = tick(instance, first.cursor)
    (request,) = result.run_requests
    shop = next(r for r in first.run_requests if r.tags["datasource"] == "shop")
    assert request.partition_key == shop.partition_key
    assert request.run_key.startswith(shop.partition_key + ":meta:") and request.run_key != shop.run_key
    assert request.tags["nl2sql/request"] == "metadata_refresh"


def test_unreachable_datasource_is_logged_and_the_others_proceed(
        instance: dg.DagsterInstance, shop_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    entries = _entries(shop_home)
    entries.append({"id": "down", "url": "postgresql+psycopg2://reader:${DOWN_PW}@127.0.0.1:1/x"})
    write_datasources(shop_home / "datasources.yaml", entries)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOWN_PW", "pw-must-not-show-9731")
        result = tick(instance)
    assert sorted(r.tags["datasource"] for r in result.run_requests) == ["crm", "shop"]
    assert "down" not in json.loads(result.cursor)["datasources"]
    logged = caplog.text
    assert "down" in logged and "pw-must-not-show-9731" not in logged


def test_empty_or_missing_datasources_file_skips(instance: dg.DagsterInstance, shop_home: Path) -> None:
    write_datasources(shop_home / "datasources.yaml", [])
    assert isinstance(tick(instance), dg.SkipReason)
    (shop_home / "datasources.yaml").unlink()
    skip = tick(instance)
    assert isinstance(skip, dg.SkipReason) and "datasources file" in (skip.skip_message or "")
