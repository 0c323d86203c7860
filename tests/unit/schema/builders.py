"""Hand-built snapshots for the schema tests (also used by the store's integration tests)."""

from __future__ import annotations

from datetime import UTC, datetime

from nl2sql_assets.schema.models import (
    Column,
    ColumnStats,
    DatasourceInfo,
    ForeignKey,
    MetricDefinition,
    SchemaSnapshot,
    Table,
    UniqueConstraint,
)

T0 = datetime(2026, 11, 30, 3, 15, 22, 123456, tzinfo=UTC)


def datasource(ds_id: str = "sales", tenant: str = "default", description: str | None = "Web shop") -> DatasourceInfo:
    return DatasourceInfo(
        id=ds_id, dialect="sqlite", description=description, domains=["commerce", "finance"],
        example_questions=["Revenue by month in 2025?"], tenant=tenant,
        metrics=[MetricDefinition(name="revenue", definition="sum(orders.total) where orders.status = 'paid'",
                                  grain="order", description="Paid revenue")],
    )


def customers(comment: str | None = "People who buy") -> Table:
    return Table(
        schema_name="main", name="customers", comment=comment, primary_key=["customer_id"],
        unique_constraints=[UniqueConstraint(name="uq_email", columns=["email"])],
        row_count=1200, row_count_status="exact",
        columns=[
            Column(name="customer_id", ordinal=1, declared_type="INTEGER", type_family="integer",
                   nullable=False, is_primary_key=True,
                   stats=ColumnStats(null_fraction=0.0, distinct_count=1200, min_value="1", max_value="1200")),
            Column(name="email", ordinal=2, declared_type="VARCHAR(200)", type_family="text",
                   comment="Login e-mail", pii=True, pii_kind="email",
                   stats=ColumnStats(null_fraction=0.01, distinct_count=1188, status="sampled", sample_size=1000,
                                     note="sampled 1000 rows")),
            Column(name="name", ordinal=3, declared_type="TEXT", type_family="text", synonyms=["full name"],
                   description="Display name"),
        ],
    )


def orders(total_type: str = "DECIMAL(10,2)") -> Table:
    return Table(
        schema_name="main", name="orders", description="One row per order", primary_key=["order_id"],
        foreign_keys=[ForeignKey(name="fk_cust", columns=["customer_id"], ref_schema="main",
                                 ref_table="customers", ref_columns=["customer_id"])],
        row_count=50_000, row_count_status="estimated", stats_note="estimated from the planner",
        columns=[
            Column(name="order_id", ordinal=1, declared_type="INTEGER", type_family="integer", nullable=False,
                   is_primary_key=True),
            Column(name="customer_id", ordinal=2, declared_type="INTEGER", type_family="integer",
                   is_foreign_key=True),
            Column(name="total", ordinal=3, declared_type=total_type, type_family="decimal", default="0",
                   stats=ColumnStats(null_fraction=0.0, min_value="0.5", max_value="999.99",
                                     distinct_count=4321, status="exact")),
            Column(name="status", ordinal=4, declared_type="TEXT", type_family="text",
                   stats=ColumnStats(top_values=["paid", "open", "refunded"], distinct_count=3)),
            Column(name="créé_le", ordinal=5, declared_type="TIMESTAMP", type_family="datetime"),
        ],
    )


def view() -> Table:
    return Table(schema_name="main", name="paid_orders", kind="view",
                 columns=[Column(name="order_id", ordinal=1, declared_type="INTEGER", type_family="integer")])


def rich_tables() -> list[Table]:
    return [orders(), view(), customers()]


def snapshot(tables: list[Table] | None = None, *, ds_id: str = "sales", tenant: str = "default",
             captured_at: datetime = T0, description: str | None = "Web shop") -> SchemaSnapshot:
    return SchemaSnapshot.create(datasource(ds_id, tenant, description),
                                 rich_tables() if tables is None else tables, captured_at,
                                 warnings=["statistics of orders were estimated"])


def numbered(i: int, *, ds_id: str = "sales", captured_at: datetime = T0, tenant: str = "default") -> SchemaSnapshot:
    """A distinct structure per ``i``: the rich tables plus a table ``extra_<i>``."""
    extra = Table(name=f"extra_{i}", columns=[Column(name="id", declared_type="INTEGER")])
    return snapshot(rich_tables() + [extra], ds_id=ds_id, captured_at=captured_at, tenant=tenant)
