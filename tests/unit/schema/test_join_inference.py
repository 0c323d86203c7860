"""Join inference from names, types and keys (pure: no database)."""

from __future__ import annotations

from nl2sql_assets.adapters.join_values import containment_factor
from nl2sql_assets.adapters.types import type_family
from nl2sql_assets.schema.fingerprint import compute_fingerprint
from nl2sql_assets.schema.join_inference import candidate_joins, infer_joins, with_inferred_keys
from nl2sql_assets.schema.models import Column, ForeignKey, Table, UniqueConstraint
from tests.fixtures.warehouse import GOLD_JOINS, table_columns

_TYPES = {"INT": "INTEGER", "TEXT": "VARCHAR", "NUM": "DECIMAL(12,2)", "DATE": "DATE", "TS": "TIMESTAMP"}


def table(name: str, *columns: str, pk: list[str] | None = None, fks: list[ForeignKey] | None = None,
          uniques: list[list[str]] | None = None) -> Table:
    """``columns`` as ``name:TYPE`` (default INTEGER)."""
    cols = []
    for i, spec in enumerate(columns, start=1):
        col, _, declared = spec.partition(":")
        declared = declared or "INTEGER"
        cols.append(Column(name=col, ordinal=i, declared_type=declared, type_family=type_family(declared)))
    return Table(name=name, columns=cols, primary_key=pk or [], foreign_keys=fks or [],
                 unique_constraints=[UniqueConstraint(columns=u) for u in uniques or []])


def warehouse_tables() -> list[Table]:
    return [table(name, *(f"{c}:{_TYPES[k]}" for c, k in cols)) for name, cols in table_columns().items()]


def joins_of(tables: list[Table], evidence: dict | None = None) -> set[tuple[str, str, str, str]]:
    return {(j.child, j.child_column, j.parent, j.parent_column) for j in infer_joins(tables, evidence)}


def test_warehouse_joins_are_found_from_names_alone_with_high_precision_and_recall() -> None:
    tables = warehouse_tables()
    assert len(tables) >= 100 and not any(t.primary_key or t.foreign_keys for t in tables)
    found = joins_of(tables)
    precision = len(found & GOLD_JOINS) / len(found)
    recall = len(found & GOLD_JOINS) / len(GOLD_JOINS)
    assert precision >= 0.98, sorted(found - GOLD_JOINS)
    assert recall >= 0.95, sorted(GOLD_JOINS - found)
    # a key shared by many facts points at its one dimension, never from fact to fact
    building = {j for j in found if j[1] == "BUILDING_KEY"}
    assert len(building) >= 10 and {j[2] for j in building} == {"DIM_BUILDING"}
    # an abbreviated key (DEPT_KEY of DIM_DEPARTMENT) and a role-playing date key
    assert ("FACT_PAYROLL", "DEPT_KEY", "DIM_DEPARTMENT", "DEPT_KEY") in found
    assert ("FACT_SHIPMENT", "SHIP_DATE_KEY", "DIM_DATE", "DATE_KEY") in found


def test_same_named_generic_columns_never_join() -> None:
    tables = warehouse_tables() + [
        table("customers", "id", "name:TEXT", "description:TEXT", "created_at:TIMESTAMP", "status:TEXT"),
        table("orders", "id", "name:TEXT", "description:TEXT", "created_at:TIMESTAMP", "status:TEXT"),
    ]
    generic = {"DESCRIPTION", "CREATED_AT", "UPDATED_AT", "SOURCE_SYSTEM_ID", "ETL_BATCH_ID",
               "id", "name", "description", "created_at", "status"}
    assert not [c for c in candidate_joins(tables) if c.child_column in generic]


def test_conventional_id_columns_join_plural_and_singular_tables() -> None:
    tables = [
        table("customers", "id", "name:TEXT"),
        table("company", "id", "name:TEXT"),
        table("orders", "id", "customer_id", "CompanyID", "total:DECIMAL(10,2)"),
    ]
    assert joins_of(tables) == {("orders", "customer_id", "customers", "id"),
                                ("orders", "CompanyID", "company", "id")}


def test_irregular_plural_tables_are_joined_by_their_singular() -> None:
    """The plural stemmer retrieval uses: movies is movie (not movy), statuses is status, and
    matches is match."""
    tables = [
        table("movies", "id", "title:TEXT"),
        table("statuses", "id", "label:TEXT"),
        table("matches", "id", "played_on:DATE"),
        table("tickets", "id", "movie_id", "status_id", "match_id", "price:DECIMAL(10,2)"),
    ]
    assert joins_of(tables) == {("tickets", "movie_id", "movies", "id"),
                                ("tickets", "status_id", "statuses", "id"),
                                ("tickets", "match_id", "matches", "id")}


def test_a_declared_primary_key_is_the_key_and_declared_foreign_keys_are_left_alone() -> None:
    declared = ForeignKey(columns=["region_key"], ref_table="regions", ref_columns=["region_no"])
    tables = [
        table("regions", "region_no", "region_key", pk=["region_no"]),
        table("stores", "store_key", "region_key", "zone_code:TEXT", fks=[declared]),
        table("zones", "zone_code:TEXT", "zone_name:TEXT", uniques=[["zone_code"]]),
    ]
    # regions declares region_no as its key: region_key is not guessed as one; stores.region_key
    # is declared; zone_code matches a unique key by exact name
    assert joins_of(tables) == {("stores", "zone_code", "zones", "zone_code")}


def test_incompatible_types_do_not_join() -> None:
    tables = [table("DIM_PLANT", "PLANT_KEY:VARCHAR", "PLANT_NAME:VARCHAR"),
              table("FACT_OUTPUT", "PLANT_KEY:DATE", "UNITS")]
    assert joins_of(tables) == set()
    tables[1] = table("FACT_OUTPUT", "PLANT_KEY:TEXT", "UNITS")
    assert joins_of(tables) == {("FACT_OUTPUT", "PLANT_KEY", "DIM_PLANT", "PLANT_KEY")}


def test_two_equally_good_parents_are_ambiguous_and_dropped() -> None:
    tables = [table("DIM_SITE", "SITE_KEY", "SITE_NAME:TEXT"), table("SITES", "SITE_KEY", "LABEL:TEXT"),
              table("FACT_VISIT", "SITE_KEY", "VISITS")]
    assert joins_of(tables) == set()


def test_value_evidence_rejects_confirms_and_lifts_weak_name_matches() -> None:
    tables = [table("DIM_EMPLOYEE", "EMP_KEY", "MANAGER_EMP_KEY", "FIRST_NAME:TEXT"),
              table("FACT_TRIP", "DATE_KEY", "EMP_KEY", "KM")]
    base = joins_of(tables)
    assert base == {("FACT_TRIP", "EMP_KEY", "DIM_EMPLOYEE", "EMP_KEY")}  # manager key: too weak on names
    keys = {(c.child, c.child_column.lower(), c.parent, c.parent_column.lower()): c for c in candidate_joins(tables)}
    manager = ("DIM_EMPLOYEE", "manager_emp_key", "DIM_EMPLOYEE", "emp_key")
    trip = ("FACT_TRIP", "emp_key", "DIM_EMPLOYEE", "emp_key")
    assert manager in keys
    assert ("DIM_EMPLOYEE", "MANAGER_EMP_KEY", "DIM_EMPLOYEE", "EMP_KEY") in joins_of(tables, {manager: 1.25})
    assert joins_of(tables, {trip: 0.0}) == set()


def test_containment_factor() -> None:
    parent = [str(i) for i in range(1, 25)]
    assert containment_factor(["1", "5", "24"], parent, parent_complete=True, parent_declared=False) > 1
    assert containment_factor(["100", "200"], parent, parent_complete=True, parent_declared=False) == 0
    # a partial parent sample cannot reject, only confirm
    assert containment_factor(["100", "200"], parent, parent_complete=False, parent_declared=False) == 1
    # duplicates in a guessed key: no key; in a declared one the database vouches for it
    assert containment_factor(["1"], ["1", "1"], parent_complete=True, parent_declared=False) == 0
    assert containment_factor(["1"], ["1", "1"], parent_complete=True, parent_declared=True) > 1


def test_inferred_keys_are_marked_and_leave_the_fingerprint_alone() -> None:
    tables = warehouse_tables()
    joined = with_inferred_keys(tables, infer_joins(tables))
    fks = [fk for t in joined for fk in t.foreign_keys]
    assert len(fks) >= 200 and all(fk.source == "inferred" and fk.name.startswith("inferred") for fk in fks)
    assert compute_fingerprint(joined) == compute_fingerprint(tables)


def test_bridges_avoid_a_fan_trap_through_a_shared_dimension_when_as_short() -> None:
    from datetime import UTC, datetime

    from nl2sql_assets.retrieval.join_paths import JoinGraph
    from nl2sql_assets.schema.models import DatasourceInfo, SchemaSnapshot

    # FACT_MAIN reaches COUNTRY in three hops two ways: up its own keys (Z_BUILDING, Z_CITY), or
    # up to the date dimension every fact shares, down to another fact and up again (a fan
    # trap); names put the trap first in table order, so only the path rule can avoid it
    tables = [table("A_DATE", "A_DATE_KEY"), table("COUNTRY", "COUNTRY_KEY"),
              table("B_FACT", "A_DATE_KEY", "COUNTRY_KEY", "AMOUNT"),
              table("Z_CITY", "Z_CITY_KEY", "COUNTRY_KEY"), table("Z_BUILDING", "Z_BUILDING_KEY", "Z_CITY_KEY"),
              table("FACT_MAIN", "A_DATE_KEY", "Z_BUILDING_KEY", "KWH")]
    snapshot = SchemaSnapshot.create(DatasourceInfo(id="w", dialect="sqlite"),
                                     with_inferred_keys(tables, infer_joins(tables)), datetime(2026, 1, 1, tzinfo=UTC))
    graph = JoinGraph(snapshot)
    assert len(graph.edges) == 6
    ix = {n: i for i, n in enumerate(graph.names)}
    path = {graph.names[i] for i in graph.connect([ix["FACT_MAIN"], ix["COUNTRY"]])}
    assert path == {"FACT_MAIN", "Z_BUILDING", "Z_CITY", "COUNTRY"}
