"""The dbt overlay on its own: artifact errors, matching, precedence, PII, hashes and the diff.

Error cases use broken files on purpose; the behaviour on a manifest dbt really wrote is in
tests/integration/test_dbt.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nl2sql_assets.config import load_datasources
from nl2sql_assets.dbt.apply import apply_project
from nl2sql_assets.dbt.artifacts import load_artifacts
from nl2sql_assets.dbt.config import DbtConfig
from nl2sql_assets.dbt.extract import DbtProject, DbtRelation, DbtRelationship, DbtValues
from nl2sql_assets.errors import ConfigError, DatasourceError
from nl2sql_assets.schema.diff import diff_snapshots
from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, SchemaSnapshot, Table

T0 = datetime(2026, 1, 1, tzinfo=UTC)
INFO = DatasourceInfo(id="shop", dialect="duckdb", domains=["sales"])


def _tables() -> list[Table]:
    return [
        Table(schema_name="main", name="CUSTOMERS", comment="From the DB", columns=[
            Column(name="ID", ordinal=1), Column(name="EMAIL", ordinal=2, pii=True, pii_kind="email"),
            Column(name="TIER", ordinal=3, description="From annotations")]),
        Table(schema_name="main", name="ORDERS", columns=[
            Column(name="ID", ordinal=1), Column(name="CUST", ordinal=2),
            Column(name="STATUS", ordinal=3, stats=ColumnStats(top_values=["paid"], note="sampled"))]),
    ]


def _project(**changes: object) -> DbtProject:
    base: dict[str, object] = {
        "relations": [
            DbtRelation(unique_id="model.p.customers", kind="model", database="shop", schema_name="main",
                        identifier="customers", description="People who buy",
                        columns={"tier": "Loyalty tier", "id": "Customer key"}, domains=["crm"]),
            DbtRelation(unique_id="model.p.orders", kind="model", database="shop", schema_name="main",
                        identifier="orders", description=None, columns={"nope": "x"}),
            DbtRelation(unique_id="model.p.gone", kind="model", database="shop", schema_name="main",
                        identifier="gone"),
        ],
        "relationships": [DbtRelationship(test="rel", child="model.p.orders", column="cust",
                                          parent="model.p.customers", field="id")],
        "values": [DbtValues(relation="model.p.orders", column="status", values=["paid", "open"]),
                   DbtValues(relation="model.p.customers", column="email", values=["a@b.example"])],
    }
    base.update(changes)
    return DbtProject.model_validate(base)


def _snapshot(project: DbtProject) -> SchemaSnapshot:
    info, tables, warnings = apply_project(project, INFO, _tables(), "shop")
    return SchemaSnapshot.create(info, tables, T0, warnings).with_version("20260101000000_00000000")


def test_names_match_ignoring_case_and_dbt_fills_only_what_annotations_left_blank() -> None:
    snap = _snapshot(_project())
    customers, orders = snap.table("CUSTOMERS"), snap.table("ORDERS")
    assert customers.description == "People who buy" and customers.comment == "From the DB"
    assert customers.column("ID").description == "Customer key"
    assert customers.column("TIER").description == "From annotations"
    assert snap.datasource.domains == ["sales", "crm"]
    assert "dbt model 'model.p.gone' (shop.main.gone) matches no table" in snap.warnings
    assert "dbt column 'nope' of model.p.orders matches no column of main.ORDERS" in snap.warnings


def test_relationships_become_dbt_joins_outside_the_fingerprint() -> None:
    with_join, without = _snapshot(_project()), _snapshot(_project(relationships=[]))
    [fk] = with_join.table("ORDERS").foreign_keys
    assert (fk.columns, fk.ref_table, fk.ref_columns, fk.source) == (["CUST"], "CUSTOMERS", ["ID"], "dbt")
    assert with_join.fingerprint == without.fingerprint
    assert with_join.metadata_hash != without.metadata_hash
    diff = diff_snapshots(with_join, without)
    assert diff.is_empty and diff.metadata_changed
    assert [m.field for m in diff.metadata_changes] == ["dbt join removed (`CUST`) → `main.CUSTOMERS`(`ID`)"]


def test_a_dbt_join_replaces_the_same_inferred_join_and_never_duplicates_a_declared_one() -> None:
    from nl2sql_assets.schema.models import ForeignKey

    def orders_with(source: str) -> list[Table]:
        fk = ForeignKey(columns=["CUST"], ref_schema="main", ref_table="CUSTOMERS", ref_columns=["ID"], source=source)
        tables = _tables()
        return [tables[0], tables[1].model_copy(update={"foreign_keys": [fk]})]

    _, inferred, _ = apply_project(_project(), INFO, orders_with("inferred"), "shop")
    assert [f.source for f in inferred[1].foreign_keys] == ["dbt"]
    _, declared, _ = apply_project(_project(), INFO, orders_with("foreign_key"), "shop")
    assert [f.source for f in declared[1].foreign_keys] == ["foreign_key"]


def test_accepted_values_are_known_values_never_for_pii_and_hashed_without_statistics() -> None:
    snap = _snapshot(_project())
    status = snap.table("ORDERS").column("STATUS")
    assert status.stats.top_values == ["paid", "open"] and status.stats.note.endswith("; sampled")
    email = snap.table("CUSTOMERS").column("EMAIL")
    assert email.stats.top_values == [] and "a@b.example" not in snap.model_dump_json()
    changed = _snapshot(_project(values=[DbtValues(relation="model.p.orders", column="status", values=["paid"]),
                                         DbtValues(relation="model.p.customers", column="email", values=["a@b.example"])]))
    assert changed.metadata_hash != snap.metadata_hash and changed.fingerprint == snap.fingerprint
    assert [m.field for m in diff_snapshots(snap, changed).metadata_changes] == ["accepted values (dbt)"]
    # the structure-only read (no statistics) hashes the same as the full snapshot
    bare = [t.model_copy(update={"columns": [c.model_copy(update={"stats": None}) for c in t.columns]})
            for t in _tables()]
    info, tables, _ = apply_project(_project(), INFO, bare, "shop")
    assert SchemaSnapshot.create(info, tables, T0).metadata_hash == snap.metadata_hash


def test_another_database_does_not_match() -> None:
    info, tables, warnings = apply_project(_project(), INFO, _tables(), "other")
    assert tables == _tables() and len(warnings) == 4  # three relations, and the join without them


def test_without_dbt_the_metadata_hash_is_unchanged() -> None:
    snap = SchemaSnapshot.create(INFO, _tables(), T0)
    info, tables, _ = apply_project(DbtProject(), INFO, _tables(), "shop")
    assert SchemaSnapshot.create(info, tables, T0).metadata_hash == snap.metadata_hash


@pytest.mark.parametrize(("content", "message"), [
    (None, "file not found"),
    ("{not json", "not valid JSON at line 1, column 2"),
    ('{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/catalog/v1.json"}}',
     "not a dbt manifest (its metadata.dbt_schema_version is https://schemas.getdbt.com/dbt/catalog/v1.json)"),
    ('{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}, "nodes": []}',
     "malformed at 'nodes': Input should be a valid dictionary"),
])
def test_an_unusable_manifest_is_an_error_naming_the_file(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "manifest.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasourceError) as info:
        load_artifacts(DbtConfig(manifest=path), "shop")
    assert str(info.value) == f"datasource 'shop': dbt manifest {path}: {message}" or message in str(info.value)
    assert str(path) in str(info.value) and message in str(info.value)


def test_the_datasources_file_resolves_dbt_paths_from_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "ds.yaml"
    path.write_text("datasources:\n  - id: s\n    url: duckdb:///x.duckdb\n    dbt:\n"
                    "      manifest: ../dbt/target/manifest.json\n      catalog: /abs/catalog.json\n")
    config = load_datasources(path)[0]
    assert config.dbt == DbtConfig(manifest=folder / "../dbt/target/manifest.json", catalog=Path("/abs/catalog.json"))
    path.write_text("datasources:\n  - id: s\n    url: duckdb:///x.duckdb\n    dbt: {manifest: m.json, catalogue: c.json}\n")
    with pytest.raises(ConfigError, match=r"field 'dbt.catalogue': unknown field \(allowed: manifest, catalog\)"):
        load_datasources(path)


def test_a_manifest_is_parsed_once_while_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"},
                                "nodes": {}}))
    first = load_artifacts(DbtConfig(manifest=path), "s").manifest
    assert load_artifacts(DbtConfig(manifest=path), "s").manifest is first


def test_the_demo_manifest_dbt_parse_wrote_reads_tests_on_sources_and_metrics() -> None:
    """The shipped demo manifest (written by ``dbt parse``): a test on a source has no attached node."""
    from nl2sql_assets.dbt.extract import read_project
    from nl2sql_assets.demo.dataset import DATA_DIR

    manifest = DATA_DIR / "commerce_dbt" / "target" / "manifest.json"
    project = read_project(load_artifacts(DbtConfig(manifest=manifest), "commerce"))
    [join] = project.relationships
    assert (join.child, join.column, join.parent, join.field) == (
        "source.commerce.shop.returns", "order_id", "source.commerce.shop.orders", "order_id")
    assert {(v.relation.rsplit(".", 1)[1], v.column) for v in project.values} == {
        ("orders", "status"), ("payments", "method"), ("shipments", "carrier"), ("returns", "reason")}
    assert [m.name for m in project.metrics] == ["booked_revenue"]
    assert {m.name for m in project.measures} == {"monthly_order_count", "monthly_revenue_total"}
    relations = {r.identifier: r for r in project.relations}
    assert relations["returns"].domains == ["after_sales"] and relations["orders"].database == "commerce"
