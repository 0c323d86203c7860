"""build_tables: ordinals, flags, annotations overlay, name-based PII."""

from __future__ import annotations

import doctest

from nl2sql_assets.adapters import structure
from nl2sql_assets.adapters.structure import (
    RawColumn, RawForeignKey, RawTable, build_tables, unmatched_annotations,
)
from nl2sql_assets.config import Annotations


def test_doctests() -> None:
    assert doctest.testmod(structure).failed == 0


def _raw() -> list[RawTable]:
    orders = RawTable("sales", "orders", "table", "  Checkouts ", [
        RawColumn("id", "INTEGER", nullable=True), RawColumn("customer_id", "INTEGER"),
        RawColumn("Total", "NUMERIC(10,2)", comment=""), RawColumn("buyer_email", "TEXT", default="'x'"),
    ], primary_key=["id"], uniques=[("u1", ["customer_id", "Total"])],
        foreign_keys=[RawForeignKey("fk1", ["customer_id"], "sales", "customers", ["id"])])
    customers = RawTable("sales", "customers", "view", None, [RawColumn("id", "INTEGER")])
    return [orders, customers]


def test_flags_and_ordinals() -> None:
    orders, customers = build_tables(_raw())
    assert [c.ordinal for c in orders.columns] == [1, 2, 3, 4]
    assert orders.comment == "Checkouts" and orders.description is None
    ident = orders.column("id")
    assert ident is not None and ident.is_primary_key and not ident.nullable  # a PK is never nullable
    cust = orders.column("customer_id")
    assert cust is not None and cust.is_foreign_key and not cust.is_primary_key and cust.nullable
    total = orders.column("Total")
    assert total is not None and total.type_family == "decimal" and total.comment is None
    email = orders.column("buyer_email")
    assert email is not None and email.pii and email.pii_kind == "email" and email.default == "'x'"
    assert orders.unique_constraints[0].columns == ["customer_id", "Total"]
    assert orders.foreign_keys[0].pairs == [("customer_id", "id")]
    assert customers.kind == "view"


def test_annotations_overlay() -> None:
    annotations = Annotations(
        tables={"orders": "bare", "sales.orders": "qualified", "CUSTOMERS": "case-insensitive"},
        columns={"orders.total": "gross", "sales.orders.id": "key"},
        synonyms={"orders.Total": ["revenue", "amount", "revenue"]},
    )
    orders, customers = build_tables(_raw(), annotations)
    assert orders.description == "qualified"  # the schema-qualified key wins
    assert customers.description == "case-insensitive"
    assert orders.column("id").description == "key"  # type: ignore[union-attr]
    total = orders.column("Total")
    assert total is not None and total.description == "gross" and total.synonyms == ["amount", "revenue"]
    assert orders.column("customer_id").description is None  # type: ignore[union-attr]


def test_unmatched_annotations_are_reported() -> None:
    tables = build_tables(_raw())
    annotations = Annotations(tables={"orders": "x", "ordres": "typo"},
                              columns={"orders.total": "ok", "orders.nope": "typo"},
                              synonyms={"sales.orders.id": ["key"], "x.y": ["z"]})
    assert unmatched_annotations(annotations, tables) == [
        "annotation for table 'ordres' matches no table",
        "annotation (columns) for 'orders.nope' matches no column",
        "annotation (synonyms) for 'x.y' matches no column",
    ]
