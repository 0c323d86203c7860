"""The code location loads and its shape is what the contract names (a snapshot test, DOP style)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.config import Settings
from nl2sql_assets.defs.definitions import RESOURCE_KEYS, build_definitions, default_resources

ROOT = Path(__file__).resolve().parents[2]
PACKAGED_DAGSTER_YAML = ROOT / "nl2sql_assets" / "app" / "dagster.yaml"

EXPECTED_GRAPH = {
    "schema_snapshot": {"deps": ["datasource/crm", "datasource/shop"], "group": "schema_index", "kinds": {"sql"}},
    "enriched_snapshot": {"deps": ["schema_snapshot"], "group": "schema_index", "kinds": {"python"}},
    "schema_chunks": {"deps": ["enriched_snapshot"], "group": "schema_index", "kinds": {"python"}},
    "chroma_collection": {"deps": ["schema_chunks"], "group": "schema_index", "kinds": {"chroma"}},
}
#: Assets with nothing to execute: the datasources of the shop_home fixture and the status table.
EXPECTED_EXTERNAL = {
    "datasource/shop": {"deps": [], "kinds": {"sqlite"}},
    "datasource/crm": {"deps": [], "kinds": {"sqlite"}},
    "index_status": {"deps": ["chroma_collection"], "kinds": {"python"}},
}
EXPECTED_CHECKS = {
    ("schema_chunks", "chunks_cover_snapshot"): True,
    ("schema_chunks", "no_pii_values_in_chunks"): True,
    ("chroma_collection", "vector_dimension_matches_provider"): False,
    ("chroma_collection", "tables_found_by_name"): False,
    ("chroma_collection", "chroma_matches_schema_store"): False,
    ("chroma_collection", "retrieval_quality"): False,
}


def test_definitions_validate(settings: Settings) -> None:
    dg.Definitions.validate_loadable(build_definitions())


def test_definitions_load_without_a_datasources_file(nl2sql_home: Path) -> None:
    graph = build_definitions().resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == set(EXPECTED_GRAPH) | {"index_status"}
    assert not list(graph.get(dg.AssetKey("schema_snapshot")).parent_keys)


def test_asset_graph_snapshot(settings: Settings) -> None:
    graph = build_definitions().resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == set(EXPECTED_GRAPH) | set(EXPECTED_EXTERNAL)
    for name, want in EXPECTED_EXTERNAL.items():
        node = graph.get(dg.AssetKey.from_user_string(name))
        assert not node.is_executable and node.partitions_def is None, name
        assert sorted(p.to_user_string() for p in node.parent_keys) == want["deps"], name
        assert set(node.kinds) == want["kinds"] and node.group_name == "schema_index", name
    assert graph.get(dg.AssetKey(["datasource", "crm"])).metadata["tenant"] == "other"
    assert graph.get(dg.AssetKey(["datasource", "shop"])).metadata["engine"] == "sqlite"
    for name, want in EXPECTED_GRAPH.items():
        node = graph.get(dg.AssetKey(name))
        assert sorted(p.to_user_string() for p in node.parent_keys) == want["deps"], name
        assert node.group_name == want["group"]
        assert set(node.kinds) == want["kinds"]
        assert {k: v for k, v in node.tags.items() if k.startswith("dagster/kind/")} == {
            f"dagster/kind/{kind}": "" for kind in want["kinds"]}
        assert isinstance(node.partitions_def, dg.DynamicPartitionsDefinition)
        assert node.partitions_def.name == "datasource_versions"
    assert graph.get(dg.AssetKey("chroma_collection")).pools == {"nl2sql_index"}
    # two steps: one computes the first three assets (any subset can still be materialized), the
    # pooled chroma_collection step writes Chroma
    shapes = {a.node_def.name: ({k.to_user_string() for k in a.keys}, a.can_subset)  # type: ignore[union-attr]
              for a in build_definitions().assets or [] if isinstance(a, dg.AssetsDefinition)}
    assert shapes == {"schema_index": ({"schema_snapshot", "enriched_snapshot", "schema_chunks"}, True),
                      "chroma_collection": ({"chroma_collection"}, False)}


def test_asset_checks_snapshot() -> None:
    defs = build_definitions()
    checks = {}
    for assets_def in [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)]:  # not the specs
        for spec in assets_def.check_specs:  # type: ignore[union-attr]
            checks[(spec.asset_key.to_user_string(), spec.name)] = spec.blocking
            assert spec.partitions_def is not None and spec.partitions_def.name == "datasource_versions"
    assert checks == EXPECTED_CHECKS
    graph = defs.resolve_asset_graph()
    assert {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys} == set(EXPECTED_CHECKS)


def test_job_sensor_and_resources_snapshot() -> None:
    defs = build_definitions()
    job = defs.resolve_job_def("index_job")
    assert job.executor_def.name == "in_process"
    assert job.tags.get("nl2sql/job") == "index"
    assert {n.name for n in job.graph.node_defs} == {"schema_index", "chroma_collection"}
    sensor = defs.resolve_sensor_def("schema_drift_sensor")
    assert sensor.job_name == "index_job"
    assert sensor.minimum_interval_seconds == 60
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert set(defs.resources or {}) == set(RESOURCE_KEYS) == {
        "datasources", "schema_store", "embeddings", "vector_store", "llm"}


def test_secrets_are_bound_as_env_vars_never_literals(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"OPENAI_API_KEY": "sk-not-in-the-ui", "SCHEMA_STORE_URL": "postgresql://u:pw@h/db"}
    resources = default_resources(env)
    assert isinstance(resources["embeddings"].openai_api_key, dg.EnvVar)
    assert isinstance(resources["llm"].openai_api_key, dg.EnvVar)
    assert isinstance(resources["schema_store"].url, dg.EnvVar)
    assert "sk-not-in-the-ui" not in repr(resources) and "pw@" not in repr(resources)
    assert default_resources({})["embeddings"].openai_api_key is None


def test_embedded_dagster_yaml_is_the_packaged_one_and_loads(tmp_path: Path) -> None:
    from nl2sql_assets.app.instance import PACKAGED_DAGSTER_YAML as copied_by_the_cli

    assert copied_by_the_cli.resolve() == PACKAGED_DAGSTER_YAML.resolve()  # one file
    # none at the repository root: `dagster dev` run there with DAGSTER_HOME set would warn that it is ignored
    assert not (ROOT / "dagster.yaml").exists() and not (ROOT / "dagster.yml").exists()
    shutil.copy(PACKAGED_DAGSTER_YAML, tmp_path / "dagster.yaml")
    old = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(tmp_path)
    try:
        with dg.DagsterInstance.get() as instance:
            config = instance.get_concurrency_config()
            assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
            assert config.run_queue_config.tag_concurrency_limits == [
                {"key": "datasource", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
            assert config.pool_config.default_pool_limit == 1
            assert config.pool_config.pool_granularity.value == "op"
            assert "Sqlite" in type(instance.run_storage).__name__
            assert (tmp_path / "history").is_dir()
    finally:
        if old is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = old


def test_postgres_yaml_names_the_driver_and_keeps_secrets_in_env() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "dagster.postgres.yaml").read_text(encoding="utf-8"))
    db = config["storage"]["postgres"]["postgres_db"]
    assert db["scheme"] == "postgresql+psycopg2"
    assert db["password"] == {"env": "DAGSTER_PG_PASSWORD"}
    assert config["concurrency"]["runs"]["tag_concurrency_limits"][0]["key"] == "datasource"


@pytest.mark.slow
def test_workspace_yaml_loads_with_the_dagster_cli(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "NL2SQL_HOME": str(tmp_path / "home")}
    shutil.copy(PACKAGED_DAGSTER_YAML, tmp_path / "dagster.yaml")
    dagster = Path(sys.executable).with_name("dagster")
    proc = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
