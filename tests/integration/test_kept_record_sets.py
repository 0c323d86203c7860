"""Single searches of one small record set are ranked from vectors the store keeps (exact_search.
RecordSets), on real Chroma with the real model: exact answers, no Chroma query once the set is
kept, and never a stale answer after another process refreshes, re-indexes or deletes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.indexing import exact_search
from nl2sql_assets.indexing.chroma_queries import BROAD_FILTER_MIN
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.exact_search import RecordSets
from nl2sql_assets.indexing.models import ChunkSet, SearchFilter
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from tests.chunk_samples import CAPTURED, embedding_service_for, model_provider, wide_snapshot  # noqa: F401
from tests.integration.test_shared_records import (  # noqa: F401
    ClientFactory,
    collection,
    new_client,
    refresh,
    shared_server,
    version,
)

pytestmark = pytest.mark.slow
TYPES = ["schema.table", "schema.column"]
QUESTIONS = ["parent of entity 3", "attribute 4 of t7", "which tables reference t2"]


def nearest(embeddings: object, cs: ChunkSet, asked: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
    """The k nearest table and column chunks of ``cs`` per query, by cosine, computed here."""
    allowed = [c for c in cs.chunks if c.type in TYPES]
    stored = np.asarray(embeddings.embed_documents([c.get_page_content() for c in allowed]).vectors)  # type: ignore[attr-defined]
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    out = []
    for row in asked / np.linalg.norm(asked, axis=1, keepdims=True) @ stored.T:
        order = np.argsort(-row, kind="stable")[:k]
        out.append([(allowed[j].id, float(row[j])) for j in order])
    return out


def same(found: list[list[object]], expected: list[list[tuple[str, float]]]) -> None:
    for hits, want in zip(found, expected, strict=True):
        assert [h.score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)  # type: ignore[attr-defined]
        last = want[-1][1] + 1e-5  # ids tied at the last rank may differ
        assert {h.record_id for h in hits if h.score > last} == {i for i, s in want if s > last}  # type: ignore[attr-defined]


def spy(store: ChromaVectorStore) -> list[str]:
    """The Chroma calls ``store`` makes from now on, by what they are for."""
    calls: list[str] = []
    call = store._conn.call

    def spied(what: str, fn):  # noqa: ANN001, ANN202
        calls.append(what)
        return call(what, fn)

    store._conn.call = spied  # type: ignore[method-assign]
    return calls


def test_one_small_set_is_kept_ranked_exactly_and_never_stale(  # noqa: PLR0915
        new_client: ClientFactory, collection: str, model_provider: object, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    embeddings = embedding_service_for(model_provider, tmp_path / "cache")
    writer = ChromaVectorStore(new_client(), embeddings, collection_name=collection)  # another process
    reader = ChromaVectorStore(new_client(), embeddings, collection_name=collection)
    asked = np.asarray(embeddings.embed_queries(QUESTIONS))  # type: ignore[attr-defined]
    calls = spy(reader)
    where = SearchFilter(datasource_ids=["wide"], chunk_types=TYPES)
    v1, v2 = version(1), version(2, [3])
    refresh(writer, v1)

    same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v1, asked, 8))
    assert "search" not in calls and "read chunks" in calls  # a small set: read with the vectors, ranked here
    calls.clear()
    for _ in range(3):
        same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v1, asked, 8))
    assert set(calls) == {"read manifest"}  # kept: only the index state is read

    refresh(writer, v2, keep_versions=[v1.schema_version])  # a refresh elsewhere: a new state
    same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v2, asked, 8))
    old = SearchFilter(datasource_ids=["wide"], chunk_types=TYPES, versions={"wide": v1.schema_version})
    same(reader.search_scores_many(list(asked), k=8, where=old), nearest(embeddings, v1, asked, 8))

    writer.delete_datasource("wide")  # and indexed again from scratch: the same generation numbers
    assert reader.search_scores_many(list(asked), k=8, where=where) == [[], [], []]
    v3 = version(1, [5, 6])
    refresh(writer, v3)
    assert writer.index_state("wide").generation == 1  # type: ignore[union-attr]
    same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v3, asked, 8))

    reader._sets = RecordSets()  # a set larger than FIRST_READ: Chroma answers its first search
    monkeypatch.setattr(exact_search, "FIRST_READ", 10)
    calls.clear()
    same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v3, asked, 8))
    assert "search" in calls and "read chunks" not in calls  # a one-question process never reads it
    calls.clear()
    same(reader.search_scores_many(list(asked), k=8, where=where), nearest(embeddings, v3, asked, 8))
    assert "search" not in calls and "read chunks" in calls  # asked again: read and ranked here

    reader._sets = RecordSets(max_set=10)  # a set larger than kept ones goes to Chroma, with the same answer
    for _ in range(2):
        same(reader.search_scores_many(list(asked), k=4, where=where), nearest(embeddings, v3, asked, 4))
    calls.clear()
    same(reader.search_scores_many(list(asked), k=4, where=where), nearest(embeddings, v3, asked, 4))
    assert "search" in calls and "read chunks" not in calls
    assert "read record ids" not in calls  # known to be too large: not counted again


def test_over_many_datasources_the_whole_store_is_kept_and_each_datasource_derives_from_it(
        new_client: ClientFactory, collection: str, model_provider: object, tmp_path: Path) -> None:  # noqa: F811
    """A routing search over every datasource keeps the whole store; one datasource's search is then
    taken from it without asking Chroma, while that datasource's index state is the one read. A
    refresh elsewhere makes that datasource read again; the others still derive."""
    embeddings = embedding_service_for(model_provider, tmp_path / "cache")
    writer = ChromaVectorStore(new_client(), embeddings, collection_name=collection)
    reader = ChromaVectorStore(new_client(), embeddings, collection_name=collection)
    sets: dict[str, ChunkSet] = {}
    for i in range(BROAD_FILTER_MIN + 2):
        sets[f"ds{i:02d}"] = build_chunks(wide_snapshot(3, datasource_id=f"ds{i:02d}", captured_at=CAPTURED))
        refresh(writer, sets[f"ds{i:02d}"])
    calls = spy(reader)
    asked = np.asarray(embeddings.embed_queries(QUESTIONS))  # type: ignore[attr-defined]
    everything = SearchFilter(chunk_types=["schema.datasource", *TYPES])
    for _ in range(2):  # larger than FIRST_READ: read on its second search
        reader.search_many(list(asked), k=10, where=everything, documents=False)
    assert "read chunks" in calls
    one = SearchFilter(datasource_ids=["ds03"], chunk_types=TYPES)
    calls.clear()
    same(reader.search_scores_many(list(asked), k=8, where=one), nearest(embeddings, sets["ds03"], asked, 8))
    assert set(calls) == {"read manifest"}  # derived from the whole store

    sets["ds03"] = build_chunks(wide_snapshot(3, datasource_id="ds03", changed=frozenset({1}),
                                              captured_at=CAPTURED.replace(day=9)))
    refresh(writer, sets["ds03"])
    calls.clear()
    same(reader.search_scores_many(list(asked), k=8, where=one), nearest(embeddings, sets["ds03"], asked, 8))
    assert "read chunks" in calls  # its state changed: read, never taken from the older whole store
    calls.clear()
    other = SearchFilter(datasource_ids=["ds05"], chunk_types=TYPES)
    same(reader.search_scores_many(list(asked), k=8, where=other), nearest(embeddings, sets["ds05"], asked, 8))
    assert set(calls) == {"read manifest"}
