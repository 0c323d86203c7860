"""The retriever's stages, fallbacks, errors and tenant isolation.

Real SQLite schema store and real embedded Chroma; the HashEmbedder stands in for the model
(the same behaviours run with the real model in tests/integration/test_retriever.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import (
    RetrievalError,
    SchemaVersionNotFoundError,
    UnknownDatasourceError,
    UnknownTenantError,
)
from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.retrieval.models import QueryHints, RetrievalRequest, RetrieverConfig
from nl2sql_assets.schema.models import Column, Table
from tests.chroma_server import free_port
from tests.fakes import HashEmbedder
from tests.retrieval_samples import World, generated_snapshot


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path / "world", HashEmbedder(64))
    w.add(generated_snapshot(1, datasource_id="shop", tenant="acme",
                             entities=("customer", "order", "product", "supplier", "invoice")))
    w.add(generated_snapshot(2, datasource_id="clinic", tenant="acme",
                             entities=("patient", "doctor", "appointment", "branch")))
    w.add(generated_snapshot(3, datasource_id="school", tenant="globex",
                             entities=("student", "teacher", "course", "book")))
    yield w
    w.close()


def table_names(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.name for t in result.tables]


def test_scoped_question_finds_tables_columns_and_contract_shape(world: World) -> None:
    result = world.retriever().retrieve("customer name and customer city of customers", datasource="shop")
    assert result.datasource == "shop" and result.fallback is None
    assert result.datasources[0].id == "shop" and len(result.datasources) == 1
    assert table_names(result)[0] == "customers"
    customers = result.tables[0]
    assert "customer_id" in customers.columns and len(customers.columns) < 6
    data = result.to_json_dict()
    assert list(data) == ["question", "datasources", "datasource", "schema_version", "tables", "relationships",
                          "fallback", "confidence", "warnings", "timings_ms"]
    assert set(data["tables"][0]) == {"name", "schema", "score", "columns"}  # type: ignore[index]
    assert set(data["timings_ms"]) == {"embed", "vector", "total"}  # type: ignore[arg-type]


def test_routing_ranks_datasources_when_none_is_given(world: World) -> None:
    result = world.retriever().retrieve("Which patient saw which doctor at the appointment?")
    assert result.datasource == "clinic"
    ids = [d.id for d in result.datasources]
    assert ids[0] == "clinic" and set(ids) <= {"shop", "clinic", "school"}
    assert result.datasources[0].score >= result.datasources[-1].score


def test_routing_scores_only_its_best_candidates_in_full(world: World) -> None:
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES

    retriever = world.retriever(RetrieverConfig(route_candidates=1))
    result = retriever.retrieve("Which patient saw which doctor at the appointment?", tenant="acme")
    assert [d.id for d in result.datasources] == ["clinic", "shop"]
    assert result.datasources[0].score > 0.0 and result.datasources[1].score == 0.0  # not scored in full
    [found] = retriever.route_candidates([RetrievalRequest(question="patient_id of each doctor", tenant="acme")],
                                         count=2)
    assert found.failure is None and set(found.names) == {"clinic", "shop"} and found.rest == []
    assert found.features.shape == (2, len(ROUTE_FEATURES))
    row = dict(zip(found.names, found.features.tolist(), strict=True))
    col = ROUTE_FEATURES.index
    assert row["clinic"][col("mention")] == 1.0 and row["shop"][col("mention")] == 0.0  # patient_id is named
    assert row["clinic"][col("overlap_share")] > row["shop"][col("overlap_share")]
    assert row["clinic"][col("table_name_cov")] > row["shop"][col("table_name_cov")]
    assert row["clinic"][col("tables_named")] >= 1 and row["shop"][col("tables_named")] == 0  # "doctor"
    assert row["clinic"][col("columns_named")] > row["shop"][col("columns_named")]


def test_routing_adds_the_datasources_whose_vocabulary_holds_the_question(world: World) -> None:
    from nl2sql_assets.retrieval.routing import ROUTE_FEATURES

    world.add(generated_snapshot(4, datasource_id="garage", tenant="acme", entities=("mechanic", "vehicle")))
    world.add(generated_snapshot(5, datasource_id="farm", tenant="acme", entities=("field", "tractor")))
    question = [RetrievalRequest(question="which mechanic repaired the vehicle of each customer", tenant="acme")]
    [dense_only] = world.retriever(RetrieverConfig(route_lexical_candidates=0, route_meaning_candidates=0)).route_candidates(
        question, count=1)
    assert len(dense_only.names) == 1 and len(dense_only.rest) == 3
    [both] = world.retriever(RetrieverConfig(route_lexical_candidates=2, route_meaning_candidates=0)).route_candidates(
        question, count=1)
    # the dense choice, then the datasources holding the question's words, best first; "farm" holds none
    assert both.names[0] == dense_only.names[0]
    assert set(both.names) <= {"garage", "shop", "clinic"} and "farm" not in both.names
    assert "garage" in both.names and len(both.names) >= 2  # "mechanic", "vehicle": garage's words
    assert set(both.rest).isdisjoint(both.names)
    assert set(both.names) | set(both.rest) == {"shop", "clinic", "garage", "farm"}
    assert both.features.shape == (len(both.names), len(ROUTE_FEATURES))
    by_name = dict(zip(both.names, both.features.tolist(), strict=True))
    overlap = ROUTE_FEATURES.index("overlap")
    assert by_name["garage"][overlap] > 0.0
    # the vocabularies are kept, and read again once the indexed versions change
    retriever = world.retriever(RetrieverConfig(route_lexical_candidates=1, route_meaning_candidates=0,
                                                live_version_ttl_s=0))
    asked = [RetrievalRequest(question="which baker baked the loaf", tenant="acme")]
    [before] = retriever.route_candidates(asked, count=1)
    world.add(generated_snapshot(6, datasource_id="bakery", tenant="acme", entities=("baker", "loaf")))
    [after] = retriever.route_candidates(asked, count=1)
    assert "bakery" not in before.names + before.rest and "bakery" in after.names
    kept = retriever._router._vocabularies["acme"]  # the postings now name the new datasource's words
    assert ("bakery", world.schema_store.get_latest("bakery").schema_version) in kept[0]
    assert "bakery" in kept[2]["baker"] and kept[1] == 5


def test_routing_counts_a_wider_schemas_evidence_for_less(world: World) -> None:
    import math

    import numpy as np

    from nl2sql_assets.retrieval.routing import ROUTE_COLUMNS_CAP, ROUTE_FEATURES, ROUTE_MODEL

    world.add(generated_snapshot(9, datasource_id="wide", tenant="acme", n_tables=14))  # 83 columns
    [found] = world.retriever().route_candidates(
        [RetrievalRequest(question="patient_id of each doctor", tenant="acme")], count=3)
    col = ROUTE_FEATURES.index("log_columns")
    widths = {name: sum(len(t.columns) for t in world.schema_store.get_latest(name).tables) for name in found.names}
    assert set(found.names) == {"shop", "clinic", "wide"} and widths["wide"] > ROUTE_COLUMNS_CAP > widths["shop"]
    for name, row in zip(found.names, found.features, strict=True):
        assert row[col] == pytest.approx(math.log1p(min(widths[name], ROUTE_COLUMNS_CAP)))
    # the same evidence from a schema of ten times the columns scores lower: a wide schema
    # matches some of any question by chance
    narrow = found.features[0].copy()
    wide = narrow.copy()
    wide[col] = narrow[col] + math.log(10.0)
    assert ROUTE_MODEL.prob(np.vstack([wide]))[0] < ROUTE_MODEL.prob(np.vstack([narrow]))[0]


def test_evidence_and_hints_are_part_of_the_semantic_query(world: World) -> None:
    retriever = world.retriever()
    plain = retriever.retrieve("Show the rows", datasource="clinic")
    hinted = retriever.retrieve("Show the rows", datasource="clinic", evidence="rows refers to doctors.doctor_id",
                                hints=QueryHints(metrics=["doctor count"]))
    assert table_names(hinted)[0] == "doctors"
    assert plain.tables != hinted.tables or table_names(plain)[0] == "doctors"


def test_bridge_tables_and_relationships_join_the_selection(world: World) -> None:
    snap = world.schema_store.get_latest("shop")
    result = world.retriever(RetrieverConfig(recall_target=None, table_threshold=0.0, max_tables=5)).retrieve(
        "everything", datasource="shop")
    assert {t.name for t in result.tables} == {t.name for t in snap.tables}
    rels = {(r.from_table, r.to_table) for r in result.relationships}
    declared = {(t.name, fk.ref_table) for t in snap.tables for fk in t.foreign_keys}
    assert rels == declared
    for rel in result.relationships:
        table = next(t for t in result.tables if t.name == rel.from_table)
        assert set(rel.from_columns) <= set(table.columns)


def test_batch_equals_single_questions(world: World) -> None:
    retriever = world.retriever()
    requests = [RetrievalRequest(question="orders of customers", datasource="shop"),
                RetrievalRequest(question="doctor of each patient"),
                RetrievalRequest(question="books by course", tenant="globex")]
    batch = retriever.retrieve_batch(requests)
    single = [retriever.retrieve(r.question, datasource=r.datasource, tenant=r.tenant) for r in requests]
    for a, b in zip(batch, single, strict=True):
        assert a.model_dump(exclude={"timings_ms"}) == b.model_dump(exclude={"timings_ms"})



def test_a_batch_reads_the_visible_datasources_once_per_tenant_and_question_scope(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing reads which datasources a tenant sees once per batch, not once per question and
    again in the router (two schema-store reads, about 1 ms, per routed question over 157
    datasources); a scoped question with a tenant reads them once for both of its checks. The
    answers and the tenant isolation are those of separate calls."""
    retriever = world.retriever()
    routed = [RetrievalRequest(question="doctor of each patient", tenant="acme"),
              RetrievalRequest(question="orders of customers", tenant="acme"),
              RetrievalRequest(question="invoice of supplier")]
    single = [retriever.retrieve(r.question, tenant=r.tenant) for r in routed]
    reads: list[str | None] = []
    listed = world.schema_store.list_datasources
    monkeypatch.setattr(world.schema_store, "list_datasources", lambda tenant=None: reads.append(tenant) or listed(tenant))
    batch = retriever.retrieve_batch(routed)
    # acme's two questions: once for the tenant check of each, once for their routing; None: once
    assert sorted(reads, key=str) == [None, "acme", "acme", "acme"]
    assert [a.model_dump(exclude={"timings_ms"}) for a in batch] == [b.model_dump(exclude={"timings_ms"}) for b in single]
    assert {d.id for d in batch[0].datasources} <= {"shop", "clinic"}  # acme never sees globex's school
    reads.clear()
    retriever.retrieve("orders of customers", datasource="shop", tenant="acme")
    assert reads == ["acme"]
    with pytest.raises(UnknownTenantError):
        retriever.retrieve("orders of customers", tenant="nobody")

def test_authoritative_resolution_drops_hits_the_snapshot_lacks(world: World) -> None:
    real = generated_snapshot(4, datasource_id="stale", entities=("vehicle", "route", "agent"))
    ghost = Table(name="ghost_payments", primary_key=["id"],
                  columns=[Column(name="id"), Column(name="ghost_amount", description="payment amount of the ghost")])
    indexed = real.model_copy(update={"tables": [*real.tables, ghost]})
    version = world.add(real, chunks_from=indexed)   # the index holds a table the schema store does not
    result = world.retriever().retrieve("ghost payment amount", datasource="stale")
    assert result.schema_version == version and result.fallback is None
    assert "ghost_payments" not in table_names(result)
    assert set(table_names(result)) <= {t.name for t in real.tables}


def test_no_candidates_returns_the_full_schema(world: World) -> None:
    world.add(generated_snapshot(5, datasource_id="unindexed", n_tables=3), index=False)
    result = world.retriever().retrieve("anything at all", datasource="unindexed")
    snap = world.schema_store.get_latest("unindexed")
    assert result.fallback == "no_candidates"
    assert [(t.name, t.columns) for t in result.tables] == [(t.name, [c.name for c in t.columns]) for t in snap.tables]


def test_a_question_for_all_the_information_gets_whole_rows(world: World) -> None:
    """"All the information about customers" is answered with whole rows: every column of the
    table it is about, unless ``whole_rows`` is off."""
    question = "Show all the information about customers in Lyon"
    no_floor = RetrieverConfig(min_columns_sent=0)  # the floor alone would send these 5 columns
    whole = world.retriever(no_floor).retrieve(question, datasource="shop")
    snapshot = world.schema_store.get_snapshot("shop")
    every = [c.name for c in next(t for t in snapshot.tables if t.name == "customers").columns]
    assert table_names(whole)[0] == "customers" and sorted(whole.tables[0].columns) == sorted(every)
    budget = world.retriever(no_floor.model_copy(update={"whole_rows": False})).retrieve(question, datasource="shop")
    assert table_names(budget)[0] == "customers" and len(budget.tables[0].columns) < len(every)


def test_small_schema_shortcut_is_configurable(world: World) -> None:
    small = world.retriever(RetrieverConfig(small_schema_columns=1000)).retrieve("orders", datasource="shop")
    assert small.fallback == "small_schema" and len(small.tables) == 5
    assert world.retriever().retrieve("orders", datasource="shop").fallback is None


def test_vector_store_down_gives_the_full_schema_with_a_warning(world: World, tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path / "h"), "CHROMA_HOST": "127.0.0.1",
                                  "CHROMA_PORT": str(free_port())})
    down = build_vector_store(settings, world.embeddings)
    retriever = world.retriever(vector_store=down)
    scoped = retriever.retrieve("orders of customers", datasource="shop")
    assert scoped.fallback == "vector_store_unavailable" and scoped.warnings
    assert len(scoped.tables) == 5 and scoped.schema_version == world.schema_store.get_latest("shop").schema_version
    routed = retriever.retrieve("Which patient saw which doctor?", tenant="acme")
    assert routed.fallback == "vector_store_unavailable" and routed.tables
    assert routed.datasource in {"shop", "clinic"}


def test_open_breaker_gives_the_full_schema(world: World, tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path / "h"), "CHROMA_HOST": "127.0.0.1",
                                  "CHROMA_PORT": str(free_port())})
    breaker = CircuitBreaker("vector_store", failure_threshold=1, reset_timeout_s=3600)
    down = build_vector_store(settings, world.embeddings, breaker=breaker)
    retriever = world.retriever(vector_store=down)
    retriever.retrieve("orders", datasource="shop")
    assert breaker.state == "open"
    result = retriever.retrieve("orders", datasource="shop")
    assert result.fallback == "vector_store_unavailable"
    assert any("circuit breaker 'vector_store' is open" in w for w in result.warnings)


def test_model_mismatch_falls_back_with_the_message(world: World) -> None:
    other = EmbeddingService(HashEmbedder(32))
    from nl2sql_assets.indexing.vector_store import ChromaVectorStore

    mismatched = ChromaVectorStore(world.vector_store._client_factory, other)  # type: ignore[attr-defined]
    retriever = world.retriever(vector_store=mismatched)
    retriever.embeddings = other
    result = retriever.retrieve("orders", datasource="shop")
    assert result.fallback == "vector_store_unavailable"
    assert any("re-index" in w for w in result.warnings)


def test_bad_input_raises_clear_errors(world: World) -> None:
    retriever = world.retriever()
    with pytest.raises(RetrievalError, match="empty"):
        retriever.retrieve("   ")
    with pytest.raises(UnknownDatasourceError, match="nope"):
        retriever.retrieve("x", datasource="nope")
    with pytest.raises(UnknownTenantError, match="initech"):
        retriever.retrieve("x", tenant="initech")
    with pytest.raises(SchemaVersionNotFoundError, match="19990101000000_deadbeef"):
        retriever.retrieve("x", datasource="shop", schema_version="19990101000000_deadbeef")
    with pytest.raises(RetrievalError, match="needs a datasource"):
        retriever.retrieve("x", schema_version="19990101000000_deadbeef")
    with pytest.raises(UnknownDatasourceError):   # another tenant's datasource is unknown to this tenant
        retriever.retrieve("x", datasource="school", tenant="acme")


def test_an_older_version_is_resolved_when_asked(world: World) -> None:
    old = world.schema_store.get_latest("clinic")
    grown = generated_snapshot(2, datasource_id="clinic", tenant="acme",
                               entities=("patient", "doctor", "appointment", "branch", "invoice"), n_tables=5)
    new_version = world.add(grown)
    retriever = world.retriever()
    assert retriever.retrieve("patients", datasource="clinic").schema_version == new_version
    result = retriever.retrieve("invoices of patients", datasource="clinic", schema_version=old.schema_version)
    assert result.schema_version == old.schema_version
    assert "invoices" not in table_names(result)


TENANTS = ("acme", "globex", "initech")


@pytest.fixture(scope="module")
def tenant_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, dict[str, str]]]:
    w = World(tmp_path_factory.mktemp("tenants"), HashEmbedder(64))
    owner = {}
    for i in range(9):
        tenant = TENANTS[i % 3]
        ds = f"ds_{i}"
        w.add(generated_snapshot(100 + i, datasource_id=ds, tenant=tenant, n_tables=4))
        owner[ds] = tenant
    yield w, owner
    w.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tenant=st.sampled_from(TENANTS), words=st.lists(st.sampled_from(
    ["customer", "order", "patient", "doctor", "student", "book", "amount", "city", "status", "name"]),
    min_size=1, max_size=5), pick=st.integers(0, 8))
def test_a_tenant_only_ever_sees_its_own_datasources(tenant_world: tuple[World, dict[str, str]], tenant: str,
                                                     words: list[str], pick: int) -> None:
    world, owner = tenant_world
    retriever = world.retriever()
    question = " ".join(words)
    result = retriever.retrieve(question, tenant=tenant)
    assert result.datasource is not None and owner[result.datasource] == tenant
    assert result.datasources and all(owner[d.id] == tenant for d in result.datasources)
    own = world.schema_store.get_latest(result.datasource)
    assert {t.name for t in result.tables} <= {t.name for t in own.tables}
    ds = f"ds_{pick}"
    if owner[ds] == tenant:
        assert retriever.retrieve(question, tenant=tenant, datasource=ds).datasource == ds
    else:
        with pytest.raises(UnknownDatasourceError):
            retriever.retrieve(question, tenant=tenant, datasource=ds)


def test_chunks_rewritten_within_a_version_are_still_found(world: World) -> None:
    """A same-version refresh (new descriptions) stores changed chunks under new content-addressed
    record ids; the retriever reads only ids and scores back and must still place those hits."""
    retriever = world.retriever()
    question = "customer name and customer city of customers"
    before = retriever.retrieve(question, datasource="shop")
    snap = world.schema_store.get_latest("shop")
    described = snap.model_copy(update={"tables": [
        t.model_copy(update={"description": f"All about {t.name}.",
                             "columns": [c.model_copy(update={"description": f"The {c.name}."}) for c in t.columns]})
        for t in snap.tables]})
    version = str(snap.schema_version)
    world.vector_store.refresh_schema_chunks("shop", version, build_chunks(described.with_version(version)).chunks,
                                             tenant_id=snap.datasource.tenant)
    records = world.vector_store._conn.read_collection().get(include=[])["ids"]  # type: ignore[attr-defined]
    chunk_ids = {c.id for c in build_chunks(described.with_version(version)).chunks}
    assert not chunk_ids & set(records)  # record ids are content addresses, not chunk ids
    after = world.retriever().retrieve(question, datasource="shop")
    assert after.fallback is None and table_names(after)[0] == table_names(before)[0] == "customers"
    assert after.tables[0].score > 0.5


def test_a_snapshot_the_chunk_builder_refuses_falls_back_to_its_full_schema(world: World) -> None:
    """A table named ``a.b`` beside table ``b`` of schema ``a`` gives two chunks one id: indexing
    refuses the snapshot, and the retriever (which maps hits by chunk id) answers from the
    schema store instead of failing."""
    from nl2sql_assets.schema.models import DatasourceInfo, SchemaSnapshot
    from tests.retrieval_samples import CAPTURED

    tables = [Table(name="a.b", columns=[Column(name="x")]), Table(schema_name="a", name="b", columns=[Column(name="x")])]
    world.add(SchemaSnapshot.create(DatasourceInfo(id="clash", dialect="sqlite"), tables, CAPTURED), index=False)
    result = world.retriever().retrieve("x of b", datasource="clash")
    assert result.fallback == "no_candidates"
    assert sorted(t.name for t in result.tables) == ["a.b", "b"]


def test_the_column_price_in_the_config_reaches_the_selection(world: World) -> None:
    """``column_share_cost`` is what the retriever prices columns by: a cheap column sends more of
    the chosen tables' columns than the target alone, a price no need reaches sends what the target
    alone sends, and neither moves the tables."""
    world.add(generated_snapshot(9, datasource_id="club", tenant="acme", entities=("member", "visit", "coach")))
    question = "Which members visited a coach last month?"

    def sent(cost: float | None) -> tuple[list[str], int]:
        config = RetrieverConfig(min_columns_sent=0, column_recall_target=0.5, column_share_cost=cost)
        result = world.retriever(config).retrieve(question, datasource="club")
        return table_names(result), sum(len(t.columns) for t in result.tables)

    alone, cheap, dear = sent(None), sent(0.01), sent(1000.0)
    assert alone[0] == cheap[0] == dear[0]
    assert cheap[1] > alone[1] and dear == alone


def test_learned_word_association_sends_the_column_a_question_implies(world: World) -> None:
    """"Female members" needs ``sex`` though no word of the question names it: the shipped word
    association raises it (the HashEmbedder knows no meaning); with ``word_association`` off it is not sent."""
    filler = ("locker_number", "tariff_band", "parking_bay", "shoe_size", "towel_count", "guest_passes",
              "referral_code", "newsletter_opt", "coach_note", "class_quota", "renewal_month", "pool_lane")
    cols = [Column(name="member_id", ordinal=1, declared_type="INTEGER", type_family="integer", is_primary_key=True),
            Column(name="member_name", ordinal=2, declared_type="TEXT", type_family="text"),
            Column(name="sex", ordinal=3, declared_type="TEXT", type_family="text")]
    cols += [Column(name=n, ordinal=4 + i, declared_type="TEXT", type_family="text") for i, n in enumerate(filler)]
    snapshot = generated_snapshot(9, datasource_id="club", tenant="acme", entities=("visit", "coach"))
    snapshot = snapshot.model_copy(update={"tables": [Table(name="members", primary_key=["member_id"], columns=cols),
                                                      *snapshot.tables]})
    world.add(snapshot)
    question = "How many female members are there?"
    lean = RetrieverConfig(min_columns_sent=0, column_recall_target=0.5)
    on = world.retriever(lean).retrieve(question, datasource="club")
    off = world.retriever(lean.model_copy(update={"word_association": False})).retrieve(question, datasource="club")
    assert table_names(on)[0] == table_names(off)[0] == "members"
    assert "sex" in on.tables[0].columns and "sex" not in off.tables[0].columns
    every = RetrieverConfig(min_columns_sent=0, column_recall_target=0.999)  # every column, likeliest first
    ranked = world.retriever(every).retrieve(question, datasource="club").tables[0].columns
    assert ranked[0] == "sex"
