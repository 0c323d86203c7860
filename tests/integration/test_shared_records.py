"""Shared records on real Chroma with the real model: one record per distinct chunk content
whatever the number of versions kept, exact per-version reads, retention of shared records,
migration from the previous layout, and atomicity of a refresh that fails half-way."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.errors import VectorStoreError
from nl2sql_assets.indexing import chroma_connection, chroma_store, exact_search
from nl2sql_assets.indexing.breaker import CircuitBreaker
from nl2sql_assets.indexing.chroma_connection import ChromaConnection
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, ModelIdentity, SearchFilter
from nl2sql_assets.indexing.vector_store import OPEN_GENERATION, ChromaVectorStore
from tests.chroma_server import ChromaServer, start_or_skip
from tests.chunk_samples import CAPTURED, embedding_service_for, model_provider, wide_snapshot  # noqa: F401

pytestmark = pytest.mark.slow
ClientFactory = Callable[[], "chromadb.api.ClientAPI"]


def chroma_settings() -> ChromaSettings:
    """Fresh settings per client: ``HttpClient`` writes its port into the object it is given."""
    return ChromaSettings(anonymized_telemetry=False)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = start_or_skip(ChromaServer(tmp_path_factory.mktemp("shared-records-server") / "data"))
    yield server
    server.stop()


@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.server)])
def new_client(request: pytest.FixtureRequest, tmp_path: Path) -> ClientFactory:
    """A factory of clients to one Chroma: a PersistentClient path, or this module's server."""
    if request.param == "embedded":
        path = str(tmp_path / "chroma")
        return lambda: chromadb.PersistentClient(path=path, settings=chroma_settings())
    server: ChromaServer = request.getfixturevalue("shared_server")
    return lambda: chromadb.HttpClient(host=server.host, port=server.port, settings=chroma_settings())


@pytest.fixture
def collection() -> str:
    """A collection of its own, so tests sharing the server never see each other."""
    return f"t_{uuid.uuid4().hex[:12]}"


def refresh(store: ChromaVectorStore, cs: ChunkSet, **kwargs: object):  # noqa: ANN201
    return store.refresh_schema_chunks(cs.datasource_id, cs.schema_version, cs.chunks, tenant_id=cs.tenant_id,
                                       **kwargs)  # type: ignore[arg-type]


def version(n: int, changed: Sequence[int] = ()) -> ChunkSet:
    """Version ``n`` of a 12-table schema in which the ``changed`` tables have a column more."""
    return build_chunks(wide_snapshot(12, changed=frozenset(changed), captured_at=CAPTURED.replace(day=n)))


def contents(*sets: ChunkSet) -> set[tuple[str, str]]:
    """Distinct (identity without the version, content hash): what one shared record holds."""
    return {(c.id.split(":", 2)[2], c.content_hash) for cs in sets for c in cs.chunks}


def texts(cs: ChunkSet) -> dict[str, str]:
    return {c.id: c.get_page_content() for c in cs.chunks}


def stored_texts(store: ChromaVectorStore, cs: ChunkSet) -> dict[str, str]:
    return {c.id: c.document for c in store.get_chunks(cs.datasource_id, cs.schema_version)}


def assert_serves_exactly(store: ChromaVectorStore, cs: ChunkSet) -> None:
    """Reads and searches of ``cs``'s version give exactly its chunks, named as its chunks."""
    assert stored_texts(store, cs) == texts(cs)
    assert store.list_ids(cs.datasource_id, cs.schema_version) == set(texts(cs))
    where = SearchFilter(versions={cs.datasource_id: cs.schema_version})
    hits = store.search("entity attribute parent", k=200, where=where)
    assert {h.id for h in hits} == set(texts(cs))
    assert {h.schema_version for h in hits} == {cs.schema_version}
    scores = store.search_scores_many(["entity attribute parent"], k=200, where=where)[0]
    assert {s.record_id for s in scores} == set(texts(cs))


@pytest.fixture
def store(new_client: ClientFactory, collection: str, model_provider: object,
          tmp_path: Path) -> ChromaVectorStore:
    return ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "cache"),  # type: ignore[arg-type]
                             collection_name=collection)


def test_unchanged_chunks_are_one_record_shared_by_every_retained_version(store: ChromaVectorStore) -> None:
    v1, v2, v3 = version(1), version(2, [3]), version(3, [3, 7])
    refresh(store, v1)
    r2 = refresh(store, v2, keep_versions=[v1.schema_version])
    assert (r2.upserted, r2.unchanged) == (2, len(v2.chunks) - 2)  # entity_003's table chunk and new column
    r3 = refresh(store, v3, keep_versions=[v1.schema_version, v2.schema_version])
    assert r3.upserted == 2 and r3.embedded <= 2
    # three versions, one record per distinct content: about 1x the chunk count, not 3x
    assert store.count() == len(contents(v1, v2, v3)) == len(v3.chunks) + 2
    for cs in (v1, v2, v3):
        assert_serves_exactly(store, cs)
    assert store.live_version("wide") == v3.schema_version
    live = store.search("entity attribute", k=200)  # default: the live version
    assert {h.schema_version for h in live} == {v3.schema_version}
    check = store.check_records("wide")
    assert (check.orphaned, check.leftovers, check.legacy) == ([], [], False)


def test_content_that_leaves_and_comes_back_is_a_new_record_and_every_version_stays_exact(
        store: ChromaVectorStore) -> None:
    """v1 and v3 hold entity_003 as it was, v2 changed it: one record cannot cover v1 and v3 but
    not v2 with one generation range, so v3 gets a record of its own (its vector is reused)."""
    v1, v2, v3 = version(1), version(2, [3]), version(3)
    refresh(store, v1)
    refresh(store, v2, keep_versions=[v1.schema_version])
    r3 = refresh(store, v3, keep_versions=[v1.schema_version, v2.schema_version])
    assert r3.upserted == 1 and r3.embedded == 0  # entity_003's table chunk again, from the stored vector
    coll = store._conn.read_collection()
    assert coll is not None
    assert sum("#g" in sid for sid in coll.get(include=[])["ids"]) == 1
    for cs in (v1, v2, v3):
        assert_serves_exactly(store, cs)
    # dropping v1 keeps everything v2 and v3 use, shared or not
    assert store.delete_versions("wide", [v1.schema_version]) == 1  # only v1's own entity_003 record
    assert stored_texts(store, v1) == {}
    for cs in (v2, v3):
        assert_serves_exactly(store, cs)
    assert store.check_records("wide").orphaned == []


def test_retention_deletes_only_records_no_retained_version_uses(store: ChromaVectorStore) -> None:
    v1, v2, v3, v4 = version(1), version(2, [3]), version(3, [3, 5]), version(4, [5])
    refresh(store, v1)
    refresh(store, v2, keep_versions=[v1.schema_version])
    refresh(store, v3, keep_versions=[v1.schema_version, v2.schema_version])
    assert store.count() == len(contents(v1, v2, v3))
    report = refresh(store, v4, keep_versions=[v3.schema_version])  # v1 and v2 leave
    # v4 brings entity_003 back as v1 had it: a new record (v1's still served v1 until the flip)
    assert report.upserted == 1
    assert report.deleted == len(contents(v1, v2) - contents(v3, v4)) + 1  # v1's entity_003 record too
    assert store.count() == len(contents(v3, v4))
    for cs in (v3, v4):
        assert_serves_exactly(store, cs)
    assert store.list_ids("wide", v1.schema_version) == store.list_ids("wide", v2.schema_version) == set()
    assert store.index_state("wide").versions.keys() == {v3.schema_version, v4.schema_version}  # type: ignore[union-attr]
    assert store.check_records("wide").orphaned == []
    # the same set again as a new version: no new generation, no write, the version maps to v4's
    v5 = version(5, [5])
    r5 = refresh(store, v5, keep_versions=[v4.schema_version])
    assert (r5.upserted, r5.deleted, r5.embedded) == (0, len(contents(v3) - contents(v4)), 0)
    state = store.index_state("wide")
    assert state is not None and state.versions[v5.schema_version] == state.versions[v4.schema_version]
    for cs in (v4, v5):
        assert_serves_exactly(store, cs)


# ---------------------------------------------------------------- migration from the previous layout


def write_previous_layout(store: ChromaVectorStore, cs: ChunkSet, *, generation: int = 1) -> None:
    """What the previous layout wrote: one record per chunk and version under the chunk id, a
    manifest record without ``layout`` and ``versions``."""
    coll = store._conn.write_collection()
    vectors = np.asarray(store.embeddings.embed_documents([c.get_page_content() for c in cs.chunks]).vectors)
    metas = [{**c.get_metadata(), "chunk_id": c.id, "valid_from": generation, "valid_to": OPEN_GENERATION}
             for c in cs.chunks]
    coll.upsert(ids=[c.id for c in cs.chunks], embeddings=vectors, metadatas=metas,  # type: ignore[arg-type]
                documents=[c.get_page_content() for c in cs.chunks])
    manifest = store._conn.manifest_collection(create=True)
    assert manifest is not None
    manifest.upsert(ids=[cs.datasource_id], embeddings=[[1.0]], metadatas=[{
        "tenant_id": cs.tenant_id, "live_version": cs.schema_version, "generation": generation,
        "model_key": store.identity.key, "chunk_count": len(cs.chunks), "content_digest": "",
        "updated_at": "2026-01-01T00:00:00+00:00"}])


class ReadingProvider:
    """The real model, plus a reader that reads the live version before every embedding batch:
    what a retriever sees while a refresh is in flight."""

    def __init__(self, inner: object, reader: ChromaVectorStore, live: ChunkSet, fail_after: int | None = None) -> None:
        self.inner, self.reader, self.live, self.fail_after = inner, reader, live, fail_after
        self.reads = 0

    @property
    def identity(self):  # noqa: ANN201
        return self.inner.identity  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        assert self.reader.live_version(self.live.datasource_id) == self.live.schema_version
        assert stored_texts(self.reader, self.live) == texts_of_live(self.live)
        hits = self.reader.search("entity attribute", k=200, where=SearchFilter(datasource_ids=["wide"]))
        assert {h.id for h in hits} == set(texts_of_live(self.live))
        self.reads += 1
        if self.fail_after is not None and self.reads > self.fail_after:
            raise VectorStoreError("injected: the refresh dies half-way")
        return self.inner.embed(texts)  # type: ignore[attr-defined,no-any-return]


def texts_of_live(cs: ChunkSet) -> dict[str, str]:
    return texts(cs)


def test_a_store_of_the_previous_layout_is_detected_and_migrated_while_its_live_version_serves(
        new_client: ClientFactory, collection: str, model_provider: object, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    old = ChromaVectorStore(new_client(), embedding_service_for(model_provider, tmp_path / "c0"),  # type: ignore[arg-type]
                            collection_name=collection)
    v1 = version(1)
    write_previous_layout(old, v1)
    reader = ChromaVectorStore(new_client(), old.embeddings, collection_name=collection)
    assert reader.index_state("wide").legacy  # type: ignore[union-attr]
    assert_serves_exactly(reader, v1)  # readers understand the previous layout
    assert reader.check_records("wide").legacy

    # a migration that dies half-way: nothing changes for readers, the previous layout keeps serving
    v2 = version(2, [3, 4, 5, 6, 7, 8])
    dying = ReadingProvider(model_provider, reader, v1, fail_after=1)
    failing = ChromaVectorStore(new_client(), embedding_service_for(dying, tmp_path / "c1"),  # type: ignore[arg-type]
                                collection_name=collection, write_batch_size=4)
    with pytest.raises(VectorStoreError, match="injected"):
        refresh(failing, v2)
    assert dying.reads == 2
    assert reader.index_state("wide").legacy  # type: ignore[union-attr]
    assert_serves_exactly(reader, v1)
    assert reader.count() == len(v1.chunks)  # the partial shared records were rolled back

    # the migration: detected with a message, the old live version served until the flip
    watching = ReadingProvider(model_provider, reader, v1)
    migrating = ChromaVectorStore(new_client(), embedding_service_for(watching, tmp_path / "c2"),  # type: ignore[arg-type]
                                  collection_name=collection, write_batch_size=4)
    with caplog.at_level(logging.WARNING, logger="nl2sql_assets.indexing.chroma_store"):
        report = refresh(migrating, v2)
    assert "previous layout" in caplog.text and "migrating" in caplog.text
    assert watching.reads >= 2  # read between batches, the old live version each time
    assert report.reused == len(v2.chunks) - 12 and report.embedded == 12  # unchanged texts keep their vectors
    state = reader.index_state("wide")
    assert state is not None and not state.legacy and state.live_version == v2.schema_version
    assert_serves_exactly(reader, v2)
    assert reader.count() == len(v2.chunks)  # the old records are gone
    check = reader.check_records("wide")
    assert (check.legacy, check.orphaned, check.leftovers) == (False, [], [])


# ---------------------------------------------------------------- a refresh that dies half-way


@pytest.mark.server
def test_a_refresh_cut_off_by_the_chroma_server_going_down_is_never_visible(
        tmp_path: Path, model_provider: object) -> None:
    """A real failure: the server stops after the first batch was written; the rollback cannot
    run either. After a restart readers see exactly the previous version; the next refresh
    removes what the dead one left."""
    server = start_or_skip(ChromaServer(tmp_path / "server"))
    try:
        def client():  # noqa: ANN202
            return chromadb.HttpClient(host=server.host, port=server.port,
                                       settings=chroma_settings())

        good = ChromaVectorStore(client, embedding_service_for(model_provider, tmp_path / "c0"))  # type: ignore[arg-type]
        v1, v2 = version(1), version(2, range(12))
        refresh(good, v1)

        class StopsTheServer:
            identity = model_provider.identity  # type: ignore[attr-defined]
            calls = 0

            def embed(self, batch: Sequence[str]) -> np.ndarray:
                self.calls += 1
                if self.calls == 2:  # the first batch is in Chroma now
                    server.stop()
                return model_provider.embed(batch)  # type: ignore[attr-defined,no-any-return]

        dying = ChromaVectorStore(client, embedding_service_for(StopsTheServer(), tmp_path / "c1"),  # type: ignore[arg-type]
                                  write_batch_size=8)
        with pytest.raises(VectorStoreError):
            refresh(dying, v2)
        server.start()
        reader = ChromaVectorStore(client, embedding_service_for(model_provider, tmp_path / "c2"))  # type: ignore[arg-type]
        assert reader.live_version("wide") == v1.schema_version
        assert reader.check_records("wide").leftovers  # the dead refresh's first batch is there...
        assert_serves_exactly(reader, v1)  # ...and invisible
        refresh(reader, v2)
        assert_serves_exactly(reader, v2)
        check = reader.check_records("wide")
        assert (check.orphaned, check.leftovers) == ([], [])
    finally:
        server.stop()


def test_a_search_over_many_datasources_sees_exactly_what_the_exact_filter_sees(
        store: ChromaVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above BROAD_FILTER_MIN datasources a search filters on ids and checks generations itself
    (Chroma is slow on a large $or of ranges): same hits as the exact filter, live versions only,
    also when invisible records crowd the answer and the exact filter has to be asked again. The
    sets a store keeps for searches asked again hold the same visible records, ranked exactly."""
    from nl2sql_assets.indexing import chroma_queries, chroma_store

    monkeypatch.setattr(store, "_sets", None)  # Chroma answers each search below, until the kept sets

    live: dict[str, str] = {}
    for i in range(chroma_queries.BROAD_FILTER_MIN + 2):
        cs = build_chunks(wide_snapshot(2, datasource_id=f"ds{i:02d}", captured_at=CAPTURED.replace(day=1)))
        refresh(store, cs)
        changed = build_chunks(wide_snapshot(2, datasource_id=f"ds{i:02d}", changed=frozenset({0, 1}),
                                             captured_at=CAPTURED.replace(day=2)))
        if i % 2 == 0:  # every table changed: the first version stays retained, not live
            refresh(store, changed, keep_versions=[cs.schema_version])
            cs = changed
        elif i % 4 == 1:  # written but not made live: readers of the live version must not see it
            refresh(store, changed, keep_versions=[cs.schema_version], make_live=False)
        live[cs.datasource_id] = cs.schema_version
    questions = ["table entity 000 with its columns", "added flag of entity one", "identifier"]

    some = SearchFilter(datasource_ids=sorted(live)[1:], chunk_types=["schema.table", "schema.column"])

    def searched() -> tuple[list[list[tuple[str, float]]], ...]:
        """Over every datasource (no Chroma filter then) and over all but one, of two chunk types
        (a filter on ids and types)."""
        hits = store.search_many(questions, k=60)
        narrow = store.search_many(questions, k=60, where=some)
        assert all(h.schema_version == live[h.datasource_id] for row in hits + narrow for h in row)
        assert all(h.datasource_id != "ds00" and h.chunk_type in some.chunk_types for row in narrow for h in row)
        scores = store.search_scores_many(questions, k=60)
        return tuple([[(h.id, round(h.score, 5)) for h in row] for row in rows] for rows in (hits, narrow)) + (
            [[(s.record_id, round(s.score, 5)) for s in row] for row in scores],)

    broad = searched()
    monkeypatch.setattr(chroma_store, "broad_fetch", lambda n: n)  # invisible hits leave too few: asked again
    asked_again = []

    def counting(*args: object) -> object:
        rows = chroma_queries.visible_rows(*args)  # type: ignore[arg-type]
        asked_again.append(rows is None)
        return rows

    monkeypatch.setattr(chroma_store, "visible_rows", counting)
    crowded = searched()
    assert any(asked_again) and not all(asked_again)
    monkeypatch.setattr(chroma_store, "broad_fetch", lambda n: max(1, n // 8))  # never enough: the exact filter
    asked_exactly = searched()
    monkeypatch.setattr(chroma_queries, "BROAD_FILTER_MIN", 10**6)  # the exact filter throughout
    exact = searched()

    def same(a: list[list[tuple[str, float]]], b: list[list[tuple[str, float]]], top: int = 30) -> bool:
        """The same best ``top`` hits with equal scores. Only the best: Chroma's filtered search is
        approximate (HNSW), so near the 60th hit either filter may miss a record the other finds;
        and chunks tied at the cut may come back either way (the datasources hold equal texts)."""
        for ra, rb in zip(a, b, strict=True):
            ra, rb = ra[:top], rb[:top]
            if [x[1] for x in ra] != [x[1] for x in rb]:
                return False
            cut = ra[-1][1]
            if {x for x in ra if x[1] > cut} != {x for x in rb if x[1] > cut}:
                return False
        return True

    assert all(same(x, y) and same(z, y) and same(w, y)
               for x, y, z, w in zip(broad, exact, crowded, asked_exactly, strict=True))
    assert all(len(row) == 60 for row in exact[0])
    monkeypatch.undo()
    searched()  # each of these searches is asked a second time below: then read and ranked here
    kept = searched()
    assert all(same(x, y) for x, y in zip(kept, exact, strict=True))
    assert len(store._sets._sets) == 2  # type: ignore[union-attr]  # the whole store (hits and scores), all but one


# ---------------------------------------------------------------- reads larger than one page


def test_versions_larger_than_a_read_page_are_read_evicted_and_audited_exactly(
        store: ChromaVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Metadata is read in pages; with a page of 7 records every read below crosses many pages."""
    monkeypatch.setattr(chroma_connection, "READ_PAGE", 7)
    v1, v2, v3 = version(1), version(2, [3]), version(3, [3, 5])
    refresh(store, v1)
    refresh(store, v2, keep_versions=[v1.schema_version])
    refresh(store, v3, keep_versions=[v1.schema_version, v2.schema_version])
    assert len(v1.chunks) > 5 * 7
    for cs in (v1, v2, v3):
        assert_serves_exactly(store, cs)
    assert store.delete_versions("wide", [v1.schema_version]) == len(contents(v1) - contents(v2, v3))
    assert store.count() == len(contents(v2, v3))
    for cs in (v2, v3):
        assert_serves_exactly(store, cs)
    assert store.check_records("wide").orphaned == []


def test_a_datasource_with_more_records_than_one_sqlite_query_takes_is_read_whole(tmp_path: Path) -> None:
    """One ``get`` of every metadata fails past ~32,000 records ("too many SQL variables")."""
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=chroma_settings())
    identity = ModelIdentity(provider="test", model="two-dimensional", dimension=2)
    conn = ChromaConnection(client, lambda: identity, collection_name="big_datasource",
                            breaker=CircuitBreaker("vector_store", failure_threshold=3), where="test")
    coll = conn.write_collection()
    n = 33_000
    for start in range(0, n, 5000):
        ids = [f"r{i:05d}" for i in range(start, min(n, start + 5000))]
        coll.add(ids=ids, embeddings=np.ones((len(ids), 2), dtype=np.float32),
                 metadatas=[{"datasource_id": "big", "valid_from": 1} for _ in ids])
    coll.add(ids=["other"], embeddings=np.ones((1, 2), dtype=np.float32), metadatas=[{"datasource_id": "small"}])
    ids, metas, _, _ = conn.records(coll, {"datasource_id": "big"})
    assert sorted(ids) == [f"r{i:05d}" for i in range(n)]
    assert all(m == {"datasource_id": "big", "valid_from": 1} for m in metas)
    assert len(conn.record_ids(coll, {"datasource_id": "big"})) == n
    picked = [f"r{i:05d}" for i in range(0, n, 3)]
    assert conn.records(coll, None, ids=picked)[0] == picked


def test_a_large_batch_of_searches_ranks_exactly(store: ChromaVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 queries or more under one exact filter are ranked from the stored vectors (exact_search):
    each query gets the k nearest of exactly the chunks the filter allows (version, chunk type),
    named and read as that version's. A single search is ranked here when the set is small enough
    to keep, else it goes to Chroma."""
    ranked_here: list[bool] = []

    def counted(*args: object, **kwargs: object) -> object:
        out = exact_search.exact_query(*args, **kwargs)  # type: ignore[arg-type]
        ranked_here.append(out is not None)
        return out

    monkeypatch.setattr(chroma_store, "exact_query", counted)
    v1, v2 = version(1), version(2, [3])
    refresh(store, v1)
    refresh(store, v2, keep_versions=[v1.schema_version])
    texts_asked = [f"{word} of entity {i:03d}" for i in range(40)
                   for word in ("attribute", "parent")][:exact_search.MIN_QUERIES + 6]
    asked = store.embeddings.embed_queries(texts_asked)
    for where, allowed, k in (
            (SearchFilter(versions={"wide": v1.schema_version}, chunk_types=["schema.table"]),
             [c for c in v1.chunks if c.type == "schema.table"], 3),
            (SearchFilter(), v2.chunks, 5), (SearchFilter(datasource_ids=["wide"]), v2.chunks, 500)):
        docs = [c.get_page_content() for c in allowed]
        sims = asked @ np.asarray(store.embeddings.embed_documents(docs).vectors).T
        batch = store.search_many(texts_asked, k=k, where=where)
        expected_doc = {c.id: doc for c, doc in zip(allowed, docs, strict=True)}
        for row, hits in zip(sims, batch, strict=True):
            nearest = np.argsort(-row, kind="stable")[:k]
            assert [h.score for h in hits] == pytest.approx([float(row[j]) for j in nearest], abs=1e-5)
            cut = float(row[nearest[-1]]) + 1e-5  # ids tied at the last rank may differ
            assert {h.id for h in hits if h.score > cut} == {allowed[j].id for j in nearest if row[j] > cut}
            assert all(h.document == expected_doc[h.id] and h.id.startswith(f"wide:{h.schema_version}:")
                       for h in hits)
    assert len(store.search("attribute of entity 003", k=3)) == 3
    store._sets = exact_search.RecordSets(max_set=10)
    assert len(store.search("attribute of entity 003", k=3)) == 3
    assert ranked_here == [True, True, True, True, False]  # batches and a kept set here; a larger one to Chroma


def test_a_search_may_reuse_recent_index_states_and_then_serves_a_whole_earlier_version(
        new_client: ClientFactory, collection: str, model_provider: object, tmp_path: Path) -> None:  # noqa: F811
    """The retriever accepts index states as old as its live versions (``state_max_age_s``): a
    refresh by another process shows once they expire, and until then the earlier version is served
    whole, because a refresh ends its records' validity instead of deleting them. A write through
    the same store shows at once."""
    embeddings = embedding_service_for(model_provider, tmp_path / "cache")
    writer = ChromaVectorStore(new_client(), embeddings, collection_name=collection)  # another process
    reader = ChromaVectorStore(new_client(), embeddings, collection_name=collection)
    v1, v2 = version(1), version(2, [3])
    refresh(writer, v1)

    def served(max_age: float) -> set[str]:
        hits = reader.search("entity attribute parent", k=200, where=SearchFilter(state_max_age_s=max_age))
        return {h.schema_version for h in hits}

    reads: list[object] = []
    read = reader._manifest.read
    reader._manifest.read = lambda ids=None: reads.append(ids) or read(ids)  # type: ignore[method-assign,func-returns-value]
    assert served(60.0) == {v1.schema_version} and len(reads) == 1
    refresh(writer, v2, keep_versions=[v1.schema_version])
    assert served(60.0) == {v1.schema_version} and len(reads) == 1  # the state read a moment ago
    hits = reader.search("entity attribute parent", k=200, where=SearchFilter(state_max_age_s=60.0))
    assert {h.id for h in hits} == set(texts(v1))  # whole and exact
    assert served(0.0) == {v2.schema_version}  # 0: read for this search
    refresh(reader, version(3, [3, 7]), keep_versions=[v2.schema_version])
    assert served(60.0) == {version(3, [3, 7]).schema_version}  # its own write dropped what it had read


def test_over_reused_index_states_a_filters_scope_is_built_once(
        new_client: ClientFactory, collection: str, model_provider: object, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A routing search over 157 datasources rebuilt their version clauses for every question:
    over states it reuses, a store builds a filter's scope once per read of them. A filter asking
    for fresh states, another filter, or a write through the store builds it again, and searches
    answer as before."""
    from nl2sql_assets.indexing import manifest

    embeddings = embedding_service_for(model_provider, tmp_path / "cache")
    store = ChromaVectorStore(new_client(), embeddings, collection_name=collection)
    v1, v2 = version(1), version(2, [3])
    refresh(store, v1)
    built: list[SearchFilter] = []
    real = manifest.scope_of
    monkeypatch.setattr(manifest, "scope_of", lambda read, count, where: built.append(where) or real(read, count, where))
    kept = SearchFilter(state_max_age_s=60.0)
    first = store._manifest.scope(kept)
    assert first is not None and store._manifest.scope(kept) is first and len(built) == 1
    tables = SearchFilter(state_max_age_s=60.0, chunk_types=["schema.table"])
    assert store._manifest.scope(tables) is not first and len(built) == 2
    fresh = SearchFilter()
    assert store._manifest.scope(fresh) is not store._manifest.scope(fresh) and len(built) == 4
    hits = store.search("entity attribute parent", k=200, where=kept)
    assert {h.id for h in hits} == set(texts(v1)) and len(built) == 4
    refresh(store, v2, keep_versions=[v1.schema_version])
    again = store._manifest.scope(kept)
    assert again is not first and again.versions == {"wide": v2.schema_version} and len(built) == 5
    assert {h.schema_version for h in store.search("entity attribute parent", k=200, where=kept)} == {v2.schema_version}
