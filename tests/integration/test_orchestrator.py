"""index_datasource end to end: a real SQLite database, the real schema store, real Chroma, the real model."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.config import Annotations, DatasourceConfig, MetricConfig, StatisticsConfig
from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import SearchFilter
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.pipeline.steps import versions_to_keep
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.chunk_samples import FailingProvider, embedding_service_for, model_provider  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
EMAILS = [f"person{i}@example.com" for i in range(40)]


def make_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, email TEXT, segment TEXT, signup_date DATE);
        CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(customer_id),
                             total NUMERIC, status TEXT, ordered_at TIMESTAMP);
        CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT, price NUMERIC);
        CREATE TABLE order_items (order_id INTEGER REFERENCES orders(order_id),
                                  product_id INTEGER REFERENCES products(product_id), quantity INTEGER,
                                  PRIMARY KEY (order_id, product_id));
    """)
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)",
                    [(i, EMAILS[i], ["retail", "wholesale"][i % 2], f"2024-01-{1 + i % 28:02d}") for i in range(40)])
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)",
                    [(i, i % 40, 10.0 + i, ["paid", "open"][i % 2], f"2025-02-{1 + i % 28:02d} 10:00:00")
                     for i in range(200)])
    con.executemany("INSERT INTO products VALUES (?, ?, ?)", [(i, f"Widget {i}", 2.5 * i) for i in range(10)])
    con.executemany("INSERT INTO order_items VALUES (?, ?, ?)", [(i, i % 10, 1 + i % 3) for i in range(200)])
    con.commit()
    con.close()


@pytest.fixture
def env(tmp_path: Path, model_provider: object) -> dict[str, object]:
    db = tmp_path / "shop.sqlite"
    make_db(db)
    config = DatasourceConfig(
        id="shop", url=f"sqlite:///{db}", tenant="acme", description="Orders and customers of the web shop",
        metrics=[MetricConfig(name="revenue", definition="sum(orders.total) where orders.status = 'paid'",
                              grain="order")])
    store = SqlSchemaStore(f"sqlite:///{tmp_path / 'store.db'}")
    service = embedding_service_for(model_provider, tmp_path / "cache")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    vectors = ChromaVectorStore(client, service)  # type: ignore[arg-type]
    return {"db": db, "config": config, "store": store, "vectors": vectors, "service": service, "client": client}


def alter(db: Path, sql: str) -> None:
    con = sqlite3.connect(db)
    con.executescript(sql)
    con.commit()
    con.close()


def test_index_reindex_and_retention(env: dict[str, object]) -> None:
    config, store, vectors = env["config"], env["store"], env["vectors"]
    first = index_datasource(config, store, vectors, now=T0)  # type: ignore[arg-type]
    assert first.status == "new" and first.refresh.embedded == first.refresh.total
    assert first.chunk_counts["schema.metric"] == 1 and first.chunk_counts["schema.relationship"] == 3
    assert vectors.live_version("shop") == first.schema_version  # type: ignore[attr-defined]
    assert set(first.timings_ms) >= {"read", "register", "chunk", "refresh", "retention", "total"}

    again = index_datasource(config, store, vectors, now=T0 + timedelta(minutes=1))  # type: ignore[arg-type]
    assert again.status == "unchanged" and again.schema_version == first.schema_version
    assert (again.refresh.embedded, again.refresh.upserted) == (0, 0)

    alter(env["db"], "ALTER TABLE products ADD COLUMN category TEXT;")  # type: ignore[arg-type]
    second = index_datasource(config, store, vectors, now=T0 + timedelta(hours=1), retention=2)  # type: ignore[arg-type]
    assert second.status == "new" and second.previous_version == first.schema_version
    # only the products table's own texts are new: its table chunk and the new column
    assert second.refresh.embedded == 2, second.refresh
    assert second.kept_versions == [first.schema_version]
    assert vectors.list_ids("shop", first.schema_version)  # type: ignore[attr-defined]

    alter(env["db"], "CREATE TABLE suppliers (supplier_id INTEGER PRIMARY KEY, name TEXT);")  # type: ignore[arg-type]
    third = index_datasource(config, store, vectors, now=T0 + timedelta(hours=2), retention=2)  # type: ignore[arg-type]
    assert third.evicted_versions == [first.schema_version]
    assert vectors.list_ids("shop", first.schema_version) == set()  # type: ignore[attr-defined]
    assert [v.schema_version for v in store.list_versions("shop")] == [second.schema_version,  # type: ignore[attr-defined]
                                                                      third.schema_version]
    assert vectors.list_ids("shop") == (  # type: ignore[attr-defined]
        {c.id for c in build_chunks(store.get_snapshot("shop", second.schema_version)).chunks}  # type: ignore[attr-defined]
        | {c.id for c in build_chunks(store.get_snapshot("shop", third.schema_version)).chunks})  # type: ignore[attr-defined]
    hits = vectors.search("suppliers", k=3, where=SearchFilter(tenant_id="acme"))  # type: ignore[attr-defined]
    assert any(h.metadata["table"] == "suppliers" for h in hits)


def test_a_new_version_reads_and_embeds_only_the_tables_that_changed(env: dict[str, object]) -> None:
    """Data moved in every table, the structure of one: the new version costs that one table."""
    config, store, vectors = env["config"], env["store"], env["vectors"]
    first = index_datasource(config, store, vectors, now=T0)  # type: ignore[arg-type]
    alter(env["db"], "INSERT INTO orders SELECT order_id + 1000, customer_id, total, 'refunded', ordered_at "  # type: ignore[arg-type]
                     "FROM orders; ALTER TABLE products ADD COLUMN category TEXT;")
    second = index_datasource(config, store, vectors, now=T0 + timedelta(hours=1))  # type: ignore[arg-type]
    assert second.status == "new" and second.refresh.embedded == 2, second.refresh  # products' table + new column
    kept = store.get_snapshot("shop", second.schema_version).tables  # type: ignore[attr-defined]
    orders = next(t for t in kept if t.name == "orders")
    assert orders.row_count == 200 and orders.stats_read_at == T0  # kept from the first version

    fresh = config.model_copy(update={"statistics": StatisticsConfig(reuse_max_age_hours=0)})  # type: ignore[attr-defined]
    alter(env["db"], "ALTER TABLE products ADD COLUMN color TEXT;")  # type: ignore[arg-type]
    third = index_datasource(fresh, store, vectors, now=T0 + timedelta(hours=2))  # type: ignore[arg-type]
    orders = next(t for t in store.get_snapshot("shop", third.schema_version).tables  # type: ignore[attr-defined]
                  if t.name == "orders")
    assert orders.row_count == 400 and "refunded" in orders.column("status").stats.top_values  # type: ignore[union-attr]
    assert third.refresh.embedded > 2  # the orders chunks carry the new statistics
    assert first.refresh.total == second.refresh.total - 1


def test_metadata_change_updates_in_place_and_reembeds_only_changed_texts(env: dict[str, object]) -> None:
    config, store, vectors = env["config"], env["store"], env["vectors"]
    first = index_datasource(config, store, vectors, now=T0)  # type: ignore[arg-type]
    documented = config.model_copy(update={"annotations": Annotations(  # type: ignore[attr-defined]
        tables={"products": "Things the shop sells."}, columns={"products.price": "Unit price in EUR."})})
    second = index_datasource(documented, store, vectors, now=T0 + timedelta(hours=1))  # type: ignore[arg-type]
    assert second.status == "metadata_updated" and second.schema_version == first.schema_version
    assert 0 < second.refresh.embedded <= 5 and second.refresh.unchanged >= first.refresh.total - 5
    docs = {c.id: c.document for c in vectors.get_chunks("shop", first.schema_version)}  # type: ignore[attr-defined]
    assert "Things the shop sells" in docs[f"shop:{first.schema_version}:table:products"]
    assert len(docs) == first.refresh.total


def test_no_pii_value_reaches_the_vector_store(env: dict[str, object]) -> None:
    outcome = index_datasource(env["config"], env["store"], env["vectors"], now=T0)  # type: ignore[arg-type]
    stored = env["vectors"].get_chunks("shop", outcome.schema_version)  # type: ignore[attr-defined]
    assert stored
    blob = "\n".join(c.document + json.dumps(c.metadata) for c in stored)
    assert not [e for e in EMAILS if e in blob]
    email = next(c for c in stored if c.id.endswith("column:customers.email"))
    assert email.metadata["pii"] is True


def test_failing_embeddings_leave_the_previous_version_live(env: dict[str, object], model_provider: object,
                                                             tmp_path: Path) -> None:
    config, store, vectors = env["config"], env["store"], env["vectors"]
    first = index_datasource(config, store, vectors, now=T0)  # type: ignore[arg-type]
    before = {c.id: c.document for c in vectors.get_chunks("shop", first.schema_version)}  # type: ignore[attr-defined]
    failing = embedding_service_for(FailingProvider(model_provider, fail_after=3), tmp_path / "cache2")
    broken = ChromaVectorStore(env["client"], failing, write_batch_size=2)  # type: ignore[arg-type]
    alter(env["db"], """ALTER TABLE customers ADD COLUMN country TEXT;
                        ALTER TABLE orders ADD COLUMN channel TEXT;
                        ALTER TABLE products ADD COLUMN category TEXT;""")  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError):
        index_datasource(config, store, broken, now=T0 + timedelta(hours=1))  # type: ignore[arg-type]
    assert vectors.live_version("shop") == first.schema_version  # type: ignore[attr-defined]
    assert {c.id: c.document for c in vectors.get_chunks("shop", first.schema_version)} == before  # type: ignore[attr-defined]
    assert vectors.count() == len(before)  # type: ignore[attr-defined]
    # the schema store already has the new version; a later run with a working model catches up
    recovered = index_datasource(config, store, vectors, now=T0 + timedelta(hours=2))  # type: ignore[arg-type]
    assert recovered.status == "unchanged" and vectors.live_version("shop") == recovered.schema_version  # type: ignore[attr-defined]
    assert recovered.schema_version != first.schema_version


def test_bad_retention_is_rejected(env: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="retention"):
        index_datasource(env["config"], env["store"], env["vectors"], retention=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retention"):
        versions_to_keep(env["store"], "shop", "x", 0)  # type: ignore[arg-type]
