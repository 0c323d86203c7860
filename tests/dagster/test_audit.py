"""``audit``: lineage from the instance and consistency of Chroma against the schema store."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.app.audit import build_audit, format_audit
from nl2sql_assets.app.runner import IndexResources, run_index
from nl2sql_assets.errors import UnknownDatasourceError
from tests.dagster.conftest import HashEmbeddingsResource, run_sql


@pytest.fixture
def resources(settings: Settings) -> IndexResources:
    res = IndexResources(settings, embeddings=HashEmbeddingsResource())
    yield res
    res.close()


def test_indexed_datasources_are_consistent_with_their_lineage(
        instance: dg.DagsterInstance, settings: Settings, resources: IndexResources) -> None:
    results = {r.datasource_id: r for r in run_index(settings, instance=instance, resources=resources)}
    assert {r.status for r in results.values()} == {"new_version"}
    report = build_audit(settings, instance, resources=resources)
    assert report.consistent and report.embedding_model == "hash/bag-of-words/64"
    shop = next(d for d in report.datasources if d.datasource_id == "shop")
    assert shop.live_version == results["shop"].schema_version == shop.latest_version
    assert [r.asset for r in shop.lineage] == ["schema_snapshot", "enriched_snapshot", "schema_chunks",
                                               "chroma_collection"]
    assert {r.run_id for r in shop.lineage} == {results["shop"].run_id}
    assert shop.expected_chunks == shop.present_chunks == 17
    assert shop.chunk_counts == {"datasource": 1, "table": 3, "column": 12, "relationship": 1, "metric": 0}
    text = format_audit(report)
    assert f"lineage of shop@{shop.live_version}" in text and text.rstrip().endswith("audit: consistent")
    data = report.to_json_dict()
    assert data["consistent"] is True and {d["datasource_id"] for d in data["datasources"]} == {"shop", "crm"}


def test_vector_store_missing_the_live_version_is_inconsistent(
        instance: dg.DagsterInstance, settings: Settings, resources: IndexResources) -> None:
    run_index(settings, instance=instance, resources=resources)
    vectors = resources.vector_store.get_store(resources.embeddings.get_service())
    live = vectors.live_version("crm")
    assert vectors.delete_versions("crm", [live]) > 0
    report = build_audit(settings, instance, resources=resources)
    assert not report.consistent
    crm = next(d for d in report.datasources if d.datasource_id == "crm")
    assert crm.problems == [f"schema store has version {live} but nothing is live in the vector store"]
    assert next(d for d in report.datasources if d.datasource_id == "shop").consistent
    assert "INCONSISTENT" in format_audit(report)
    # `index` repairs it: the registered version is run again and made live
    results = {r.datasource_id: r for r in run_index(settings, instance=instance, resources=resources)}
    assert results["crm"].status == "repair" and results["shop"].status == "unchanged"
    assert build_audit(settings, instance, resources=resources).consistent


def test_audit_of_an_unknown_datasource_names_the_known_ones(
        instance: dg.DagsterInstance, settings: Settings, resources: IndexResources) -> None:
    with pytest.raises(UnknownDatasourceError, match="unknown datasource 'nope'.*crm, shop"):
        build_audit(settings, instance, ["nope"], resources=resources)


def test_never_indexed_datasource_is_a_warning_not_a_disagreement(
        instance: dg.DagsterInstance, settings: Settings, resources: IndexResources) -> None:
    report = build_audit(settings, instance, resources=resources)
    assert report.consistent
    assert all("never indexed" in d.warnings[0] for d in report.datasources)


def test_audit_checks_every_retained_version_and_finds_orphaned_records(
        instance: dg.DagsterInstance, settings: Settings, resources: IndexResources, shop_home: Path) -> None:
    """Two retained versions sharing records: consistent; a record of the older version gone,
    and a record no retained version uses, are both reported."""
    first = {r.datasource_id: r for r in run_index(settings, instance=instance, resources=resources)}
    run_sql(f"sqlite:///{shop_home / 'data' / 'shop.db'}", "ALTER TABLE products ADD COLUMN weight REAL")
    second = {r.datasource_id: r for r in run_index(settings, instance=instance, resources=resources)}
    v1, v2 = first["shop"].schema_version, second["shop"].schema_version
    assert v1 != v2 and build_audit(settings, instance, resources=resources).consistent
    vectors = resources.vector_store.get_store(resources.embeddings.get_service())
    state = vectors.index_state("shop")
    assert state is not None and set(state.versions) == {v1, v2}  # type: ignore[attr-defined]
    coll = vectors._conn.any_collection()  # type: ignore[attr-defined]
    shop_records = coll.get(where={"datasource_id": "shop"}, include=[])["ids"]
    assert len(shop_records) < 2 * len(vectors.list_ids("shop", v2))  # the versions share records
    v1_only = coll.get(where={"$and": [{"datasource_id": "shop"}, {"valid_to": {"$lte": state.versions[v2]}}]},
                       include=["metadatas", "embeddings"])
    assert len(v1_only["ids"]) == 1  # products' old table chunk: only v1 uses it
    coll.delete(ids=v1_only["ids"])
    orphan_meta = {**v1_only["metadatas"][0], "valid_from": 0, "valid_to": 1}  # a range no version uses
    coll.upsert(ids=["shop:*:table:ghost@000000000000000000000000"], embeddings=v1_only["embeddings"],
                metadatas=[orphan_meta], documents=["Table ghost."])
    report = build_audit(settings, instance, resources=resources)
    shop = next(d for d in report.datasources if d.datasource_id == "shop")
    assert not report.consistent
    assert shop.problems == [
        f"version {v1}: 1 chunk(s) missing from the vector store, e.g. shop:{v1}:table:products",
        "1 orphaned record(s) in the vector store that no retained version uses, e.g. "
        "shop:*:table:ghost@000000000000000000000000"]
    assert next(d for d in report.datasources if d.datasource_id == "crm").consistent
