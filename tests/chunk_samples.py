"""Small registered snapshots and an embedding-service look-alike for chunk and vector-store tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embeddings import EmbedResult
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.schema.fingerprint import make_schema_version
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

CAPTURED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PII_VALUES = ("alice@example.com", "bob@example.org", "+1 555 0100")


def shop_tables(*, customer_comment: str | None = "People who buy from the web shop.",
                extra_order_column: bool = False) -> list[Table]:
    """customers, orders (two FKs to addresses), addresses, profiles (1:1 with customers)."""
    customers = Table(
        name="customers", comment=customer_comment, primary_key=["customer_id"], row_count=1200,
        row_count_status="exact",
        columns=[
            Column(name="customer_id", ordinal=1, declared_type="INTEGER", type_family="integer",
                   nullable=False, is_primary_key=True,
                   stats=ColumnStats(null_fraction=0.0, distinct_count=1200, min_value="1", max_value="1200")),
            Column(name="email", ordinal=2, declared_type="VARCHAR(255)", type_family="text", pii=True,
                   pii_kind="email",
                   stats=ColumnStats(null_fraction=0.01, distinct_count=1188, top_values=list(PII_VALUES[:2]),
                                     min_value=PII_VALUES[0], max_value=PII_VALUES[1])),
            Column(name="phone", ordinal=3, declared_type="TEXT", type_family="text", pii=True,
                   stats=ColumnStats(null_fraction=0.3, distinct_count=800, top_values=[PII_VALUES[2]])),
            Column(name="Segment", ordinal=4, declared_type="TEXT", type_family="text",
                   description="Marketing segment.", synonyms=["tier", "customer class"],
                   stats=ColumnStats(null_fraction=0.12, distinct_count=3,
                                     top_values=["retail", "wholesale", "staff"])),
            Column(name="SignupDate", ordinal=5, declared_type="DATE", type_family="date",
                   stats=ColumnStats(null_fraction=0.0, distinct_count=40, min_value="2020-01-01",
                                     max_value="2025-12-31")),
        ],
    )
    order_cols = [
        Column(name="order_id", ordinal=1, declared_type="INTEGER", type_family="integer", nullable=False,
               is_primary_key=True),
        Column(name="customer_id", ordinal=2, declared_type="INTEGER", type_family="integer", is_foreign_key=True),
        Column(name="billing_address_id", ordinal=3, declared_type="INTEGER", type_family="integer",
               is_foreign_key=True),
        Column(name="shipping_address_id", ordinal=4, declared_type="INTEGER", type_family="integer",
               is_foreign_key=True),
        Column(name="total", ordinal=5, declared_type="NUMERIC(10,2)", type_family="decimal",
               description="Order total in EUR, taxes included."),
        Column(name="status", ordinal=6, declared_type="TEXT", type_family="text",
               stats=ColumnStats(distinct_count=3, top_values=["paid", "open", "cancelled"])),
    ]
    if extra_order_column:
        order_cols.append(Column(name="coupon_code", ordinal=7, declared_type="TEXT", type_family="text"))
    orders = Table(
        name="orders", description="Orders placed in the web shop. One row per checkout.",
        primary_key=["order_id"], row_count=5000, row_count_status="exact", columns=order_cols,
        foreign_keys=[
            ForeignKey(columns=["customer_id"], ref_table="customers", ref_columns=["customer_id"]),
            ForeignKey(columns=["billing_address_id"], ref_table="addresses", ref_columns=["address_id"]),
            ForeignKey(columns=["shipping_address_id"], ref_table="addresses", ref_columns=["address_id"]),
        ],
    )
    addresses = Table(
        name="addresses", primary_key=["address_id"],
        columns=[
            Column(name="address_id", ordinal=1, declared_type="INTEGER", type_family="integer", nullable=False),
            Column(name="city", ordinal=2, declared_type="TEXT", type_family="text",
                   stats=ColumnStats(distinct_count=2, top_values=["Alameda", "Berlin"])),
        ],
    )
    profiles = Table(
        name="profiles", primary_key=["profile_id"],
        unique_constraints=[UniqueConstraint(columns=["customer_id"])],
        columns=[
            Column(name="profile_id", ordinal=1, declared_type="INTEGER", type_family="integer", nullable=False),
            Column(name="customer_id", ordinal=2, declared_type="INTEGER", type_family="integer"),
        ],
        foreign_keys=[ForeignKey(columns=["customer_id"], ref_table="customers", ref_columns=["customer_id"])],
    )
    return [customers, orders, addresses, profiles]


def shop_snapshot(*, datasource_id: str = "shop", tenant: str = "acme", description: str | None = None,
                  captured_at: datetime = CAPTURED, metrics: bool = True, **table_kwargs: object) -> SchemaSnapshot:
    """A registered snapshot (schema_version set the way the SchemaStore sets it)."""
    info = DatasourceInfo(
        id=datasource_id, dialect="sqlite", description=description, tenant=tenant,
        domains=["commerce"], example_questions=["Revenue by month in 2025?"],
        metrics=[
            MetricDefinition(name="revenue", definition="sum(orders.total) where orders.status = 'paid'",
                             grain="order"),
            MetricDefinition(name="active_customers", definition="count(distinct customers.customer_id)"),
        ] if metrics else [],
    )
    snap = SchemaSnapshot.create(info, shop_tables(**table_kwargs), captured_at)  # type: ignore[arg-type]
    return snap.with_version(make_schema_version(captured_at, snap.fingerprint))


def wide_snapshot(n_tables: int, *, datasource_id: str = "wide", tenant: str = "default",
                  changed: frozenset[int] = frozenset(), captured_at: datetime = CAPTURED) -> SchemaSnapshot:
    """``n_tables`` tables of 8 columns, each referencing the previous; ``changed`` tables get a column more."""
    tables = []
    for i in range(n_tables):
        cols = [Column(name="id", ordinal=1, declared_type="INTEGER", type_family="integer", nullable=False)]
        cols += [Column(name=f"attr_{j}_of_t{i}", ordinal=j + 2, declared_type="TEXT", type_family="text")
                 for j in range(6)]
        fks = []
        if i:
            cols.append(Column(name="parent_id", ordinal=8, declared_type="INTEGER", type_family="integer"))
            fks.append(ForeignKey(columns=["parent_id"], ref_table=f"entity_{i - 1:03d}", ref_columns=["id"]))
        if i in changed:
            cols.append(Column(name="added_flag", ordinal=9, declared_type="BOOLEAN", type_family="boolean"))
        tables.append(Table(name=f"entity_{i:03d}", primary_key=["id"], columns=cols, foreign_keys=fks))
    info = DatasourceInfo(id=datasource_id, dialect="sqlite", tenant=tenant)
    snap = SchemaSnapshot.create(info, tables, captured_at)
    return snap.with_version(make_schema_version(captured_at, snap.fingerprint))


class CachingService:
    """An EmbeddingService look-alike over any provider (HashEmbedder in unit tests).

    Counts like the real service: ``embedded`` texts went to the provider, ``from_cache``
    came from its in-memory cache (``cache=False`` turns the cache off).
    """

    def __init__(self, provider: object, *, cache: bool = True) -> None:
        self.provider = provider
        self._cache: dict[str, np.ndarray] | None = {} if cache else None
        self.documents_embedded = 0

    @property
    def identity(self) -> ModelIdentity:
        return self.provider.identity  # type: ignore[attr-defined,no-any-return]

    def embed_documents(self, texts: Sequence[str]) -> EmbedResult:
        cache = self._cache if self._cache is not None else {}
        missing = sorted({t for t in texts if t not in cache})
        if missing:
            vectors = self.provider.embed(missing)  # type: ignore[attr-defined]
            fresh = dict(zip(missing, vectors, strict=True))
            if self._cache is not None:
                self._cache.update(fresh)
            cache = {**cache, **fresh}
        self.documents_embedded += len(missing)
        out = np.stack([cache[t] for t in texts]) if texts else np.zeros((0, self.identity.dimension), np.float32)
        return EmbedResult(vectors=out, embedded=len(missing), from_cache=len(texts) - len(missing))

    def embed_query(self, text: str) -> np.ndarray:
        return self.provider.embed([text])[0]  # type: ignore[attr-defined,no-any-return]


class FailingProvider:
    """A provider that embeds ``fail_after`` texts, then raises EmbeddingError (failure injection)."""

    def __init__(self, inner: object, fail_after: int) -> None:
        self.inner = inner
        self.fail_after = fail_after
        self.texts_seen = 0

    @property
    def identity(self) -> ModelIdentity:
        return self.inner.identity  # type: ignore[attr-defined,no-any-return]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.texts_seen + len(texts) > self.fail_after:
            raise EmbeddingError(f"injected failure after {self.fail_after} texts")
        self.texts_seen += len(texts)
        return self.inner.embed(texts)  # type: ignore[attr-defined,no-any-return]


def embedding_service_for(provider: object, cache_dir: Path) -> object:
    """The real ``EmbeddingService`` over ``provider`` with a fresh persistent cache in ``cache_dir``."""
    from nl2sql_assets.indexing.embedding_cache import EmbeddingCache
    from nl2sql_assets.indexing.embeddings import EmbeddingService

    return EmbeddingService(provider, EmbeddingCache.in_folder(cache_dir))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def model_provider(local_embedder: object) -> object:
    """The real local model, shared with conftest's ``local_embedder`` so it loads once per session."""
    return local_embedder
