"""The ``openai`` embedding provider: ``embeddings.create`` through the ``openai`` SDK.

Batched (256 inputs per request by default), bounded retries with exponential backoff on
429, 5xx, timeouts and connection errors (``Retry-After`` honoured, capped; see
``openai_client``), every other failure a clear ``EmbeddingError`` that never contains the
API key. Any server speaking the OpenAI embeddings wire protocol works (``OPENAI_BASE_URL``:
gateways, proxies, the tests' server); for Azure OpenAI pass an ``openai.AzureOpenAI`` client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.config import redact_url
from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embedding_provider import check_texts
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.indexing.openai_client import (
    DEFAULT_BASE_URL,
    RetriesExhaustedError,
    RetryPolicy,
    build_client,
    call_with_retries,
    describe,
    is_auth_error,
)

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: Dimensions of OpenAI's embedding models; another model's is learnt from its first response.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """OpenAI embeddings through the SDK; an ``EmbeddingProvider``.

    Args:
        api_key: sent as ``Authorization: Bearer``; never logged or put in an error.
        model: the embedding model (``EMBEDDING_MODEL``).
        base_url: ``OPENAI_BASE_URL``; default ``https://api.openai.com/v1``.
        dimension: the vector size; default: from ``KNOWN_DIMENSIONS``, else learnt from the
            first response (reading ``identity`` then makes one small request).
        batch_size: inputs per request (the API takes up to 2048).
        max_retries: retries of one request after a retryable failure (0: none).
        timeout: seconds per request.
        backoff: seconds before the first retry; doubled each time, capped by ``backoff_max``.
        sleep: how to wait between retries (tests pass a recorder).
        client: an SDK client to use instead of building one from ``api_key`` and ``base_url``
            (e.g. ``openai.AzureOpenAI``); its own ``max_retries`` should be 0.

    The SDK client is created on first use and kept on this object; :meth:`close` ends it.
    """

    def __init__(self, api_key: str, *, model: str = DEFAULT_OPENAI_MODEL, base_url: str | None = None,
                 dimension: int | None = None, batch_size: int = 256, max_retries: int = 5,
                 timeout: float = 30.0, backoff: float = 0.5, backoff_max: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep, client: openai.OpenAI | None = None) -> None:
        if not api_key and client is None:
            raise EmbeddingError("the OpenAI embedding provider needs an API key (OPENAI_API_KEY)")
        if not 1 <= batch_size <= 2048:
            raise ValueError(f"batch_size must be within 1..2048, got {batch_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self._api_key = api_key
        self.model = model
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._dimension = dimension or KNOWN_DIMENSIONS.get(model)
        self.batch_size = batch_size
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff, backoff_max=backoff_max, sleep=sleep)
        self._client = client
        self._lock = threading.Lock()
        self.requests_sent = 0

    @property
    def identity(self) -> ModelIdentity:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return ModelIdentity(provider="openai", model=self.model, dimension=self._dimension)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalized float32 vectors, one per text, in input order.

        Raises:
            EmbeddingError: bad input, an auth or request error, retries exhausted, or a
                response of the wrong size or dimension.
        """
        texts = check_texts(texts)
        if not texts:
            return np.empty((0, self._dimension or 0), dtype=np.float32)
        parts = [self._embed_batch(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        out = np.concatenate(parts, axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _sdk_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = build_client(self._api_key, self.base_url, self.timeout)
            return self._client

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        client = self._sdk_client()

        def request() -> openai.types.CreateEmbeddingResponse:
            self.requests_sent += 1
            return client.embeddings.create(model=self.model, input=texts)

        try:
            response = call_with_retries(request, self.retry, "OpenAI embeddings", [self._api_key])
        except RetriesExhaustedError as exc:
            raise EmbeddingError(
                f"OpenAI embeddings at {redact_url(self.base_url)} failed after {exc.attempts} attempts "
                f"(last: {self._describe(exc.last)})") from None
        except Exception as exc:
            problem = self._describe(exc)
            if is_auth_error(exc):
                raise EmbeddingError(
                    f"OpenAI embeddings at {redact_url(self.base_url)} rejected the credentials ({problem}); "
                    "check OPENAI_API_KEY") from None
            raise EmbeddingError(f"OpenAI embeddings request for model {self.model!r} failed ({problem})") from None
        return self._vectors(response, len(texts))

    def _vectors(self, response: openai.types.CreateEmbeddingResponse, expected: int) -> np.ndarray:
        try:
            items = sorted(response.data, key=lambda item: item.index)
            vectors = np.asarray([item.embedding for item in items], dtype=np.float32)
        except (AttributeError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"OpenAI embeddings response is not in the expected form ({type(exc).__name__}: {exc})") from None
        if vectors.ndim != 2 or vectors.shape[0] != expected:
            raise EmbeddingError(f"OpenAI embeddings returned {vectors.shape[0] if vectors.ndim else 0} "
                                 f"vectors for {expected} inputs")
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
            logger.info("OpenAI model %s has dimension %d", self.model, self._dimension)
        if vectors.shape[1] != self._dimension:
            raise EmbeddingError(
                f"OpenAI model {self.model!r} returned vectors of dimension {vectors.shape[1]}, "
                f"expected {self._dimension}")
        return vectors

    def _describe(self, exc: BaseException) -> str:
        return describe(exc, [self._api_key])
