"""Per-partition runs of ``index_job`` on a real SQLite database and real Chroma (hash embedder for speed)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from nl2sql_assets.config import Settings
from nl2sql_assets.pipeline.keys import partition_key
from nl2sql_assets.pipeline.names import PARTITIONS_NAME
from nl2sql_assets.schema.fingerprint import make_schema_version
from nl2sql_assets.schema.store import build_schema_store
from tests.dagster.conftest import HashEmbeddingsResource, run_sql, write_datasources
from tests.dagster.helpers import execute, failure_text, latest_metadata, run_requests, tick


def _shop_url(home: Path) -> str:
    entries = yaml.safe_load((home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]
    return str(next(e["url"] for e in entries if e["id"] == "shop"))


def _index_first_version(instance: dg.DagsterInstance) -> tuple[dg.SensorResult, dict[str, str]]:
    result = tick(instance)
    runs = run_requests(instance, result)
    assert all(r.success for r in runs), [failure_text(r) for r in runs if not r.success]
    keys = {r.tags["datasource"]: r.partition_key for r in result.run_requests}
    return result, keys


def _live(settings: Settings, datasource_id: str) -> str | None:
    from nl2sql_assets.indexing.vector_store import build_vector_store

    service = HashEmbeddingsResource().get_service()
    return build_vector_store(settings, service).live_version(datasource_id)


def test_run_materializes_all_four_assets_with_ui_metadata(instance: dg.DagsterInstance, settings: Settings) -> None:
    _, keys = _index_first_version(instance)
    key = keys["shop"]
    version = key.split("@")[1]
    snap = latest_metadata(instance, "schema_snapshot", key)
    assert snap["datasource"] == "shop" and snap["schema_version"] == version
    assert str(snap["fingerprint"]).startswith(version.split("_")[1]) and len(str(snap["fingerprint"])) == 64
    assert (snap["tables"], snap["columns"], snap["foreign_keys"]) == (3, 12, 1)
    assert snap["registration"] == "new" and "+3 tables" in str(snap["diff"])
    enriched = latest_metadata(instance, "enriched_snapshot", key)
    assert enriched["enrichment"] == "off"
    chunks = latest_metadata(instance, "schema_chunks", key)
    assert (chunks["chunks_table"], chunks["chunks_column"], chunks["chunks_relationship"]) == (3, 12, 1)
    assert chunks["chunks_total"] == 1 + 3 + 12 + 1
    chroma = latest_metadata(instance, "chroma_collection", key)
    assert chroma["live_version"] == version
    assert chroma["chunks_embedded"] + chroma["chunks_from_cache"] + chroma["chunks_reused"] == chroma["chunks_total"]
    assert chroma["embedding_model"] == "bag-of-words" and chroma["embedding_dimension"] == 64
    assert chroma["evicted_versions"] == []
    assert chroma["writer_wait_seconds"] == 0.0  # no other writer of the embedded store
    assert _live(settings, "shop") == version
    run = instance.get_runs(filters=dg.RunsFilter(tags={"datasource": "shop"}))[0]
    assert run.tags["schema_version"] == version and run.tags["dagster/partition"] == key


def test_every_check_passes_and_is_recorded_per_partition(instance: dg.DagsterInstance) -> None:
    result = tick(instance)
    runs = run_requests(instance, result)
    evaluations = {(e.asset_key.to_user_string(), e.check_name): e.passed
                   for r in runs for e in r.get_asset_check_evaluations() if r.tags.get("datasource") == "shop"
                   } if False else {}
    for run in runs:
        for evaluation in run.get_asset_check_evaluations():
            evaluations[(evaluation.asset_key.to_user_string(), evaluation.check_name)] = evaluation.passed
            assert evaluation.partition is not None
    assert evaluations == {
        ("schema_chunks", "chunks_cover_snapshot"): True,
        ("schema_chunks", "no_pii_values_in_chunks"): True,
        ("chroma_collection", "vector_dimension_matches_provider"): True,
        ("chroma_collection", "tables_found_by_name"): True,
        ("chroma_collection", "chroma_matches_schema_store"): True,
        ("chroma_collection", "retrieval_quality"): True,  # no evaluation questions: passed, questions=0
    }


def test_partition_never_observed_cannot_be_materialized(instance: dg.DagsterInstance, settings: Settings) -> None:
    from nl2sql_assets.drift import read_live_structure
    from nl2sql_assets.config import load_datasources

    config = next(c for c in load_datasources(settings.datasources_path) if c.id == "shop")
    live = read_live_structure(config, __import__("datetime").datetime.now(__import__("datetime").UTC))
    key = partition_key("shop", make_schema_version(live.captured_at, live.fingerprint))
    instance.add_dynamic_partitions(PARTITIONS_NAME, [key])  # as if someone typed it into the UI
    result = execute(instance, key)
    assert not result.success
    text = failure_text(result)
    assert "no observed version" in text and "drift detection" in text
    assert build_schema_store(settings).list_versions("shop") == []
    assert _live(settings, "shop") is None


def test_structure_moved_since_detection_fails_clearly(instance: dg.DagsterInstance, shop_home: Path,
                                                       settings: Settings) -> None:
    result = tick(instance)
    run_sql(_shop_url(shop_home), "ALTER TABLE products ADD COLUMN weight REAL;")
    runs = run_requests(instance, result)
    shop = next(r for r, req in zip(runs, result.run_requests, strict=True) if req.tags["datasource"] == "shop")
    crm = next(r for r, req in zip(runs, result.run_requests, strict=True) if req.tags["datasource"] == "crm")
    assert crm.success and not shop.success
    text = failure_text(shop)
    assert "moved again since drift detection" in text and "next drift check" in text
    assert build_schema_store(settings).list_versions("shop") == []
    # the next tick picks up the new structure, and that run succeeds
    again = tick(instance, result.cursor)
    (request,) = [r for r in again.run_requests if r.tags["datasource"] == "shop"]
    assert request.partition_key != next(r.partition_key for r in result.run_requests if r.tags["datasource"] == "shop")
    assert all(r.success for r in run_requests(instance, again))


def test_blocking_check_keeps_the_live_index(instance: dg.DagsterInstance, shop_home: Path,
                                             settings: Settings) -> None:
    first, keys = _index_first_version(instance)
    entries = yaml.safe_load((shop_home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]
    entries[0]["annotations"] = {"columns": {"orders.status": "Ask ops.lead@example.com for the meaning"}}
    write_datasources(shop_home / "datasources.yaml", entries)
    result = tick(instance, first.cursor)
    (run,) = run_requests(instance, result)
    assert not run.success
    evaluations = {e.check_name: e.passed for e in run.get_asset_check_evaluations()}
    assert evaluations == {"chunks_cover_snapshot": True, "no_pii_values_in_chunks": False}
    assert not [e for e in run.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey("chroma_collection")]
    assert _live(settings, "shop") == keys["shop"].split("@")[1]
    # materializing chroma_collection alone does not write the rejected set either
    alone = definitions_job_for("chroma_collection").execute_in_process(
        instance=instance, partition_key=keys["shop"], raise_on_error=False)
    assert not alone.success and "personal data" in failure_text(alone)


def definitions_job_for(asset: str) -> dg.JobDefinition:
    from nl2sql_assets.defs.definitions import build_definitions

    job = dg.define_asset_job(f"only_{asset}", selection=[asset], executor_def=dg.in_process_executor)
    defs = build_definitions({"embeddings": HashEmbeddingsResource()})
    return dg.Definitions.merge(defs, dg.Definitions(jobs=[job])).resolve_job_def(f"only_{asset}")


def test_ui_launched_run_gets_its_tags(instance: dg.DagsterInstance) -> None:
    _, keys = _index_first_version(instance)
    result = execute(instance, keys["shop"])  # no tags, as from the UI's partition picker
    assert result.success
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags["datasource"] == "shop" and tags["schema_version"] == keys["shop"].split("@")[1]
    assert latest_metadata(instance, "schema_snapshot", keys["shop"])["registration"] == "unchanged"


def test_older_version_is_never_made_live_again(instance: dg.DagsterInstance, shop_home: Path,
                                                settings: Settings) -> None:
    first, keys = _index_first_version(instance)
    url = _shop_url(shop_home)
    run_sql(url, "ALTER TABLE products ADD COLUMN weight REAL;")
    second = tick(instance, first.cursor)
    assert all(r.success for r in run_requests(instance, second))
    new_version = second.run_requests[0].partition_key.split("@")[1]
    run_sql(url, "ALTER TABLE products DROP COLUMN weight;")  # the old structure is back
    result = execute(instance, keys["shop"])
    assert not result.success
    assert "not the latest registered version" in failure_text(result)
    assert _live(settings, "shop") == new_version


def test_malformed_partition_key_fails_naming_it(instance: dg.DagsterInstance) -> None:
    instance.add_dynamic_partitions(PARTITIONS_NAME, ["shop@latest"])
    result = execute(instance, "shop@latest")
    assert not result.success and "'shop@latest'" in failure_text(result)
