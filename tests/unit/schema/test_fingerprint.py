"""Fingerprint, metadata hash, schema versions and the snapshot's JSON round-trip."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from nl2sql_assets.schema.fingerprint import (
    canonical_json,
    compute_fingerprint,
    compute_metadata_hash,
    make_schema_version,
    parse_schema_version,
)
from nl2sql_assets.schema.models import Column, ColumnStats, ForeignKey, SchemaSnapshot, Table, UniqueConstraint
from tests.unit.schema.builders import T0, customers, datasource, orders, rich_tables, snapshot, view


def _replace_table(tables: list[Table], table: str, **update: object) -> list[Table]:
    return [t.model_copy(update=update) if t.name == table else t for t in tables]


def _replace_column(tables: list[Table], table: str, column: str, **update: object) -> list[Table]:
    out = []
    for t in tables:
        if t.name == table:
            t = t.model_copy(update={"columns": [c.model_copy(update=update) if c.name == column else c
                                                 for c in t.columns]})
        out.append(t)
    return out


STRUCTURAL: dict[str, Callable[[list[Table]], list[Table]]] = {
    "table added": lambda ts: ts + [Table(name="refunds")],
    "table removed": lambda ts: [t for t in ts if t.name != "paid_orders"],
    "table renamed": lambda ts: _replace_table(ts, "orders", name="orders2"),
    "table moved to another schema": lambda ts: _replace_table(ts, "orders", schema_name="archive"),
    "table became a view": lambda ts: _replace_table(ts, "orders", kind="view"),
    "column added": lambda ts: _replace_table(ts, "orders", columns=orders().columns + [
        Column(name="note", ordinal=9, declared_type="TEXT")]),
    "column removed": lambda ts: _replace_table(ts, "orders", columns=orders().columns[:-1]),
    "column renamed": lambda ts: _replace_column(ts, "orders", "total", name="amount"),
    "column retyped": lambda ts: _replace_column(ts, "orders", "total", declared_type="DOUBLE"),
    "nullability": lambda ts: _replace_column(ts, "orders", "total", nullable=False),
    "columns reordered": lambda ts: _replace_column(ts, "orders", "order_id", ordinal=99),
    "primary key": lambda ts: _replace_table(ts, "orders", primary_key=["order_id", "customer_id"]),
    "primary key dropped": lambda ts: _replace_table(ts, "orders", primary_key=[]),
    "unique added": lambda ts: _replace_table(ts, "orders", unique_constraints=[
        UniqueConstraint(columns=["status"])]),
    "foreign key removed": lambda ts: _replace_table(ts, "orders", foreign_keys=[]),
    "foreign key retargeted": lambda ts: _replace_table(ts, "orders", foreign_keys=[
        ForeignKey(columns=["customer_id"], ref_schema="main", ref_table="paid_orders", ref_columns=["order_id"])]),
}

NON_STRUCTURAL: dict[str, Callable[[list[Table]], list[Table]]] = {
    "table comment": lambda ts: _replace_table(ts, "orders", comment="changed"),
    "table description": lambda ts: _replace_table(ts, "orders", description="changed"),
    "column comment": lambda ts: _replace_column(ts, "orders", "total", comment="gross"),
    "column description": lambda ts: _replace_column(ts, "orders", "total", description="gross"),
    "synonyms": lambda ts: _replace_column(ts, "orders", "total", synonyms=["amount"]),
    "statistics": lambda ts: _replace_column(ts, "orders", "total", stats=ColumnStats(null_fraction=0.5)),
    "row count": lambda ts: _replace_table(ts, "orders", row_count=1, row_count_status="exact"),
    "pii flag": lambda ts: _replace_column(ts, "customers", "name", pii=True, pii_kind="name"),
    "declared type case": lambda ts: _replace_column(ts, "orders", "total", declared_type="decimal(10,2)"),
    "fk constraint name": lambda ts: _replace_table(ts, "orders", foreign_keys=[
        fk.model_copy(update={"name": "other"}) for fk in orders().foreign_keys]),
}

METADATA: dict[str, Callable[[list[Table]], list[Table]]] = {
    k: NON_STRUCTURAL[k] for k in ("table comment", "table description", "column comment",
                                   "column description", "synonyms")
}


@pytest.mark.parametrize("change", sorted(STRUCTURAL))
def test_a_structural_change_changes_the_fingerprint(change: str) -> None:
    base = rich_tables()
    changed = STRUCTURAL[change](base)
    assert compute_fingerprint(changed) != compute_fingerprint(base)


@pytest.mark.parametrize("change", sorted(NON_STRUCTURAL))
def test_documentation_and_statistics_leave_the_fingerprint_alone(change: str) -> None:
    base = rich_tables()
    assert compute_fingerprint(NON_STRUCTURAL[change](base)) == compute_fingerprint(base)


@pytest.mark.parametrize("change", sorted(METADATA))
def test_documentation_changes_the_metadata_hash(change: str) -> None:
    base = rich_tables()
    ds = datasource()
    assert compute_metadata_hash(ds, METADATA[change](base)) != compute_metadata_hash(ds, base)


@pytest.mark.parametrize("change", ["statistics", "row count", "pii flag"])
def test_statistics_and_pii_leave_the_metadata_hash_alone(change: str) -> None:
    base = rich_tables()
    ds = datasource()
    assert compute_metadata_hash(ds, NON_STRUCTURAL[change](base)) == compute_metadata_hash(ds, base)


def test_datasource_documentation_counts_toward_the_metadata_hash_only() -> None:
    a = snapshot()
    b = snapshot(description="Another description")
    c = snapshot(tenant="acme")
    assert a.fingerprint == b.fingerprint == c.fingerprint
    assert len({a.metadata_hash, b.metadata_hash, c.metadata_hash}) == 3


def test_fingerprint_ignores_input_order() -> None:
    tables = rich_tables()
    shuffled = []
    rng = random.Random(7)
    for t in tables:
        fks = list(t.foreign_keys) + [ForeignKey(columns=["x"], ref_table="a", ref_columns=["y"])]
        rng.shuffle(fks)
        cols = list(t.columns)
        rng.shuffle(cols)
        shuffled.append(t.model_copy(update={"columns": cols, "foreign_keys": fks}))
    rng.shuffle(shuffled)
    with_fk = [t.model_copy(update={"foreign_keys": sorted(
        list(t.foreign_keys) + [ForeignKey(columns=["x"], ref_table="a", ref_columns=["y"])],
        key=lambda fk: fk.ref_table)}) for t in tables]
    assert compute_fingerprint(shuffled) == compute_fingerprint(with_fk)
    assert compute_metadata_hash(datasource(), list(reversed(tables))) == compute_metadata_hash(datasource(), tables)


def test_fingerprint_is_a_sha256_hex_digest_and_deterministic() -> None:
    fp = compute_fingerprint(rich_tables())
    assert len(fp) == 64 and int(fp, 16) >= 0 and fp == fp.lower()
    assert compute_fingerprint(rich_tables()) == fp
    assert compute_fingerprint([]) != fp


def test_snapshot_create_sorts_and_hashes() -> None:
    snap = snapshot()
    assert [t.name for t in snap.tables] == ["customers", "orders", "paid_orders"]
    assert snap.fingerprint == compute_fingerprint(rich_tables())
    assert snap.metadata_hash == compute_metadata_hash(datasource(), rich_tables())
    assert snap.schema_version is None


def test_schema_version_format_is_utc_seconds_and_fp8() -> None:
    fp = compute_fingerprint(rich_tables())
    assert make_schema_version(T0, fp) == f"20261130031522_{fp[:8]}"
    plus_two = timezone(timedelta(hours=2))
    assert make_schema_version(datetime(2026, 11, 30, 5, 15, 22, tzinfo=plus_two), fp) == f"20261130031522_{fp[:8]}"
    assert make_schema_version(datetime(2026, 11, 30, 3, 15, 22), fp) == f"20261130031522_{fp[:8]}"  # naive = UTC


def test_versions_within_one_second_share_the_stamp_so_the_store_must_bump() -> None:
    fp_a, fp_b = "a" * 64, "b" * 64
    first = make_schema_version(T0, fp_b)
    second = make_schema_version(T0 + timedelta(microseconds=500), fp_a)
    assert first[:14] == second[:14]
    assert second < first  # string order would misorder them: SchemaStore bumps the second one
    later = make_schema_version(T0 + timedelta(seconds=1), fp_a)
    assert later > first


def test_parse_schema_version_round_trips() -> None:
    when, fp8 = parse_schema_version("20261130031522_3fa9c2e1")
    assert when == datetime(2026, 11, 30, 3, 15, 22, tzinfo=UTC)
    assert fp8 == "3fa9c2e1"
    assert make_schema_version(when, fp8 + "0" * 56) == "20261130031522_3fa9c2e1"


@pytest.mark.parametrize("bad", [
    "", "20261130031522", "20261130031522_", "2026113003152_3fa9c2e1", "20261130031522_3fa9c2e",
    "20261130031522_3FA9C2E1", "20261130031522_0x3fa9c2", "20261130031522_3fa9c2e1\n", "20261330031522_3fa9c2e1",
    "20261130031522-3fa9c2e1", "٢0261130031522_3fa9c2e1", "20261130031522_3fa9c2e1_x",
])
def test_parse_schema_version_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError, match="not a schema version"):
        parse_schema_version(bad)


def test_canonical_json_is_compact_sorted_unicode() -> None:
    assert canonical_json({"é": 1, "a": [None, True]}) == '{"a":[null,true],"é":1}'


def test_rich_snapshot_round_trips_through_json_losslessly() -> None:
    snap = snapshot().with_version("20261130031522_" + snapshot().fingerprint[:8])
    text = snap.model_dump_json()
    again = SchemaSnapshot.model_validate_json(text)
    assert again == snap
    assert again.captured_at == T0 and again.captured_at.tzinfo is not None
    assert again.tables[1].columns[2].stats == orders().columns[2].stats
    assert canonical_json(again.model_dump(mode="json")) == canonical_json(snap.model_dump(mode="json"))
    assert json.loads(text)["tables"][0]["columns"][1]["pii_kind"] == "email"


def test_snapshot_captured_at_is_normalised_to_utc() -> None:
    local = datetime(2026, 11, 30, 5, 15, 22, tzinfo=timezone(timedelta(hours=2)))
    snap = SchemaSnapshot.create(datasource(), [customers(), view()], local)
    assert snap.captured_at.utcoffset() == timedelta(0)
    assert snap.captured_at == local
