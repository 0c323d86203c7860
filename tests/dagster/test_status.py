"""What the UI shows beyond the partitions: the live version, datasource observations, per-datasource figures.

In process, on a real SQLite instance (hash embedder): ``index_status`` after every
``chroma_collection`` run, the observation on a partition that stopped serving, the
``datasource/<id>`` observations of the sensor and of ``schema_snapshot``, check and
materialization figures keyed by datasource, and a hand-added partition key refused as an
unknown version (and listed by ``audit`` as never indexed).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.app.audit import build_audit, format_audit
from nl2sql_assets.app.runner import IndexResources
from nl2sql_assets.config import Settings
from nl2sql_assets.pipeline.names import PARTITIONS_NAME
from nl2sql_assets.schema.store import build_schema_store
from tests.dagster.conftest import HashEmbeddingsResource, run_sql
from tests.dagster.helpers import execute, failure_text, latest_metadata, run_requests, tick

#: A key someone could type into the UI's "add partition" box: a well-formed version nobody observed.
TYPED_VERSION = "20200101000000_deadbeef"


def _status(instance: dg.DagsterInstance) -> dict[str, object]:
    event = instance.get_latest_materialization_event(dg.AssetKey("index_status"))
    assert event is not None, "index_status was never recorded"
    return {k: getattr(v, "value", getattr(v, "data", v))
            for k, v in event.asset_materialization.metadata.items()}  # type: ignore[union-attr]


def _index(instance: dg.DagsterInstance, cursor: str | None = None) -> tuple[dg.SensorResult, dict[str, str]]:
    result = tick(instance, cursor)
    assert isinstance(result, dg.SensorResult)
    runs = run_requests(instance, result)
    assert all(r.success for r in runs), [failure_text(r) for r in runs if not r.success]
    return result, {r.tags["datasource"]: r.partition_key for r in result.run_requests}


def _shop_url(home: Path) -> str:
    entries = yaml.safe_load((home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]
    return str(next(e["url"] for e in entries if e["id"] == "shop"))


def _observations(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None) -> list[dict]:
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=20).records
    return [{k: getattr(v, "value", v) for k, v in r.asset_observation.metadata.items()}  # type: ignore[union-attr]
            for r in records]


@pytest.mark.parametrize("keep", [1, 3])
def test_index_status_names_the_live_version_and_what_became_of_the_old_one(
        instance: dg.DagsterInstance, shop_home: Path, monkeypatch: pytest.MonkeyPatch, keep: int) -> None:
    monkeypatch.setenv("NL2SQL_KEEP_VERSIONS", str(keep))
    first, keys = _index(instance)
    v1 = keys["shop"].split("@")[1]
    status = _status(instance)
    assert status["shop/live_version"] == v1 and status["crm/live_version"] == keys["crm"].split("@")[1]
    assert status["versions"] == {"shop": {v1: "live"}, "crm": {keys["crm"].split("@")[1]: "live"}}
    assert f"| shop | `{v1}` | **live** |" in str(status["status"]).splitlines()
    assert status["datasources"] == status["live_datasources"] == 2

    run_sql(_shop_url(shop_home), "ALTER TABLE products ADD COLUMN weight REAL;")
    second, new_keys = _index(instance, first.cursor)
    v2 = new_keys["shop"].split("@")[1]
    status = _status(instance)
    old_state = "evicted" if keep == 1 else "retained"
    assert status["shop/live_version"] == v2 and status["updated_by"] == new_keys["shop"]
    assert status["versions"]["shop"] == {v1: old_state, v2: "live"}  # type: ignore[index]
    rows = [line for line in str(status["status"]).splitlines() if line.startswith("| shop |")]
    assert rows == [f"| shop | `{v2}` | **live** |", f"| shop | `{v1}` | {old_state} |"]  # live first
    # the old partition itself now says it no longer serves (its materialization still says live_version=v1)
    (seen,) = _observations(instance, dg.AssetKey("chroma_collection"), keys["shop"])
    assert seen == {"status": old_state, "live_version": v2, "changed_by": new_keys["shop"]}
    assert _observations(instance, dg.AssetKey("chroma_collection"), keys["crm"]) == []  # crm did not change


def test_a_hand_added_partition_is_an_unknown_version_and_never_indexed(
        instance: dg.DagsterInstance, settings: Settings) -> None:
    _, keys = _index(instance)
    typed = f"shop@{TYPED_VERSION}"
    instance.add_dynamic_partitions(PARTITIONS_NAME, [typed])  # as if added in the UI
    result = execute(instance, typed)  # no drift-detection tags, as launched from the UI
    assert not result.success
    text = failure_text(result)
    assert f"no observed version '{TYPED_VERSION}'" in text and "not requested by drift detection" in text
    assert "moved again" not in text
    assert TYPED_VERSION not in [v.schema_version for v in build_schema_store(settings).list_versions("shop")]

    resources = IndexResources(settings, embeddings=HashEmbeddingsResource())
    try:
        report = build_audit(settings, instance, ["shop"], resources=resources)
    finally:
        resources.close()
    (shop,) = report.datasources
    states = {v.schema_version: v.state for v in shop.versions}
    assert states == {keys["shop"].split("@")[1]: "live", TYPED_VERSION: "never_indexed"}
    assert report.consistent
    text = format_audit(report)
    assert f"{TYPED_VERSION}: partition (never indexed)" in text and "(evicted)" not in text

    # the next index_status (any datasource's chroma_collection run) lists it the same way
    assert execute(instance, keys["crm"]).success
    assert _status(instance)["versions"]["shop"][TYPED_VERSION] == "never_indexed"  # type: ignore[index]
    assert "never indexed" in str(_status(instance)["status"])


def test_figures_are_keyed_by_datasource_so_each_plots_on_its_own(instance: dg.DagsterInstance) -> None:
    _, keys = _index(instance)
    shop, crm = keys["shop"], keys["crm"]
    snap = latest_metadata(instance, "schema_snapshot", shop)
    assert snap["shop/tables"] == snap["tables"] == 3 and snap["shop/columns"] == 12
    assert not [k for k in snap if k.startswith("crm/")]
    chroma = latest_metadata(instance, "chroma_collection", crm)
    assert chroma["crm/chunks_total"] == chroma["chunks_total"] and "shop/chunks_total" not in chroma
    assert "crm/embedding_model" not in chroma  # text is not plotted: only numbers get a per-datasource key
    evaluations = {}
    for partition in (shop, crm):
        records = instance.event_log_storage.get_event_records(dg.EventRecordsFilter(
            event_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION), limit=100)
        for record in records:
            evaluation = record.event_log_entry.dagster_event.event_specific_data  # type: ignore[union-attr]
            if evaluation.partition == partition:
                evaluations[(partition.split("@")[0], evaluation.check_name)] = {
                    k: getattr(v, "value", v) for k, v in evaluation.metadata.items()}
    cover = evaluations[("shop", "chunks_cover_snapshot")]
    assert cover["shop/tables"] == cover["tables"] == 3 and cover["shop/column_chunks"] == 12
    assert evaluations[("crm", "chunks_cover_snapshot")]["crm/tables"] == 3
    assert not [k for k in cover if k.startswith("crm/")]
    ids = evaluations[("crm", "chroma_matches_schema_store")]
    assert ids["crm/expected"] == ids["crm/present"] == ids["expected"]


def test_datasources_are_observed_by_the_sensor_on_change_and_by_each_snapshot(
        instance: dg.DagsterInstance, shop_home: Path) -> None:
    shop_key, crm_key = dg.AssetKey(["datasource", "shop"]), dg.AssetKey(["datasource", "crm"])
    first = tick(instance)
    assert isinstance(first, dg.SensorResult)
    observed = {e.asset_key: e.metadata for e in first.asset_events}
    assert set(observed) == {shop_key, crm_key}
    fingerprint = observed[shop_key]["fingerprint"].value  # type: ignore[union-attr]
    assert observed[shop_key]["drift"].value == "new" and observed[shop_key]["observed_by"].value == "schema_drift_sensor"
    run_requests(instance, first)
    (seen, *_) = _observations(instance, shop_key)
    assert seen["observed_by"] == "schema_snapshot" and seen["fingerprint"] == fingerprint and seen["tables"] == 3
    assert seen["schema_version"] == next(r.partition_key for r in first.run_requests
                                          if r.tags["datasource"] == "shop").split("@")[1]
    # nothing changed: no new event per tick
    quiet = tick(instance, first.cursor)
    assert not (isinstance(quiet, dg.SensorResult) and quiet.asset_events)
    run_sql(_shop_url(shop_home), "ALTER TABLE products ADD COLUMN weight REAL;")
    changed = tick(instance, first.cursor)
    assert isinstance(changed, dg.SensorResult)
    (event,) = changed.asset_events
    assert event.asset_key == shop_key and event.metadata["drift"].value == "changed"  # type: ignore[union-attr]
    assert event.metadata["fingerprint"].value != fingerprint  # type: ignore[union-attr]
