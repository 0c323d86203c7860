"""ChromaVectorStore on an embedded Chroma with a hash embedder: refresh, atomicity, search, tenancy."""

from __future__ import annotations

import json
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import EmbeddingDimensionMismatchError, EmbeddingError
from nl2sql_assets.indexing import exact_search
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, SearchFilter, chunks_digest
from nl2sql_assets.indexing.vector_store import (
    OPEN_GENERATION,
    ChromaVectorStore,
    build_vector_store,
    collection_name_for,
)
from tests.chunk_samples import CachingService, FailingProvider, shop_snapshot, wide_snapshot
from tests.fakes import HashEmbedder


def new_client(path: Path) -> chromadb.api.ClientAPI:
    return chromadb.PersistentClient(path=str(path), settings=ChromaSettings(anonymized_telemetry=False))


@pytest.fixture
def client(tmp_path: Path) -> chromadb.api.ClientAPI:
    return new_client(tmp_path / "chroma")


def make_store(client: chromadb.api.ClientAPI, *, dim: int = 64, cache: bool = False,
               **kwargs: object) -> tuple[ChromaVectorStore, CachingService]:
    service = CachingService(HashEmbedder(dim), cache=cache)
    return ChromaVectorStore(client, service, **kwargs), service  # type: ignore[arg-type]


def refresh(store: ChromaVectorStore, chunk_set: ChunkSet, **kwargs: object):  # noqa: ANN201
    return store.refresh_schema_chunks(chunk_set.datasource_id, chunk_set.schema_version, chunk_set.chunks,
                                       tenant_id=chunk_set.tenant_id, **kwargs)  # type: ignore[arg-type]


def texts_of(store: ChromaVectorStore, ds: str, version: str) -> dict[str, str]:
    return {c.id: c.document for c in store.get_chunks(ds, version)}


def test_first_refresh_stores_every_chunk_and_sets_the_live_version(client: chromadb.api.ClientAPI) -> None:
    store, service = make_store(client)
    cs = build_chunks(shop_snapshot())
    report = refresh(store, cs)
    assert (report.total, report.upserted, report.unchanged, report.embedded) == (26, 26, 0, 26)
    assert store.live_version("shop") == cs.schema_version
    assert store.live_versions() == {"shop": cs.schema_version}
    assert store.list_ids("shop") == {c.id for c in cs.chunks}
    stored = store.get_chunks("shop", cs.schema_version)
    assert [s.id for s in stored] == sorted(c.id for c in cs.chunks)
    expected = {c.id: (c.get_page_content(), c.get_metadata()) for c in cs.chunks}
    for s in stored:
        assert (s.document, s.metadata) == expected[s.id]  # no store-internal keys leak out
    state = store.index_state("shop")
    assert state is not None and state.chunk_count == 26 and state.content_digest == chunks_digest(cs.chunks)
    assert store.stored_identity() == service.identity


def test_collection_is_cosine_with_identity_and_no_embedding_function(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot()))
    coll = client.get_collection("nl2sql_schema", embedding_function=None)  # type: ignore[arg-type]
    assert coll.configuration["hnsw"]["space"] == "cosine"  # type: ignore[index]
    assert coll.configuration.get("embedding_function") is None
    assert coll.metadata["provider"] == "hash" and coll.metadata["dimension"] == 64
    with pytest.raises(ValueError, match="embedding function"):
        coll.query(query_texts=["orders"], n_results=1)  # proves Chroma has no default model to fall back on


def test_unchanged_refresh_writes_and_embeds_nothing(client: chromadb.api.ClientAPI) -> None:
    store, service = make_store(client)
    cs = build_chunks(shop_snapshot())
    refresh(store, cs)
    before = service.documents_embedded
    report = refresh(store, cs)
    assert (report.unchanged, report.upserted, report.deleted, report.embedded) == (26, 0, 0, 0)
    assert service.documents_embedded == before
    assert store.count() == 26


def test_new_version_after_one_table_changes_embeds_only_that_tables_chunks(client: chromadb.api.ClientAPI) -> None:
    store, service = make_store(client)  # the service cache is off: reuse comes from the store itself
    v1, v2 = build_chunks(shop_snapshot()), build_chunks(shop_snapshot(extra_order_column=True))
    refresh(store, v1)
    service.documents_embedded = 0
    report = refresh(store, v2)
    assert report.embedded == 2 and service.documents_embedded == 2  # table:orders and the new column
    # shared records: the 25 unchanged chunks stay the records v1 wrote; only v1's old table:orders goes
    assert report.unchanged == 25 and report.upserted == 2 and report.deleted == 1
    assert store.live_version("shop") == v2.schema_version
    assert store.list_ids("shop") == {c.id for c in v2.chunks}  # v1 gone (default: keep only the new one)
    assert store.count() == 27


def test_metadata_only_change_reembeds_only_changed_texts(client: chromadb.api.ClientAPI) -> None:
    store, service = make_store(client)
    v1 = build_chunks(shop_snapshot())
    v1b = build_chunks(shop_snapshot(customer_comment="Buyers of the shop."))
    assert v1b.schema_version == v1.schema_version
    refresh(store, v1)
    changed = {c.id for c, o in zip(v1b.chunks, v1.chunks, strict=True) if c.content_hash != o.content_hash}
    service.documents_embedded = 0
    report = refresh(store, v1b)
    assert report.upserted == len(changed) == service.documents_embedded == 6
    assert report.unchanged == 20 and report.deleted == 6  # the replaced records: no version uses them
    assert texts_of(store, "shop", v1.schema_version) == {c.id: c.get_page_content() for c in v1b.chunks}
    assert store.count() == 26
    # changing back writes the old content under its freed content addresses: no id growth over time
    refresh(store, v1)
    assert store.list_ids("shop") == {c.id for c in v1.chunks} and store.count() == 26
    assert not any("#g" in r for r in store._conn.read_collection().get(include=[])["ids"])  # type: ignore[union-attr]


def test_failure_mid_refresh_keeps_the_previous_set_and_leaves_no_partial_chunks(
        client: chromadb.api.ClientAPI) -> None:
    good, _ = make_store(client)
    v1 = build_chunks(wide_snapshot(12))
    refresh(good, v1)
    old = texts_of(good, "wide", v1.schema_version)
    failing = CachingService(FailingProvider(HashEmbedder(64), fail_after=20), cache=False)
    store = ChromaVectorStore(client, failing, write_batch_size=8)  # type: ignore[arg-type]
    v2 = build_chunks(wide_snapshot(12, changed=frozenset(range(12))))  # every table changes
    with pytest.raises(EmbeddingError, match="injected"):
        refresh(store, v2)
    assert failing.provider.texts_seen > 8  # at least one batch was written before the failure
    assert store.live_version("wide") == v1.schema_version
    assert texts_of(store, "wide", v1.schema_version) == old
    assert store.list_ids("wide") == set(old)
    assert store.count() == len(old)  # the partial new version was removed
    hits = store.search("entity 3 attribute", k=5, where=SearchFilter(datasource_ids=["wide"]))
    assert hits and all(h.schema_version == v1.schema_version for h in hits)


def test_failure_in_a_same_version_refresh_keeps_the_old_texts(client: chromadb.api.ClientAPI) -> None:
    good, _ = make_store(client)
    v1 = build_chunks(shop_snapshot())
    refresh(good, v1)
    old = texts_of(good, "shop", v1.schema_version)
    failing = CachingService(FailingProvider(HashEmbedder(64), fail_after=3), cache=False)
    store = ChromaVectorStore(client, failing, write_batch_size=2)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError):
        refresh(store, build_chunks(shop_snapshot(customer_comment="Buyers.")))
    assert texts_of(store, "shop", v1.schema_version) == old
    assert store.count() == 26


def test_leftovers_of_an_interrupted_refresh_are_invisible_and_cleaned(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    v1 = build_chunks(shop_snapshot())
    refresh(store, v1)
    gen = store.index_state("shop").generation  # type: ignore[union-attr]
    coll = client.get_collection("nl2sql_schema", embedding_function=None)  # type: ignore[arg-type]
    # what a crash between writing and flipping leaves: a record of the next generation and a retired one
    ghost = v1.chunks[1]
    meta = {**ghost.get_metadata(), "chunk_id": ghost.id, "valid_from": gen + 1, "valid_to": OPEN_GENERATION}
    coll.upsert(ids=[ghost.id + "#ghost"], embeddings=[[1.0] + [0.0] * 63], metadatas=[meta], documents=["GHOST"])
    half_retired = coll.get(where={"chunk_id": v1.chunks[2].id}, include=[])["ids"][0]
    coll.update(ids=[half_retired], metadatas=[{"valid_to": gen + 1}])
    assert "GHOST" not in texts_of(store, "shop", v1.schema_version).values()
    report = refresh(store, v1)
    assert report.unchanged == 26 and store.count() == 26
    assert coll.get(ids=[half_retired])["metadatas"][0]["valid_to"] == OPEN_GENERATION  # type: ignore[index]


def test_retention_keeps_listed_versions_and_deletes_the_rest(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    v1 = build_chunks(shop_snapshot())
    v2 = build_chunks(shop_snapshot(extra_order_column=True))
    v3 = build_chunks(shop_snapshot(extra_order_column=True, metrics=False, customer_comment=None,
                                    captured_at=shop_snapshot().captured_at.replace(year=2027)))
    refresh(store, v1)
    refresh(store, v2, keep_versions=[v1.schema_version])
    assert store.list_ids("shop", v1.schema_version) == {c.id for c in v1.chunks}
    assert store.list_ids("shop") == {c.id for c in v1.chunks} | {c.id for c in v2.chunks}
    hits = store.search("orders", k=50, where=SearchFilter(datasource_ids=["shop"]))
    assert {h.schema_version for h in hits} == {v2.schema_version}  # default: the live version only
    old = store.search("orders", k=50, where=SearchFilter(versions={"shop": v1.schema_version}))
    assert old and {h.schema_version for h in old} == {v1.schema_version}
    report = refresh(store, v3, keep_versions=[v2.schema_version])
    assert report.deleted == len(contents(v1) - contents(v2) - contents(v3))  # records only v1 used
    assert store.list_ids("shop", v1.schema_version) == set()
    assert store.delete_versions("shop", [v2.schema_version]) == len(contents(v2) - contents(v3))
    assert store.list_ids("shop") == {c.id for c in v3.chunks}
    assert store.delete_versions("shop", [v3.schema_version]) == len(v3.chunks)
    assert store.live_version("shop") is None and store.live_versions() == {}
    assert store.search("orders", k=5) == []


def contents(cs: ChunkSet) -> set[tuple[str, str]]:
    """A version's chunks as (identity without the version, content hash): what one shared record holds."""
    return {(c.id.split(":", 2)[2], c.content_hash) for c in cs.chunks}


def test_make_live_false_writes_a_version_without_moving_the_pointer(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    v1, v2 = build_chunks(shop_snapshot()), build_chunks(shop_snapshot(extra_order_column=True))
    refresh(store, v2)
    refresh(store, v1, make_live=False)
    assert store.live_version("shop") == v2.schema_version
    assert store.list_ids("shop", v2.schema_version) == {c.id for c in v2.chunks}
    assert store.list_ids("shop", v1.schema_version) == {c.id for c in v1.chunks}


def test_delete_datasource(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot()))
    refresh(store, build_chunks(shop_snapshot(datasource_id="other", tenant="acme")))
    assert store.delete_datasource("shop") == 26
    assert store.live_versions() == {"other": store.live_version("other")} and store.count() == 26


def test_tenant_filter_only_sees_that_tenants_chunks(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot(datasource_id="shop_a", tenant="acme")))
    refresh(store, build_chunks(shop_snapshot(datasource_id="shop_b", tenant="globex")))
    for tenant, ds in (("acme", "shop_a"), ("globex", "shop_b")):
        hits = store.search("customers email", k=40, where=SearchFilter(tenant_id=tenant))
        assert hits and {h.datasource_id for h in hits} == {ds}
        assert {h.metadata["tenant_id"] for h in hits} == {tenant}
        # naming the other tenant's datasource explicitly still finds nothing
        other = "shop_b" if ds == "shop_a" else "shop_a"
        assert store.search("customers", k=5, where=SearchFilter(tenant_id=tenant, datasource_ids=[other])) == []
    assert store.live_versions("acme").keys() == {"shop_a"}
    assert store.search("customers", k=5, where=SearchFilter(tenant_id="nobody")) == []


def test_filters_by_chunk_type_and_table(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot()))
    cols = store.search("address", k=50, where=SearchFilter(chunk_types=["schema.column"], tables=["orders"]))
    assert cols and {(h.chunk_type, h.metadata["table"]) for h in cols} == {("schema.column", "orders")}
    rels = store.search("join", k=50, where=SearchFilter(chunk_types=["schema.relationship"], tables=["addresses"]))
    assert len(rels) == 2 and all(json.loads(str(h.metadata["join_pairs"])) for h in rels)
    assert store.search("x", k=3, where=SearchFilter(chunk_types=[])) == []


def test_scores_are_cosine_similarities_best_first(client: chromadb.api.ClientAPI) -> None:
    store, service = make_store(client)
    cs = build_chunks(shop_snapshot())
    refresh(store, cs)
    target = next(c for c in cs.chunks if c.id.endswith(":metric:revenue"))
    vec = service.embed_query(target.get_page_content())
    hits = store.search(vec, k=5)
    assert hits[0].id == target.id and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    batched = store.search_many([vec, target.get_page_content()], k=5)
    assert [h.id for h in batched[0]] == [h.id for h in hits] == [h.id for h in batched[1]]


def test_search_without_documents_keeps_ids_scores_and_metadata(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot()))
    store.search_many(["order total"], k=8)  # from the second search on, both are ranked from the kept set
    full = store.search_many(["order total", "customer email"], k=8)
    lean = store.search_many(["order total", "customer email"], k=8, documents=False)
    for with_docs, without in zip(full, lean, strict=True):
        assert [(h.id, h.metadata) for h in without] == [(h.id, h.metadata) for h in with_docs]
        assert [h.score for h in without] == pytest.approx([h.score for h in with_docs])
        assert all(h.document for h in with_docs) and all(h.document == "" for h in without)


def test_scores_only_search_matches_the_full_search_including_rewritten_chunks(
        client: chromadb.api.ClientAPI) -> None:
    """Ids and scores without metadata: the same chunks, order and scores as ``search_many``, also
    for content that came back while its older record is kept (stored as ``<address>#g<generation>``)."""
    store, _ = make_store(client)
    v1 = build_chunks(shop_snapshot())
    v2 = build_chunks(shop_snapshot(customer_comment="Buyers of the shop."))
    v3 = build_chunks(shop_snapshot(captured_at=shop_snapshot().captured_at.replace(year=2027)))
    refresh(store, v1)
    refresh(store, v2.model_copy(update={"schema_version": "v2", "chunks": [
        c.model_copy(update={"schema_version": "v2", "id": c.id.replace(v1.schema_version, "v2")})
        for c in v2.chunks]}), keep_versions=[v1.schema_version])
    refresh(store, v3, keep_versions=[v1.schema_version, "v2"])  # v1's texts again, v1 still kept
    records = store._conn.read_collection().get(include=[])["ids"]  # type: ignore[union-attr]
    assert any("#g" in r for r in records)  # some chunks now live under a generation suffix
    texts = ["customer email", "order total"]
    full = store.search_many(texts, k=10, documents=False)
    store.search_scores_many(texts, k=1, where=SearchFilter(chunk_types=["schema.column", "schema.table"]))
    lean = store.search_scores_many(texts, k=10, where=SearchFilter(chunk_types=["schema.column", "schema.table"]))
    full_filtered = store.search_many(texts, k=10, where=SearchFilter(chunk_types=["schema.column", "schema.table"]))
    for hits, scores in zip(full_filtered, lean, strict=True):
        assert [h.id for h in hits] == [s.record_id for s in scores]
        assert [h.score for h in hits] == pytest.approx([s.score for s in scores])
    assert {s.record_id for row in lean for s in row} <= {c.id for c in v3.chunks}  # named as v3's chunks
    assert len(full) == 2 and store.search_scores_many([], k=3) == []
    with pytest.raises(ValueError, match="k must be"):
        store.search_scores_many(texts, k=0)


def test_many_queries_times_many_hits_are_split_below_sqlites_variable_limit(
        client: chromadb.api.ClientAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma reads a query call's hits back in one SQLite statement (at most 32,766 variables):
    a batch of 400 query texts x 100 hits (40,000) once failed as a whole with "too many SQL
    variables", and every question of the batch fell back to the full schema. Asked of Chroma
    (the exact batch path turned off), then by the default path, which ranks such a batch itself."""
    store, service = make_store(client)
    chunks = build_chunks(wide_snapshot(30))
    refresh(store, chunks)
    assert len(chunks.chunks) >= 100
    texts = [f"entity {i % 30} attr {i}" for i in range(400)]
    with monkeypatch.context() as patched:
        patched.setattr(exact_search, "MIN_QUERIES", len(texts) + 1)
        patched.setattr(store, "_sets", None)  # nor the small sets kept for single searches
        split = store.search_many(texts, k=100, documents=False)
        assert len(split) == 400 and all(len(hits) == 100 for hits in split)
        for i in (0, 163, 399):  # each text's hits are its own, in the same order as asked alone
            assert [h.id for h in split[i]] == [h.id for h in store.search(texts[i], k=100)]
    many = store.search_many(texts, k=100, documents=False)
    assert len(many) == 400 and all(len(hits) == 100 for hits in many)
    stored = np.asarray(service.embed_documents([c.get_page_content() for c in chunks.chunks]).vectors)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    for i in (0, 163, 399):  # each text's hits are its own: the 100 nearest of its own vector
        asked = np.asarray(service.embed_query(texts[i]))
        sims = stored @ (asked / np.linalg.norm(asked))
        nearest = [(chunks.chunks[j].id, float(sims[j])) for j in np.argsort(-sims, kind="stable")[:100]]
        assert_same_ranking([(h.id, h.score) for h in many[i]], nearest)


def assert_same_ranking(hits: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """The same scores rank by rank and the same ids, up to the order of equal scores (last-bit
    differences may reorder ties) and which of the ids tied at the last rank made the cut."""
    assert [s for _, s in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
    last = expected[-1][1] if expected else 0.0
    assert {i for i, s in hits if s > last + 1e-5} == {i for i, s in expected if s > last + 1e-5}


def test_mmr_returns_k_diverse_hits_from_fetch_k(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(wide_snapshot(30)))
    plain = store.search("entity 7 attr", k=5)
    pool = {h.id for h in store.search("entity 7 attr", k=20)}
    diverse = store.search("entity 7 attr", k=5, mmr=True)
    assert len(diverse) == 5 and len({h.id for h in diverse}) == 5
    assert {h.id for h in diverse} <= pool  # chosen among the fetch_k = 4*k nearest
    assert diverse[0].id == plain[0].id  # the most relevant one always comes first
    assert [h.id for h in diverse] != [h.id for h in plain]
    # plain top-5 holds two near-identical column chunks of entity_010; MMR keeps only one of them
    def t10(hits: list) -> int:  # noqa: ANN001
        return sum(1 for h in hits if h.metadata["table"] == "entity_010" and h.chunk_type == "schema.column")

    assert t10(plain) == 2 and t10(diverse) == 1
    pure = store.search("entity 7 attr", k=5, mmr=True, lambda_mult=1.0)
    assert [round(h.score, 5) for h in pure] == [round(h.score, 5) for h in plain]  # lambda 1: relevance only


def test_bad_search_input_is_rejected(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    refresh(store, build_chunks(shop_snapshot()))
    with pytest.raises(ValueError, match="k must be"):
        store.search("x", k=0)
    with pytest.raises(ValueError, match="64 finite floats"):
        store.search(np.ones(3, dtype=np.float32), k=1)
    with pytest.raises(ValueError, match="lambda_mult"):
        store.search("x", k=1, mmr=True, lambda_mult=1.5)


def test_chunks_of_another_datasource_or_tenant_are_rejected(client: chromadb.api.ClientAPI) -> None:
    store, _ = make_store(client)
    cs = build_chunks(shop_snapshot())
    with pytest.raises(ValueError, match="belongs to shop@"):
        store.refresh_schema_chunks("sales", cs.schema_version, cs.chunks, tenant_id="acme")
    with pytest.raises(ValueError, match="tenant 'acme'"):
        store.refresh_schema_chunks("shop", cs.schema_version, cs.chunks, tenant_id="globex")
    with pytest.raises(ValueError, match="duplicate chunk id"):
        store.refresh_schema_chunks("shop", cs.schema_version, cs.chunks + cs.chunks[:1], tenant_id="acme")


def test_dimension_mismatch_is_raised_and_a_reindex_recovers(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    old_store, _ = make_store(new_client(path), dim=64)
    cs = build_chunks(shop_snapshot())
    refresh(old_store, cs)
    new_store, _ = make_store(new_client(path), dim=32)
    with pytest.raises(EmbeddingDimensionMismatchError, match="re-index") as info:
        new_store.search("orders", k=3)
    assert info.value.expected == "hash/bag-of-words/32" and info.value.actual == "hash/bag-of-words/64"
    # pointers and ids stay readable for audits; only searching needs comparable vectors
    assert new_store.live_versions() == {"shop": cs.schema_version}
    assert new_store.list_ids("shop") == {c.id for c in cs.chunks}
    with pytest.raises(EmbeddingDimensionMismatchError):
        new_store.search_many(["orders", "customers"], k=3)
    report = refresh(new_store, cs)
    assert report.embedded == 26 and report.reused == 0
    assert new_store.stored_identity().dimension == 32  # type: ignore[union-attr]
    assert new_store.search("orders", k=3) and new_store.count() == 26


def test_build_vector_store_uses_nl2sql_home(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path / "home")})
    store = build_vector_store(settings, CachingService(HashEmbedder(16)))  # type: ignore[arg-type]
    assert not (tmp_path / "home").exists()  # nothing happens until the first call
    refresh(store, build_chunks(shop_snapshot()))
    assert (tmp_path / "home" / "chroma").is_dir()
    assert store.breaker.name == "vector_store" and "chroma at" in store.where


def test_collection_names_are_validated() -> None:
    assert collection_name_for("a b/c") == "a_b_c"
    with pytest.raises(ValueError, match="invalid vector collection name"):
        collection_name_for("x")


def test_metrics_count_refresh_outcomes_searches_and_breaker_state(client: chromadb.api.ClientAPI) -> None:
    from nl2sql_assets.metrics import MetricsRegistry

    metrics = MetricsRegistry()
    store = ChromaVectorStore(client, CachingService(HashEmbedder(64)), metrics=metrics)  # type: ignore[arg-type]
    refresh(store, build_chunks(shop_snapshot()))
    refresh(store, build_chunks(shop_snapshot(extra_order_column=True)))
    store.search("orders", k=3)
    with pytest.raises(ValueError):
        store.search("orders", k=0)
    labels = {"datasource": "shop"}
    assert metrics.value("vector_refresh_chunks_total", {**labels, "outcome": "embedded"}) == 26 + 2
    assert metrics.value("vector_refresh_chunks_total", {**labels, "outcome": "unchanged"}) == 25
    assert metrics.value("vector_refresh_chunks_total", {**labels, "outcome": "deleted"}) == 1
    assert metrics.value("vector_refresh_seconds", labels) == 2
    assert metrics.value("vector_search_seconds") == 1
    assert metrics.value("circuit_breaker_state", {"breaker": "vector_store"}) == 0
