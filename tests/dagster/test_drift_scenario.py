"""The full drift scenario with real parts: SQLite databases, the ONNX model, embedded Chroma,
a SQLite Dagster instance, the ``nl2sql-assets`` commands and the sensor.

index -> add a column -> tick -> run -> new version live, old one evicted (retention 1) ->
audit shows the chain and passes -> a documentation-only change refreshes the chunk texts
under the same version -> an unreachable datasource never blocks the others -> the audit
fails once the schema store and the vector store disagree.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.cli import main
from nl2sql_assets.config import Settings, load_datasources
from nl2sql_assets.defs.definitions import build_definitions
from nl2sql_assets.indexing.embeddings import build_embedding_service
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.schema.store import build_schema_store
from tests.dagster.conftest import run_sql, write_datasources
from tests.dagster.helpers import apply_sensor_result, failure_text, latest_metadata, tick

PASSWORD = "pw-Zq81-never-shown"

pytestmark = pytest.mark.slow


def _audit(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = main(["audit", "--json"])
    return code, json.loads(capsys.readouterr().out)


def _by_id(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {d["datasource_id"]: d for d in report["datasources"]}  # type: ignore[index,union-attr]


def test_drift_scenario_end_to_end(shop_home: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NL2SQL_KEEP_VERSIONS", "1")
    monkeypatch.setenv("DOWN_PW", PASSWORD)
    dagster_home = shop_home / "dagster"
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    entries = yaml.safe_load((shop_home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]
    entries.append({"id": "down", "url": "postgresql+psycopg2://reader:${DOWN_PW}@127.0.0.1:1/warehouse"})
    write_datasources(shop_home / "datasources.yaml", entries)
    shop_url = str(entries[0]["url"])

    # 1. index: two new versions, one failure named, non-zero exit, no password anywhere
    code = main(["index"])
    out, err = capsys.readouterr()
    assert code == 1
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["shop", "crm", "down"]
    assert lines[0].startswith("shop: new version ") and lines[1].startswith("crm: new version ")
    assert lines[2].startswith("down: failed: ")
    assert "failed: down" in err
    assert PASSWORD not in out + err
    settings = Settings.from_env()
    store = build_schema_store(settings)
    (v1,) = [v.schema_version for v in store.list_versions("shop")]

    # 2. a new column; the sensor sees it (and only it), its run makes the new version live
    run_sql(shop_url, "ALTER TABLE customers ADD COLUMN loyalty_tier TEXT;")
    with dg.DagsterInstance.get() as instance:
        result = tick(instance)
        assert isinstance(result, dg.SensorResult)
        (request,) = result.run_requests
        assert request.tags["datasource"] == "shop" and request.tags["nl2sql/request"] == "new_version"
        apply_sensor_result(instance, result)
        job = build_definitions().resolve_job_def("index_job")  # real resources: ONNX model, Chroma
        run = job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                     tags=request.tags, raise_on_error=False)
        assert run.success, failure_text(run)
        v2 = request.partition_key.split("@")[1]
        assert v2 != v1
        chroma = latest_metadata(instance, "chroma_collection", request.partition_key)
        assert chroma["evicted_versions"] == [v1] and chroma["keep_versions"] == 1
        assert chroma["embedding_model"] == "all-MiniLM-L6-v2-int8" and chroma["embedding_dimension"] == 384
        # unchanged chunks came from the embedding cache, only the changed ones were embedded
        assert 0 < chroma["chunks_embedded"] < chroma["chunks_total"]
        assert "loyalty_tier" in str(latest_metadata(instance, "schema_snapshot", request.partition_key)["diff"])
        # the old partition and its records stay for audits
        assert f"shop@{v1}" in instance.get_dynamic_partitions("datasource_versions")
        assert latest_metadata(instance, "chroma_collection", f"shop@{v1}")["live_version"] == v1
        cursor = result.cursor

    vectors = build_vector_store(settings, build_embedding_service(settings))
    assert vectors.live_version("shop") == v2
    assert vectors.list_ids("shop", v1) == set()
    assert [v.schema_version for v in store.list_versions("shop")] == [v2]

    # 3. audit: the chain, consistent
    code, report = _audit(capsys)
    assert code == 0, report
    shop = _by_id(report)["shop"]
    assert shop["live_version"] == v2 and shop["consistent"] is True
    versions = {v["schema_version"]: v for v in shop["versions"]}  # type: ignore[union-attr]
    assert versions[v1]["partition"] and not versions[v1]["in_schema_store"] and not versions[v1]["in_vector_store"]
    assert versions[v2]["live"] and versions[v2]["index_run_id"] == run.run_id
    assert [(r["asset"], r["run_id"]) for r in shop["lineage"]] == [  # type: ignore[union-attr]
        (a, run.run_id) for a in ("schema_snapshot", "enriched_snapshot", "schema_chunks", "chroma_collection")]
    assert shop["chunk_counts"]["table"] == 3 and shop["embedding_model"] == "local/all-MiniLM-L6-v2-int8/384"
    assert _by_id(report)["down"]["warnings"]
    main(["audit"])
    text = capsys.readouterr().out
    assert f"lineage of shop@{v2}" in text and "audit: consistent" in text

    # 4. documentation only: same version, refreshed chunk texts
    entries[0]["annotations"] = {"tables": {"orders": "Every order placed in the web shop, one row each"}}
    write_datasources(shop_home / "datasources.yaml", entries)
    with dg.DagsterInstance.get() as instance:
        result = tick(instance, cursor)
        (request,) = result.run_requests
        assert request.partition_key == f"shop@{v2}" and ":meta:" in request.run_key
        apply_sensor_result(instance, result)
        run = build_definitions().resolve_job_def("index_job").execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False)
        assert run.success, failure_text(run)
        meta = latest_metadata(instance, "schema_snapshot", request.partition_key)
        assert meta["registration"] == "metadata_updated"
        chroma = latest_metadata(instance, "chroma_collection", request.partition_key)
        assert chroma["chunks_upserted"] >= 1 and chroma["chunks_embedded"] >= 1
    vectors = build_vector_store(settings, build_embedding_service(settings))
    assert vectors.live_version("shop") == v2
    orders = [c for c in vectors.get_chunks("shop", v2) if c.chunk_type == "schema.table"
              and c.metadata.get("table") == "orders"]
    assert "Every order placed in the web shop" in orders[0].document
    code, report = _audit(capsys)
    assert code == 0 and _by_id(report)["shop"]["consistent"] is True

    # 5. the schema store moves on without the vector store: the audit fails and says why
    from nl2sql_assets.pipeline.steps import read_snapshot

    run_sql(shop_url, "ALTER TABLE products ADD COLUMN weight REAL;")
    config = next(c for c in load_datasources(settings.datasources_path) if c.id == "shop")
    store.register_snapshot(read_snapshot(config, now=datetime.now(UTC)))
    code, report = _audit(capsys)
    assert code == 1
    problems = _by_id(report)["shop"]["problems"]
    assert any("schema store's latest" in p for p in problems)  # type: ignore[union-attr]
    # and `index` repairs it: the registered version is re-run and made live
    code = main(["index", "--datasource", "shop"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("shop: re-indexed "), out
    code, _ = _audit(capsys)
    assert code == 0


def test_index_names_unknown_datasource(shop_home: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(shop_home / "dagster"))
    code = main(["index", "--datasource", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown datasource 'nope'" in err and "shop" in err
