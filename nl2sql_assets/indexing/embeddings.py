"""The embedding seam: providers turn texts into normalized float32 vectors.

``EmbeddingProvider`` (in ``embedding_provider``) is what a model implements (local ONNX in
``onnx_minilm``, OpenAI in ``openai_embeddings``); ``EmbeddingService`` adds the
content-addressed cache (``embedding_cache``), counts what was embedded vs taken from cache,
and keeps a small in-memory LRU for query embeddings. ``Embeddings`` is the protocol the
vector store and the retriever depend on. ``build_embedding_service`` picks the provider from
``Settings`` (``EMBEDDING_PROVIDER``, ``EMBEDDING_MODEL``; see ``docs/configuration.md``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from nl2sql_assets.errors import ConfigError, EmbeddingError
from nl2sql_assets.indexing.embedding_cache import EmbeddingCache
from nl2sql_assets.indexing.embedding_provider import EmbeddingProvider, EmbedResult, check_texts
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.indexing.onnx_minilm import LOCAL_MODEL_ALIASES, LOCAL_MODEL_NAME, OnnxMiniLMEmbedder
from nl2sql_assets.indexing.openai_embeddings import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from nl2sql_assets.progress import ProgressMeter

if TYPE_CHECKING:
    from nl2sql_assets.config import Settings

__all__ = [
    "DOCUMENT_SLICE", "EmbedResult", "EmbeddingProvider", "EmbeddingService", "Embeddings",
    "build_embedding_provider", "build_embedding_service", "check_texts",
]

logger = logging.getLogger(__name__)

#: Texts handed to the provider per call by ``embed_documents``; the cache is written after
#: each slice, so an interrupted run keeps what it already paid for.
DOCUMENT_SLICE = 512


class Embeddings(Protocol):
    """What the vector store and the retriever need from an embedding service.

    Declared here, next to :class:`EmbeddingService`, so callers depend on the seam and tests
    can pass a stub without loading a model.
    """

    @property
    def identity(self) -> ModelIdentity: ...

    def embed_documents(self, texts: Sequence[str]) -> EmbedResult:
        """Vectors for texts to index (cached where possible), in input order."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one question, shape ``(dimension,)``."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of many questions, shape ``(len(texts), dimension)``, in input order."""
        ...


class EmbeddingService:
    """A provider plus the persistent cache and a query LRU; what indexing and retrieval use.

    Args:
        provider: the model.
        cache: the content-addressed cache; ``None`` embeds everything every time.
        query_cache_size: how many query vectors ``embed_query`` keeps in memory (0: none).
    """

    def __init__(self, provider: EmbeddingProvider, cache: EmbeddingCache | None = None,
                 *, query_cache_size: int = 256) -> None:
        self.provider = provider
        self.cache = cache
        self.query_cache_size = query_cache_size
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def identity(self) -> ModelIdentity:
        return self.provider.identity

    @property
    def dimension(self) -> int:
        return self.provider.identity.dimension

    def embed_documents(self, texts: Sequence[str]) -> EmbedResult:
        """Vectors for texts to index, taken from the cache where present.

        Returns:
            EmbedResult with ``vectors`` of shape ``(len(texts), dimension)`` in input order.

        Raises:
            EmbeddingError: bad input, provider failure, or a provider returning the wrong shape.
        """
        texts = check_texts(texts)
        identity = self.identity
        vectors = np.empty((len(texts), identity.dimension), dtype=np.float32)
        if not texts:
            return EmbedResult(vectors=vectors, embedded=0, from_cache=0)
        cached = self.cache.get_many(identity, texts) if self.cache is not None else [None] * len(texts)
        missing: dict[str, list[int]] = {}
        for position, (text, vector) in enumerate(zip(texts, cached)):
            if vector is None:
                missing.setdefault(text, []).append(position)
            else:
                vectors[position] = vector
        todo = list(missing)
        meter = ProgressMeter("chunks embedded", len(todo))
        for start in range(0, len(todo), DOCUMENT_SLICE):
            part = todo[start:start + DOCUMENT_SLICE]
            computed = self._provider_embed(part)
            meter.advance(len(part))
            if self.cache is not None:
                self.cache.put_many(identity, part, computed)
            for text, vector in zip(part, computed):
                vectors[missing[text]] = vector
        embedded = len(todo)
        logger.debug("embedded %d texts with %s, %d reused", embedded, identity.key, len(texts) - embedded)
        return EmbedResult(vectors=vectors, embedded=embedded, from_cache=len(texts) - embedded)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one question, shape ``(dimension,)``, read-only; recent ones come from memory.

        Raises:
            EmbeddingError: ``text`` is not a string, or the provider fails.
        """
        if not isinstance(text, str):
            raise EmbeddingError(f"query is {type(text).__name__}, expected str")
        with self._lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector = self._provider_embed([text])[0].copy()
        vector.setflags(write=False)
        if self.query_cache_size > 0:
            with self._lock:
                self._queries[text] = vector
                while len(self._queries) > self.query_cache_size:
                    self._queries.popitem(last=False)
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """:meth:`embed_query` for many texts with one provider call for those not in memory.

        Returns:
            Shape ``(len(texts), dimension)`` in input order.

        Raises:
            EmbeddingError: bad input or provider failure.
        """
        texts = check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for position, text in enumerate(texts):
                hit = self._queries.get(text)
                if hit is None:
                    missing.setdefault(text, []).append(position)
                else:
                    self._queries.move_to_end(text)
                    out[position] = hit
        if missing:
            todo = list(missing)
            computed = self._provider_embed(todo)
            with self._lock:
                for text, vector in zip(todo, computed):
                    out[missing[text]] = vector
                    if self.query_cache_size > 0:
                        kept = vector.copy()
                        kept.setflags(write=False)
                        self._queries[text] = kept
                while len(self._queries) > self.query_cache_size:
                    self._queries.popitem(last=False)
        return out

    def close(self) -> None:
        """Release the cache file and the provider's client (if it has one); safe to call twice."""
        if self.cache is not None:
            self.cache.close()
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()

    def _provider_embed(self, texts: list[str]) -> np.ndarray:
        identity = self.identity
        out = np.asarray(self.provider.embed(texts), dtype=np.float32)
        if out.shape != (len(texts), identity.dimension):
            raise EmbeddingError(
                f"embedding provider {identity.key} returned shape {out.shape} for {len(texts)} "
                f"texts, expected ({len(texts)}, {identity.dimension})")
        return out


def build_embedding_provider(settings: Settings, *, threads: int | None = None) -> EmbeddingProvider:
    """The provider ``settings`` configure: ``local`` (ONNX all-MiniLM-L6-v2) or ``openai``.

    Nothing is loaded or contacted here: the local model loads on first use.

    Raises:
        ConfigError: ``EMBEDDING_MODEL`` names no model the local provider has.
        EmbeddingError: ``openai`` without ``OPENAI_API_KEY``.
    """
    if settings.embedding_provider == "openai":
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        if not key:
            raise EmbeddingError("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY; set it, "
                                 "or use EMBEDDING_PROVIDER=local (offline)")
        return OpenAIEmbedder(api_key=key, model=settings.embedding_model or DEFAULT_OPENAI_MODEL,
                              base_url=settings.openai_base_url)
    if settings.embedding_model and settings.embedding_model not in LOCAL_MODEL_ALIASES:
        raise ConfigError(
            f"the local provider has only {LOCAL_MODEL_NAME} (also accepted: "
            f"{', '.join(sorted(LOCAL_MODEL_ALIASES - {LOCAL_MODEL_NAME}))}), got {settings.embedding_model!r}",
            source="environment", field="EMBEDDING_MODEL")
    return OnnxMiniLMEmbedder(threads=threads)


def build_embedding_service(settings: Settings, *, use_cache: bool = True,
                            threads: int | None = None) -> EmbeddingService:
    """The embedding service for ``settings``: its provider plus the cache in ``NL2SQL_HOME/cache``.

    Args:
        settings: from ``Settings.from_env()``.
        use_cache: ``False`` embeds everything every time (benchmarks).
        threads: onnxruntime threads for the local provider; default: the number of CPUs.

    Raises:
        ConfigError, EmbeddingError: see :func:`build_embedding_provider`.
    """
    provider = build_embedding_provider(settings, threads=threads)
    cache = EmbeddingCache.in_folder(settings.cache_path) if use_cache else None
    return EmbeddingService(provider, cache)
