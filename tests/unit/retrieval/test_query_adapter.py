"""The query adapter: the shipped map's file and model, its arithmetic, bad files, and its use by
the retriever (segments mapped, entities and words not; only for the model it was fitted for)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.errors import RetrievalError
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.retrieval.models import RetrievalRequest, RetrieverConfig
from nl2sql_assets.retrieval.query import build_semantic_query, embed_queries
from nl2sql_assets.retrieval.query_adapter import SHIPPED_FILE, QueryAdapter, shipped_adapter
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.retrieval_samples import CAPTURED, World


def _random_adapter(dim: int = 8, model: str = "test/model/8", seed: int = 0) -> QueryAdapter:
    return QueryAdapter(model=model, delta=np.random.default_rng(seed).normal(0, 0.2, (dim, dim)).astype(np.float32))


def test_the_shipped_adapter_is_for_the_local_model_and_well_formed(model_provider: object) -> None:  # noqa: F811
    adapter = shipped_adapter()
    assert adapter.fits(EmbeddingService(model_provider).identity.key)  # type: ignore[arg-type]
    assert adapter.delta.shape == (384, 384) and np.isfinite(adapter.delta).all()
    assert 0 < np.abs(adapter.delta).max() < 1  # a fitted change, small beside the identity
    fitted = json.loads(SHIPPED_FILE.read_text(encoding="utf-8"))["fitted"]
    assert fitted["databases"] >= 100 and set(fitted["benchmarks"]) == {"bird", "spider"}


def test_apply_maps_to_unit_vectors_keeps_zero_and_is_the_identity_without_change() -> None:
    adapter = _random_adapter()
    vectors = np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    mapped = adapter.apply(vectors)
    assert np.allclose(np.linalg.norm(mapped, axis=1), 1.0, atol=1e-5)
    expected = vectors + vectors @ adapter.delta
    assert np.allclose(mapped, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)
    assert np.array_equal(adapter.apply(np.zeros((1, 8), np.float32)), np.zeros((1, 8), np.float32))
    assert adapter.apply(np.zeros((0, 8), np.float32)).shape == (0, 8)
    still = QueryAdapter(model="m", delta=np.zeros((8, 8), np.float32))
    assert np.allclose(still.apply(vectors), vectors, atol=1e-6)


def test_a_written_adapter_loads_back_the_same(tmp_path: Path) -> None:
    adapter = _random_adapter()
    path = tmp_path / "a.json"
    path.write_text(json.dumps(adapter.to_json(steps=3)), encoding="utf-8")
    loaded = QueryAdapter.load(path)
    assert loaded.model == "test/model/8" and np.array_equal(loaded.delta, adapter.delta)
    assert loaded.fits("test/model/8") and not loaded.fits("local/all-MiniLM-L6-v2-int8/384")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: d.update(sha256="0" * 64), "damaged"),
    (lambda d: d.update(dimension=9), "malformed"),
    (lambda d: d.update(delta="not base64!"), "cannot be read"),
    (lambda d: d.pop("model"), "cannot be read"),
])
def test_a_bad_adapter_file_is_refused_naming_the_file(tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    data = _random_adapter().to_json()
    damage(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(RetrievalError, match=message) as err:
        QueryAdapter.load(path)
    assert str(path) in str(err.value)
    with pytest.raises(RetrievalError, match="cannot be read"):
        QueryAdapter.load(tmp_path / "missing.json")


def test_non_finite_values_are_refused(tmp_path: Path) -> None:
    delta = np.zeros((4, 4), np.float32)
    delta[1, 2] = np.nan
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(QueryAdapter(model="m", delta=delta).to_json()), encoding="utf-8")
    with pytest.raises(RetrievalError, match="non-finite"):
        QueryAdapter.load(path)


def test_only_the_segments_are_mapped_not_the_entities_or_the_words() -> None:
    from nl2sql_assets.retrieval.word_similarity import WordVectorCache
    from tests.fakes import HashEmbedder

    class Plain:
        def embed_queries(self, texts):  # type: ignore[no-untyped-def]
            return HashEmbedder(8).embed(list(texts))

    request = RetrievalRequest(question='Which singers sang "Yellow Submarine"?', evidence="singer refers to artist")
    plain, mapped = build_semantic_query(request), build_semantic_query(request)
    adapter = _random_adapter()
    embed_queries([plain], Plain(), WordVectorCache())  # type: ignore[arg-type]
    embed_queries([mapped], Plain(), WordVectorCache(), adapter)  # type: ignore[arg-type]
    n = plain.n_segments
    assert n == 2 and len(plain.texts) > n  # the question and the clause; then the quoted entity
    assert np.allclose(mapped.vectors[:n], adapter.apply(plain.vectors[:n]), atol=1e-6)  # type: ignore[index]
    assert np.array_equal(mapped.vectors[n:], plain.vectors[n:])  # type: ignore[index]
    assert np.array_equal(mapped.route_vectors, plain.vectors[:n])  # type: ignore[arg-type,index] # routing: unmapped
    assert np.array_equal(mapped.word_vectors, plain.word_vectors)  # type: ignore[arg-type]


def _staff_snapshot() -> SchemaSnapshot:
    def table(name: str, *columns: str, fks: list[ForeignKey] | None = None) -> Table:
        return Table(name=name, primary_key=[columns[0]], foreign_keys=fks or [],
                     columns=[Column(name=c, type_family="text") for c in columns])

    return SchemaSnapshot.create(DatasourceInfo(id="firm", dialect="sqlite"), [
        table("employee", "employee_id", "first_name", "salary", "hire_date", "department_id",
              fks=[ForeignKey(columns=["department_id"], ref_table="department", ref_columns=["department_id"])]),
        table("department", "department_id", "name", "budget"),
        table("product", "product_id", "title", "price"),
        table("supplier", "supplier_id", "company", "city")], CAPTURED)


def test_the_retriever_maps_queries_only_for_the_model_the_adapter_was_fitted_for(
        tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    world = World(tmp_path / "w", model_provider)
    try:
        world.add(_staff_snapshot())
        question = "Which workers earn the most?"

        def scores(retriever) -> list[float]:  # type: ignore[no-untyped-def]
            result = retriever.retrieve(question, datasource="firm")
            return [t.score for t in result.tables]

        off = scores(world.retriever(RetrieverConfig(query_adapter=False)))
        foreign = QueryAdapter(model="openai/text-embedding-3-small/1536", delta=np.zeros((4, 4), np.float32))
        assert scores(_retriever_with(world, foreign)) == off  # another model's map is not used
        on = world.retriever().retrieve(question, datasource="firm")
        assert on.tables[0].name == "employee"
        assert [t.score for t in on.tables] != off  # the shipped map is used with the local model
        world.add(_staff_snapshot().model_copy(update={"datasource": DatasourceInfo(id="firm2", dialect="sqlite")}))
        routed = [r.route_candidates([RetrievalRequest(question=question)])[0]
                  for r in (world.retriever(), world.retriever(RetrieverConfig(query_adapter=False)))]
        assert routed[0].names == routed[1].names and np.array_equal(routed[0].features, routed[1].features)
    finally:
        world.close()


def _retriever_with(world: World, adapter: QueryAdapter) -> SchemaRetriever:
    return SchemaRetriever(world.schema_store, world.vector_store, world.embeddings, adapter=adapter)  # type: ignore[arg-type]
