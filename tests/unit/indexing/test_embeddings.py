"""EmbeddingService: cache accounting, query LRU, provider checks, building from settings.

Fast cases use the HashEmbedder fake; the same behaviours run end to end with the real model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError, EmbeddingError
from nl2sql_assets.indexing.embedding_cache import EmbeddingCache
from nl2sql_assets.indexing.embeddings import (
    DOCUMENT_SLICE,
    EmbeddingService,
    build_embedding_provider,
    build_embedding_service,
)
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.indexing.onnx_minilm import LOCAL_MODEL_NAME, OnnxMiniLMEmbedder
from nl2sql_assets.indexing.openai_embeddings import OpenAIEmbedder
from tests.fakes import HashEmbedder

TEXTS = ["table orders: order id, total", "table customers: name, email", "column orders.total numeric"]


def test_second_embedding_of_the_same_texts_comes_from_the_cache(tmp_path: Path) -> None:
    provider = HashEmbedder()
    service = EmbeddingService(provider, EmbeddingCache(tmp_path / "c.sqlite3"))
    first = service.embed_documents(TEXTS)
    second = service.embed_documents(TEXTS)
    assert (first.embedded, first.from_cache) == (3, 0)
    assert (second.embedded, second.from_cache) == (0, 3)
    assert provider.texts_embedded == 3
    assert np.array_equal(first.vectors, second.vectors)


def test_only_new_texts_are_embedded(tmp_path: Path) -> None:
    provider = HashEmbedder()
    service = EmbeddingService(provider, EmbeddingCache(tmp_path / "c.sqlite3"))
    service.embed_documents(TEXTS)
    result = service.embed_documents([TEXTS[1], "a new chunk", TEXTS[0]])
    assert (result.embedded, result.from_cache) == (1, 2)
    assert np.allclose(result.vectors, provider.embed([TEXTS[1], "a new chunk", TEXTS[0]]))


def test_repeats_within_one_call_are_embedded_once(tmp_path: Path) -> None:
    provider = HashEmbedder()
    result = EmbeddingService(provider, None).embed_documents(["a b", "c", "a b", "a b"])
    assert (result.embedded, result.from_cache) == (2, 2)
    assert provider.texts_embedded == 2
    assert np.array_equal(result.vectors[0], result.vectors[3])


def test_without_a_cache_everything_is_embedded_every_time() -> None:
    provider = HashEmbedder()
    service = EmbeddingService(provider, None)
    service.embed_documents(TEXTS)
    assert service.embed_documents(TEXTS).embedded == 3
    assert provider.texts_embedded == 6


def test_cache_persists_across_service_instances(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    EmbeddingService(HashEmbedder(), EmbeddingCache(path)).embed_documents(TEXTS)
    provider = HashEmbedder()
    result = EmbeddingService(provider, EmbeddingCache(path)).embed_documents(TEXTS)
    assert result.from_cache == 3 and provider.texts_embedded == 0


def test_another_model_identity_does_not_reuse_vectors(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    EmbeddingService(HashEmbedder(dimension=64), EmbeddingCache(path)).embed_documents(TEXTS)
    other = HashEmbedder(dimension=32)
    result = EmbeddingService(other, EmbeddingCache(path)).embed_documents(TEXTS)
    assert result.embedded == 3 and result.vectors.shape == (3, 32)
    assert EmbeddingCache(path).count() == 6


def test_large_inputs_go_to_the_provider_in_slices(tmp_path: Path) -> None:
    provider = HashEmbedder()
    texts = [f"chunk {i}" for i in range(DOCUMENT_SLICE * 2 + 5)]
    result = EmbeddingService(provider, EmbeddingCache(tmp_path / "c.sqlite3")).embed_documents(texts)
    assert provider.calls == 3 and result.embedded == len(texts)


def test_empty_input() -> None:
    result = EmbeddingService(HashEmbedder(dimension=8), None).embed_documents([])
    assert result.vectors.shape == (0, 8) and result.embedded == result.from_cache == 0


def test_query_vectors_are_remembered_in_a_small_lru() -> None:
    provider = HashEmbedder()
    service = EmbeddingService(provider, None, query_cache_size=2)
    first = service.embed_query("revenue by month")
    assert service.embed_query("revenue by month") is first
    service.embed_query("b")
    service.embed_query("c")  # evicts "revenue by month"
    service.embed_query("revenue by month")
    assert provider.calls == 4
    assert first.shape == (64,) and not first.flags.writeable


def test_query_must_be_a_string() -> None:
    with pytest.raises(EmbeddingError, match="query is NoneType"):
        EmbeddingService(HashEmbedder(), None).embed_query(None)  # type: ignore[arg-type]


class _WrongShape:
    identity = ModelIdentity(provider="fake", model="wrong", dimension=8)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 7), dtype=np.float32)


def test_a_provider_returning_the_wrong_dimension_is_an_error() -> None:
    with pytest.raises(EmbeddingError, match=r"returned shape \(2, 7\).*expected \(2, 8\)"):
        EmbeddingService(_WrongShape(), None).embed_documents(["a", "b"])


# -- building from settings -------------------------------------------------------------------

def test_default_settings_build_the_local_model_with_a_cache_in_home(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path)})
    service = build_embedding_service(settings)
    assert isinstance(service.provider, OnnxMiniLMEmbedder)
    assert service.identity == ModelIdentity(provider="local", model=LOCAL_MODEL_NAME, dimension=384)
    assert service.cache is not None and service.cache.path.parent == tmp_path / "cache"
    assert build_embedding_service(settings, use_cache=False).cache is None


def test_local_accepts_the_plain_model_name(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "EMBEDDING_MODEL": "all-MiniLM-L6-v2"})
    assert build_embedding_provider(settings).identity.model == LOCAL_MODEL_NAME


def test_local_rejects_an_unknown_model_naming_the_variable(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "EMBEDDING_MODEL": "bge-large"})
    with pytest.raises(ConfigError, match="EMBEDDING_MODEL.*bge-large"):
        build_embedding_provider(settings)


def test_openai_is_chosen_by_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "EMBEDDING_PROVIDER": "openai",
                                  "OPENAI_API_KEY": "sk-test", "EMBEDDING_MODEL": "text-embedding-3-large"})
    provider = build_embedding_provider(settings)
    assert isinstance(provider, OpenAIEmbedder)
    assert provider.identity == ModelIdentity(provider="openai", model="text-embedding-3-large", dimension=3072)


def test_openai_without_a_key_is_a_clear_error(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "EMBEDDING_PROVIDER": "openai"})
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        build_embedding_service(settings)


# -- end to end with the real model -----------------------------------------------------------

@pytest.mark.slow
def test_real_model_through_the_service_with_the_cache(local_embedder, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    service = EmbeddingService(local_embedder, EmbeddingCache(path))
    first = service.embed_documents(TEXTS)
    again = EmbeddingService(local_embedder, EmbeddingCache(path)).embed_documents(TEXTS + ["one more"])
    assert (first.embedded, again.embedded, again.from_cache) == (3, 1, 3)
    assert np.allclose(again.vectors[:3], first.vectors)
    assert np.allclose(first.vectors, local_embedder.embed(TEXTS), atol=1e-6)
    query = service.embed_query("total of the orders")
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert int(np.argmax(first.vectors @ query)) in (0, 2)


def test_close_releases_the_cache_and_can_be_repeated(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    service = EmbeddingService(HashEmbedder(), cache)
    service.embed_documents(TEXTS)
    service.close()
    service.close()
    assert cache._conn is None
    assert service.embed_documents(TEXTS).from_cache == 3  # reopens on next use
