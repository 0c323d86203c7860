"""The vector store with the real model on real Chroma: embedded (PersistentClient) and a `chroma run` server."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import EmbeddingDimensionMismatchError, EmbeddingError, VectorStoreUnavailableError
from nl2sql_assets.indexing.breaker import CircuitBreaker, CircuitOpenError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, SearchFilter
from nl2sql_assets.indexing.vector_store import ChromaVectorStore, build_vector_store
from tests.chroma_server import ChromaServer, free_port, start_or_skip
from tests.chunk_samples import (
    PII_VALUES,
    CachingService,
    FailingProvider,
    embedding_service_for,
    model_provider,  # noqa: F401 - fixture
    shop_snapshot,
    wide_snapshot,
)
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.slow

CHROMA_SETTINGS = ChromaSettings(anonymized_telemetry=False)
DEFAULT_EF_DIR = Path.home() / ".cache" / "chroma" / "onnx_models"


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = start_or_skip(ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data"))
    yield server
    server.stop()


ClientFactory = Callable[[], chromadb.api.ClientAPI]


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def new_client(request: pytest.FixtureRequest, tmp_path: Path) -> ClientFactory:
    """A factory of clients to one Chroma: a PersistentClient path, or the shared server."""
    if request.param == "embedded":
        path = str(tmp_path / "chroma")
        return lambda: chromadb.PersistentClient(path=path, settings=CHROMA_SETTINGS)
    server: ChromaServer = request.getfixturevalue("chroma_server")
    return lambda: chromadb.HttpClient(host=server.host, port=server.port, settings=CHROMA_SETTINGS)


@pytest.fixture
def collection() -> str:
    """A collection name of its own, so tests sharing the server never see each other."""
    return f"t_{uuid.uuid4().hex[:12]}"


def refresh(store: ChromaVectorStore, chunk_set: ChunkSet, **kwargs: object):  # noqa: ANN201
    return store.refresh_schema_chunks(chunk_set.datasource_id, chunk_set.schema_version, chunk_set.chunks,
                                       tenant_id=chunk_set.tenant_id, **kwargs)  # type: ignore[arg-type]


def test_semantic_search_with_the_real_model(new_client: ClientFactory, collection: str,
                                             model_provider: object, tmp_path: Path) -> None:
    service = embedding_service_for(model_provider, tmp_path / "cache")
    store = ChromaVectorStore(new_client(), service, collection_name=collection)  # type: ignore[arg-type]
    cs = build_chunks(shop_snapshot(description="Orders, customers and payments of the web shop"))
    report = refresh(store, cs)
    assert report.total == report.upserted == report.embedded == len(cs.chunks)
    assert store.stored_identity() == service.identity
    hits = store.search("email address of a customer", k=3, where=SearchFilter(chunk_types=["schema.column"]))
    assert hits[0].id.endswith("column:customers.email")
    hits = store.search("which city is the shipment delivered to", k=5, where=SearchFilter(tenant_id="acme"))
    assert any(h.metadata["table"] == "addresses" for h in hits)
    mmr = store.search("orders total", k=4, where=SearchFilter(tenant_id="acme"), mmr=True)
    assert len(mmr) == 4 and all(0.0 < h.score <= 1.0001 for h in mmr)
    for chunk in store.get_chunks("shop", cs.schema_version):
        assert not any(v in chunk.document for v in PII_VALUES)


def test_incremental_refresh_embeds_only_the_changed_tables_chunks(new_client: ClientFactory, collection: str,
                                                                   model_provider: object, tmp_path: Path) -> None:
    store = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c1"),  # type: ignore[arg-type]
                              collection_name=collection)
    v1 = build_chunks(wide_snapshot(12))
    refresh(store, v1)
    # a new process: empty embedding cache, the store's own vectors are reused
    fresh = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c2"),  # type: ignore[arg-type]
                              collection_name=collection)
    v2 = build_chunks(wide_snapshot(12, changed=frozenset({7})))
    report = refresh(fresh, v2)
    assert report.embedded == 2  # entity_007's table chunk and its added column
    # the other chunks are the records v1 wrote, now shared by both versions: nothing rewritten
    assert report.embedded + report.from_cache + report.reused == report.upserted == 2
    assert report.unchanged == len(v2.chunks) - 2
    assert fresh.live_version("wide") == v2.schema_version
    assert fresh.list_ids("wide") == {c.id for c in v2.chunks}


def test_failure_mid_refresh_keeps_the_old_set_readable(new_client: ClientFactory, collection: str,
                                                        model_provider: object, tmp_path: Path) -> None:
    good = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c1"),  # type: ignore[arg-type]
                             collection_name=collection)
    v1 = build_chunks(wide_snapshot(10))
    refresh(good, v1)
    before = {c.id: c.document for c in good.get_chunks("wide", v1.schema_version)}
    failing = embedding_service_for(FailingProvider(model_provider, fail_after=12), tmp_path / "c2")
    bad = ChromaVectorStore(new_client(), failing, collection_name=collection, write_batch_size=4)  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError):
        refresh(bad, build_chunks(wide_snapshot(10, changed=frozenset(range(10)))))
    assert good.live_version("wide") == v1.schema_version
    assert {c.id: c.document for c in good.get_chunks("wide", v1.schema_version)} == before
    assert good.count() == len(before)
    assert good.search("entity attribute", k=3)


def test_dimension_mismatch_then_reindex_recovers(new_client: ClientFactory, collection: str,
                                                  model_provider: object, tmp_path: Path) -> None:
    real = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c"),  # type: ignore[arg-type]
                             collection_name=collection)
    cs = build_chunks(shop_snapshot())
    refresh(real, cs)
    other = ChromaVectorStore(new_client(), CachingService(HashEmbedder(64)),  # type: ignore[arg-type]
                              collection_name=collection)
    with pytest.raises(EmbeddingDimensionMismatchError, match="re-index") as info:
        other.search("orders", k=3)
    assert info.value.actual == real.identity.key
    refresh(other, cs)  # the re-index with the new provider recreates the collection
    assert other.search("orders", k=3) and other.stored_identity().dimension == 64  # type: ignore[union-attr]
    with pytest.raises(EmbeddingDimensionMismatchError):  # and now the old model is the stale one
        real.search("orders", k=3)


def test_tenants_only_see_their_own_chunks(new_client: ClientFactory, collection: str,
                                           model_provider: object, tmp_path: Path) -> None:
    store = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c"),  # type: ignore[arg-type]
                              collection_name=collection)
    refresh(store, build_chunks(shop_snapshot(datasource_id="a_shop", tenant="acme")))
    refresh(store, build_chunks(shop_snapshot(datasource_id="b_shop", tenant="globex")))
    for tenant, ds in (("acme", "a_shop"), ("globex", "b_shop")):
        hits = store.search_many(["customer email", "order total"], k=30, where=SearchFilter(tenant_id=tenant))
        assert all(h.datasource_id == ds and h.metadata["tenant_id"] == tenant for q in hits for h in q)
    assert store.live_versions("globex").keys() == {"b_shop"}


def test_no_default_embedding_function_runs(new_client: ClientFactory, collection: str, model_provider: object,
                                            tmp_path: Path) -> None:
    existed = DEFAULT_EF_DIR.exists()
    before = sorted(p.name for p in DEFAULT_EF_DIR.rglob("*")) if existed else []
    client = new_client()
    store = ChromaVectorStore(client, embedding_service_for(model_provider, tmp_path / "c"),  # type: ignore[arg-type]
                              collection_name=collection)
    refresh(store, build_chunks(shop_snapshot()))
    store.search("orders", k=3, mmr=True)
    coll = client.get_collection(collection, embedding_function=None)  # type: ignore[arg-type]
    assert coll.configuration.get("embedding_function") is None
    with pytest.raises(ValueError, match="embedding function"):
        coll.query(query_texts=["orders"], n_results=1)  # Chroma has no model of its own to fall back on
    assert DEFAULT_EF_DIR.exists() == existed
    assert (sorted(p.name for p in DEFAULT_EF_DIR.rglob("*")) if existed else []) == before


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.server
def test_breaker_opens_on_a_stopped_server_and_recovers(tmp_path: Path, model_provider: object) -> None:
    server = start_or_skip(ChromaServer(tmp_path / "data"))
    try:
        clock = ManualClock()
        breaker = CircuitBreaker("vector_store", failure_threshold=2, reset_timeout_s=30, clock=clock,
                                 failure_types=(VectorStoreUnavailableError,))
        settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path / "home"), "CHROMA_HOST": server.host,
                                      "CHROMA_PORT": str(server.port)})
        store = build_vector_store(settings, embedding_service_for(model_provider, tmp_path / "c"), breaker=breaker)
        cs = build_chunks(shop_snapshot())
        refresh(store, cs)
        assert store.search("orders", k=2)

        server.stop()
        for _ in range(2):
            with pytest.raises(VectorStoreUnavailableError, match=f"{server.host}:{server.port}") as info:
                store.search("orders", k=2)
            assert not isinstance(info.value, CircuitOpenError)
        assert breaker.state == "open"
        failures = breaker.consecutive_failures
        with pytest.raises(CircuitOpenError):
            store.search("orders", k=2)
        assert breaker.consecutive_failures == failures  # refused without trying the server

        server.start()  # same port, same data
        with pytest.raises(CircuitOpenError):  # still open until the timeout passes
            store.search("orders", k=2)
        clock.now += 31
        assert breaker.state == "half_open"
        hits = store.search("orders", k=2)  # the trial call succeeds
        assert hits and breaker.state == "closed"
        assert store.live_version("shop") == cs.schema_version
    finally:
        server.stop()


@pytest.mark.server
def test_unreachable_server_fails_clearly_not_at_construction(tmp_path: Path) -> None:
    port = free_port()
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "CHROMA_HOST": "127.0.0.1", "CHROMA_PORT": str(port)})
    store = build_vector_store(settings, CachingService(HashEmbedder(16)))  # type: ignore[arg-type]
    for _ in range(5):
        with pytest.raises(VectorStoreUnavailableError, match=f"chroma server 127.0.0.1:{port}"):
            store.search("x", k=1)
    with pytest.raises(CircuitOpenError, match="vector_store"):
        store.live_versions()
