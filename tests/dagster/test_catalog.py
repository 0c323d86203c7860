"""Owners, group, code versions and kinds: configured by the environment, recorded on every run."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.config import DEFAULT_ASSET_GROUP, Settings
from nl2sql_assets.defs import catalog
from nl2sql_assets.defs.definitions import build_definitions
from nl2sql_assets.errors import ConfigError
from nl2sql_assets.pipeline.names import ASSET_GROUP, ASSET_NAMES
from tests.dagster.helpers import run_requests, tick

PACKAGE_DIR = Path(catalog.__file__).resolve().parents[1]


def _nodes(defs: dg.Definitions) -> dict[str, object]:
    graph = defs.resolve_asset_graph()
    return {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}


def test_owners_and_group_apply_to_every_asset_and_the_job_still_runs(
        instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NL2SQL_ASSET_OWNERS", "data@example.com, team:platform")
    monkeypatch.setenv("NL2SQL_ASSET_GROUP", "nl2sql")
    nodes = _nodes(build_definitions())
    assert set(nodes) == {*ASSET_NAMES, "index_status", "datasource/shop", "datasource/crm"}
    for name, node in nodes.items():
        assert node.group_name == "nl2sql", name  # type: ignore[attr-defined]
        assert list(node.owners) == ["data@example.com", "team:platform"], name  # type: ignore[attr-defined]
    # the job selects the four assets, not the group: a renamed group still indexes
    runs = run_requests(instance, tick(instance))  # type: ignore[arg-type]
    assert runs and all(r.success for r in runs)
    assert {e.asset_key.to_user_string() for r in runs for e in r.get_asset_materialization_events()} \
        >= {*ASSET_NAMES, "index_status"}


def test_defaults_are_the_contract_names(settings: Settings) -> None:
    assert settings.asset_group == DEFAULT_ASSET_GROUP == ASSET_GROUP and settings.asset_owners == ()
    assert all(not list(n.owners) for n in _nodes(build_definitions()).values())  # type: ignore[attr-defined]


@pytest.mark.parametrize(("variable", "value"), [("NL2SQL_ASSET_OWNERS", "alice"),
                                                 ("NL2SQL_ASSET_OWNERS", "data@example.com,team:"),
                                                 ("NL2SQL_ASSET_GROUP", "schema-index")])
def test_an_invalid_owner_or_group_names_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


def test_enriched_snapshot_is_an_openai_asset_only_when_enrichment_is_on(settings: Settings) -> None:
    off = _nodes(build_definitions(settings=settings))["enriched_snapshot"]
    on = _nodes(build_definitions(settings=settings.model_copy(update={"enrichment": "openai"})))["enriched_snapshot"]
    assert set(off.kinds) == {"python"} and set(on.kinds) == {"openai"}  # type: ignore[attr-defined]
    assert {k for k in on.tags if k.startswith("dagster/kind/")} == {"dagster/kind/openai"}  # type: ignore[attr-defined]


def test_code_version_is_the_package_version_and_a_hash_of_the_code_behind_each_asset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    versions = {name: catalog.code_version(name) for name in ASSET_NAMES}
    assert all(v.startswith(f"{catalog.package_version()}+") for v in versions.values())
    assert len(set(versions.values())) == 4
    nodes = _nodes(build_definitions())
    assert {n: nodes[n].code_version for n in ASSET_NAMES} == versions  # type: ignore[attr-defined]

    # editing the chunk builder changes the versions of the assets it shapes, and only those
    copy = tmp_path / "nl2sql_assets"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(catalog, "_PACKAGE_DIR", copy)
    catalog.code_version.cache_clear()
    try:
        assert {n: catalog.code_version(n) for n in ASSET_NAMES} == versions
        with (copy / "indexing" / "chunk_builder.py").open("a", encoding="utf-8") as f:
            f.write("\n# a change to the chunk texts\n")
        catalog.code_version.cache_clear()
        changed = {n for n in ASSET_NAMES if catalog.code_version(n) != versions[n]}
    finally:
        catalog.code_version.cache_clear()
    assert changed == {"schema_chunks", "chroma_collection"}


def test_each_materialization_records_its_code_version(instance: dg.DagsterInstance) -> None:
    result = tick(instance)
    (run, *_) = run_requests(instance, result)  # type: ignore[arg-type]
    recorded = {e.asset_key.to_user_string(): e.event_specific_data.materialization.tags  # type: ignore[union-attr]
                for e in run.get_asset_materialization_events()}
    assert {n: recorded[n]["dagster/code_version"] for n in ASSET_NAMES} == {  # type: ignore[index]
        n: catalog.code_version(n) for n in ASSET_NAMES}
    # the datasources are upstream inputs of schema_snapshot (lineage), without data versions that
    # would mark every partition stale on each observation
    assert recorded["schema_snapshot"]["dagster/input_data_version/datasource/shop"] == "INITIAL"  # type: ignore[index]
