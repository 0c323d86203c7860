"""SchemaChunkBuilder: ids, every chunk type's fields, PII rule, metrics, determinism."""

from __future__ import annotations

import json

import pytest

from nl2sql_assets.indexing.chunk_builder import SchemaChunkBuilder, build_chunks, infer_cardinality
from nl2sql_assets.indexing.models import (
    CHUNK_TYPES,
    ColumnChunk,
    DatasourceChunk,
    MetricChunk,
    RelationshipChunk,
    TableChunk,
)
from nl2sql_assets.pipeline.verify import chunk_coverage
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, MetricDefinition, SchemaSnapshot, Table
from tests.chunk_samples import CAPTURED, PII_VALUES, shop_snapshot, wide_snapshot

REQUIRED_METADATA = ("datasource_id", "schema_version", "tenant_id", "chunk_type", "table", "column",
                     "dtype", "pii", "join_pairs", "content_hash")


@pytest.fixture
def snap() -> SchemaSnapshot:
    return shop_snapshot()


def by_id(chunks: list, suffix: str):  # noqa: ANN001, ANN201 - test helper
    matches = [c for c in chunks if c.id.endswith(suffix)]
    assert len(matches) == 1, (suffix, [c.id for c in chunks])
    return matches[0]


def test_unversioned_snapshot_is_rejected(snap: SchemaSnapshot) -> None:
    with pytest.raises(ValueError, match="shop.*schema_version"):
        build_chunks(snap.model_copy(update={"schema_version": None}))


def test_ids_are_deterministic_and_carry_datasource_and_version(snap: SchemaSnapshot) -> None:
    first, second = build_chunks(snap), SchemaChunkBuilder().build(shop_snapshot())
    assert [c.id for c in first.chunks] == [c.id for c in second.chunks]
    assert [c.content_hash for c in first.chunks] == [c.content_hash for c in second.chunks]
    version = snap.schema_version
    assert all(c.id.startswith(f"shop:{version}:") for c in first.chunks)
    assert len({c.id for c in first.chunks}) == len(first.chunks)
    assert first.chunks[0].id == f"shop:{version}:ds:shop"
    assert by_id(first.chunks, ":table:orders").type == "schema.table"
    assert by_id(first.chunks, ":column:customers.Segment").type == "schema.column"
    assert by_id(first.chunks, ":metric:revenue").type == "schema.metric"


def test_every_chunk_type_is_emitted_with_counts(snap: SchemaSnapshot) -> None:
    chunk_set = build_chunks(snap)
    counts = chunk_set.counts()
    assert counts == {"schema.datasource": 1, "schema.table": 4, "schema.column": 15,
                      "schema.relationship": 4, "schema.metric": 2}
    assert set(counts) == set(CHUNK_TYPES)
    assert chunk_set.tenant_id == "acme" and chunk_set.schema_version == snap.schema_version


def test_every_chunk_has_the_required_metadata(snap: SchemaSnapshot) -> None:
    for chunk in build_chunks(snap).chunks:
        meta = chunk.get_metadata()
        for key in REQUIRED_METADATA:
            assert key in meta, (chunk.id, key)
        assert meta["datasource_id"] == "shop" and meta["tenant_id"] == "acme"
        assert meta["schema_version"] == snap.schema_version
        assert meta["chunk_type"] == chunk.type
        assert all(isinstance(v, (str, int, float, bool)) for v in meta.values()), chunk.id
        assert snap.schema_version not in chunk.get_page_content()


def test_two_foreign_keys_between_the_same_tables_get_different_ids(snap: SchemaSnapshot) -> None:
    rels = [c for c in build_chunks(snap).chunks
            if isinstance(c, RelationshipChunk) and c.from_table == "orders" and c.to_table == "addresses"]
    assert len(rels) == 2
    assert rels[0].id != rels[1].id
    assert {tuple(c.from_columns) for c in rels} == {("billing_address_id",), ("shipping_address_id",)}
    assert {json.loads(str(c.get_metadata()["join_pairs"]))[0][0] for c in rels} == {
        "billing_address_id", "shipping_address_id"}


def test_datasource_chunk_has_description_domains_questions() -> None:
    chunk = build_chunks(shop_snapshot(description="Orders, customers and payments of the web shop")).chunks[0]
    assert isinstance(chunk, DatasourceChunk)
    text = chunk.get_page_content()
    assert "Orders, customers and payments of the web shop" in text
    assert "commerce" in text and "Revenue by month in 2025?" in text
    assert "Tables:" not in text  # described datasources need no summary


def test_undocumented_datasource_gets_a_compact_table_summary() -> None:
    chunk = build_chunks(shop_snapshot(description=None)).chunks[0]
    assert chunk.get_page_content().startswith("Datasource shop. Tables: addresses, customers, orders, profiles.")
    big = build_chunks(wide_snapshot(120)).chunks[0].get_page_content()
    assert "and 80 more" in big and len(big) < 800


def test_table_chunk_fields(snap: SchemaSnapshot) -> None:
    chunk = by_id(build_chunks(snap).chunks, ":table:orders")
    assert isinstance(chunk, TableChunk)
    text = chunk.get_page_content()
    assert text.startswith("Table orders: Orders placed in the web shop.")
    assert "Primary key: order id." in text
    assert "billing address id integer" in text and "total decimal" in text
    assert "shipping address id -> addresses" in text and "customer id -> customers" in text
    assert "1200" not in text  # no statistics of columns in the table chunk
    assert "About 5,000 rows." in text
    meta = chunk.get_metadata()
    assert meta["table"] == "orders" and json.loads(str(meta["primary_key"])) == ["order_id"]
    assert "total" in json.loads(str(meta["columns"]))


def test_column_chunk_fields(snap: SchemaSnapshot) -> None:
    chunks = build_chunks(snap).chunks
    segment = by_id(chunks, ":column:customers.Segment")
    assert isinstance(segment, ColumnChunk)
    text = segment.get_page_content()
    assert text.startswith("Column Segment of table customers, text.")
    assert text.endswith("Table: People who buy from the web shop.")
    assert "Marketing segment." in text and "Also called: tier, customer class." in text
    assert "10% null, 3 distinct values." in text and "Values: retail, staff, wholesale." in text
    signup = by_id(chunks, ":column:customers.SignupDate").get_page_content()
    assert "SignupDate (signup date)" in signup
    assert "40 distinct values, from 2020 to 2025." in signup
    fk = by_id(chunks, ":column:orders.customer_id")
    assert "References customers.customer_id." in fk.get_page_content()
    meta = fk.get_metadata()
    assert (meta["table"], meta["column"], meta["dtype"], meta["pii"]) == ("orders", "customer_id", "INTEGER", False)
    total = by_id(chunks, ":column:orders.total").get_page_content()
    assert "Table: Orders placed in the web shop." in total and "One row per checkout" not in total  # first sentence only


def test_no_pii_value_appears_in_any_chunk(snap: SchemaSnapshot) -> None:
    chunks = build_chunks(snap).chunks
    for chunk in chunks:
        blob = chunk.get_page_content() + json.dumps(chunk.get_metadata())
        for value in PII_VALUES:
            assert value not in blob, (chunk.id, value)
    email = by_id(chunks, ":column:customers.email")
    assert email.get_metadata()["pii"] is True and email.sample_values == []
    assert "distinct values" in email.get_page_content()  # statistics stay, values do not


def test_relationship_cardinality_from_keys(snap: SchemaSnapshot) -> None:
    chunks = build_chunks(snap).chunks
    one = by_id(chunks, ":rel:profiles(customer_id)->customers(customer_id)")
    many = by_id(chunks, ":rel:orders(customer_id)->customers(customer_id)")
    assert one.cardinality == "one-to-one" and many.cardinality == "many-to-one"
    assert one.get_page_content() == ("Join profiles to customers on profiles.customer_id = "
                                      "customers.customer_id (one-to-one).")
    table = snap.table("orders")
    assert table is not None
    assert infer_cardinality(table, table.foreign_keys[0]) == "many-to-one"


def test_metric_chunks_are_emitted_with_their_tables(snap: SchemaSnapshot) -> None:
    metrics = [c for c in build_chunks(snap).chunks if isinstance(c, MetricChunk)]
    assert [m.name for m in metrics] == ["active_customers", "revenue"]
    revenue = metrics[1]
    assert revenue.tables == ["orders"] and metrics[0].tables == ["customers"]
    text = revenue.get_page_content()
    assert "sum(orders.total) where orders.status = 'paid'" in text and "Grain: order." in text
    assert json.loads(str(revenue.get_metadata()["tables"])) == ["orders"]
    assert not [c for c in build_chunks(shop_snapshot(metrics=False)).chunks if isinstance(c, MetricChunk)]


def test_a_changed_table_changes_only_its_own_chunk_texts() -> None:
    before = {c.id.split(":", 2)[2]: c for c in build_chunks(shop_snapshot()).chunks}
    after = {c.id.split(":", 2)[2]: c for c in build_chunks(shop_snapshot(extra_order_column=True)).chunks}
    changed = {k for k in after if k not in before or before[k].get_page_content() != after[k].get_page_content()}
    assert changed == {"table:orders", "column:orders.coupon_code"}


def test_data_growth_does_not_change_chunk_texts() -> None:
    """Row counts, distinct counts, ranges and value order move with new rows; the texts should not."""
    base = shop_snapshot()
    grown_tables = []
    for table in base.tables:
        cols = []
        for col in table.columns:
            stats = col.stats
            if stats is not None:
                stats = stats.model_copy(update={
                    "distinct_count": None if stats.distinct_count is None
                    else stats.distinct_count + (7 if stats.distinct_count == table.row_count
                                                 else 3 if stats.distinct_count > 200 else 0),
                    "null_fraction": None if stats.null_fraction is None
                    else stats.null_fraction + (0.004 if stats.null_fraction > 0.1 else 0),
                    "max_value": "2025-12-30" if stats.max_value == "2025-12-31" else stats.max_value,
                    "top_values": list(reversed(stats.top_values)),
                })
            cols.append(col.model_copy(update={"stats": stats}))
        grown_tables.append(table.model_copy(update={
            "columns": cols, "row_count": None if table.row_count is None else table.row_count + 7}))
    grown = base.model_copy(update={"tables": grown_tables})
    before = {c.id: c.content_hash for c in build_chunks(base).chunks}
    after = {c.id: c.content_hash for c in build_chunks(grown).chunks}
    assert before == after


def test_comment_change_keeps_ids_and_changes_content_hash() -> None:
    a = build_chunks(shop_snapshot()).chunks
    b = build_chunks(shop_snapshot(customer_comment="Buyers.")).chunks
    assert [c.id for c in a] == [c.id for c in b]
    differing = {x.id.split(":", 2)[2] for x, y in zip(a, b, strict=True) if x.content_hash != y.content_hash}
    assert "table:customers" in differing and "column:customers.email" in differing
    assert not any(d.startswith(("table:orders", "column:orders")) for d in differing)


def _snapshot(tables: list[Table], schema: str | None = None, metrics: list[MetricDefinition] | None = None
              ) -> SchemaSnapshot:
    tables = [t.model_copy(update={"schema_name": schema}) for t in tables]
    info = DatasourceInfo(id="dots", dialect="sqlite", metrics=metrics or [])
    return SchemaSnapshot.create(info, tables, CAPTURED).with_version("20260102030405_0badc0de")


def _identities(snap: SchemaSnapshot) -> list[str]:
    return [c.id.split(":", 3)[3] for c in build_chunks(snap).chunks]


@pytest.mark.parametrize("schema", [None, "main"])
def test_dotted_names_get_distinct_ids_and_plain_names_keep_theirs(schema: str | None) -> None:
    """Table a.b's column c and table a's column b.c once shared the id ``...:column:a.b.c``."""
    fk = ForeignKey(columns=["b.c"], ref_table="a.b", ref_columns=["c"], ref_schema=schema)
    snap = _snapshot([Table(name="a.b", columns=[Column(name="c")], primary_key=["c"]),
                      Table(name="a", columns=[Column(name="b.c")], foreign_keys=[fk]),
                      Table(name="frpm", columns=[Column(name="Free Meal Count (K-12)"), Column(name="CDSCode")])],
                     schema)
    prefix = f"{schema}." if schema else ""
    ids = _identities(snap)
    assert len(ids) == len(set(ids))
    assert {f'{prefix}"a.b"', f"{prefix}a", f'{prefix}"a.b".c', f'{prefix}a."b.c"'} <= set(ids)
    assert f'{prefix}a("b.c")->{prefix}"a.b"(c)' in ids
    # names without separators keep the ids they always had (stored indexes rely on them)
    assert {f"{prefix}frpm", f"{prefix}frpm.Free Meal Count (K-12)", f"{prefix}frpm.CDSCode"} <= set(ids)
    assert chunk_coverage(snap, build_chunks(snap)).ok


def test_any_name_gets_its_own_id() -> None:
    """Quotes, colons, '#g1' (the generation mark) and commas in foreign-key column lists."""
    snap = _snapshot([
        Table(name="t", columns=[Column(name=n) for n in ("x,y", "x", "y", 'q"', '"q""', "c:1", "v#g1")],
              foreign_keys=[ForeignKey(columns=["x,y"], ref_table="r", ref_columns=["k,k2"]),
                            ForeignKey(columns=["x", "y"], ref_table="r", ref_columns=["k", "k2"])]),
        Table(name="r", columns=[Column(name="k,k2"), Column(name="k"), Column(name="k2")]),
    ])
    chunks = build_chunks(snap).chunks
    assert len({c.id for c in chunks}) == len(chunks)
    assert not any(c.id.endswith("#g1") for c in chunks)  # never mistaken for a rewritten record's id


def test_two_chunks_with_one_id_name_both_objects() -> None:
    snap = _snapshot([Table(name="t", columns=[Column(name="a")]), Table(name="t", columns=[Column(name="b")])],
                     "main")
    with pytest.raises(ValueError, match=r"table 't' in schema 'main' and table 't' in schema 'main' would share "
                                         r"the chunk id 'dots:[0-9_a-f]+:table:main\.t'"):
        build_chunks(snap)
    twice = [MetricDefinition(name="revenue", definition="sum(t.a)")] * 2
    with pytest.raises(ValueError, match="metric 'revenue' and metric 'revenue' would share"):
        build_chunks(_snapshot([Table(name="t", columns=[Column(name="a")])], metrics=twice))


def test_a_foreign_key_declared_twice_is_one_relationship_chunk() -> None:
    """Spider's ``solvency_ii`` declares ``Assets_in_Events(Event_ID) -> Events(Event_ID)`` twice;
    the database accepts it, so indexing must too (one chunk, not a chunk-id clash)."""
    fk = ForeignKey(columns=["event_id"], ref_table="events", ref_columns=["event_id"])
    tables = [Table(name="events", primary_key=["event_id"], columns=[Column(name="event_id", type_family="integer")]),
              Table(name="assets_in_events", foreign_keys=[fk, fk.model_copy()],
                    columns=[Column(name="event_id", type_family="integer")])]
    snap = SchemaSnapshot.create(DatasourceInfo(id="dup", dialect="sqlite"), tables, CAPTURED).with_version(
        "20260102030405_0badc0de")
    rels = [c for c in build_chunks(snap).chunks if c.type == "schema.relationship"]
    assert len(rels) == 1 and rels[0].id.endswith("rel:assets_in_events(event_id)->events(event_id)")


def test_a_digest_that_looks_like_a_card_number_does_not_block_a_chunk_set(snap: SchemaSnapshot) -> None:
    """About one SHA-256 digest in 20,000 holds a digit run that passes a card number's issuer range
    and Luhn check (``2632170365579328`` here): the blocking PII check must not read the product's
    own digests, or a large schema fails to index by chance."""
    from nl2sql_assets.indexing.models import ChunkSet, TableChunk
    from nl2sql_assets.pipeline.verify import pii_findings

    digest = "2632170365579328c1e1e26194d38b18d2a36e6a71b1b59dbf44a9b5a6fa2623"

    class UnluckyChunk(TableChunk):
        @property
        def content_hash(self) -> str:
            return digest

    chunk_set = build_chunks(snap)
    table = next(c for c in chunk_set.chunks if isinstance(c, TableChunk))
    unlucky = UnluckyChunk(**table.model_dump())
    assert unlucky.get_metadata()["content_hash"] == digest
    clean = [c for c in chunk_set.chunks if c.id != table.id]
    assert pii_findings(snap, ChunkSet(**{**chunk_set.model_dump(exclude={"chunks"}), "chunks": [*clean, unlucky]})) == \
        pii_findings(snap, ChunkSet(**{**chunk_set.model_dump(exclude={"chunks"}), "chunks": clean}))
    # the guard: the digest alone is what the text scan flags (so the first assertion means something)
    assert pii_findings(snap, ChunkSet(**{**chunk_set.model_dump(exclude={"chunks"}),
                                          "chunks": [unlucky.model_copy(update={"description": digest})]}))
