"""The ``openai`` embedding provider: POST ``{OPENAI_BASE_URL}/embeddings`` with httpx.

Batched (256 inputs per request by default), bounded retries with exponential backoff on
429, 5xx, timeouts and connection errors (``Retry-After`` honoured, capped), every other
failure a clear ``EmbeddingError`` that never contains the API key. Any server speaking the
OpenAI embeddings wire protocol works (Azure-style proxies, local gateways, the tests' server).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.config import redact_text
from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embedding_provider import check_texts
from nl2sql_assets.indexing.models import ModelIdentity

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Dimensions of OpenAI's embedding models; another model's is learnt from its first response.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIEmbedder:
    """OpenAI embeddings over HTTP; an ``EmbeddingProvider``.

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

    The httpx client is created on first use and kept on this object; :meth:`close` ends it.
    """

    def __init__(self, api_key: str, *, model: str = DEFAULT_OPENAI_MODEL, base_url: str | None = None,
                 dimension: int | None = None, batch_size: int = 256, max_retries: int = 5,
                 timeout: float = 30.0, backoff: float = 0.5, backoff_max: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not api_key:
            raise EmbeddingError("the OpenAI embedding provider needs an API key (OPENAI_API_KEY)")
        if not 1 <= batch_size <= 2048:
            raise ValueError(f"batch_size must be within 1..2048, got {batch_size}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self._api_key = api_key
        self.model = model
        self.base_url = (base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")
        self._dimension = dimension or KNOWN_DIMENSIONS.get(model)
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._client: httpx.Client | None = None
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

    def _http(self) -> httpx.Client:
        import httpx  # lazily: importing the provider (done by ``embeddings``) stays cheap

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, headers={
                    "Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"})
            return self._client

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        import httpx

        url = f"{self.base_url}/embeddings"
        body = {"model": self.model, "input": texts}
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                self.requests_sent += 1
                response = self._http().post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                problem = f"{type(exc).__name__}: {self._redact(str(exc))}"
            else:
                if response.status_code == 200:
                    return self._parse(response, len(texts))
                problem = f"HTTP {response.status_code}: {self._error_message(response)}"
                if response.status_code in (401, 403):
                    raise EmbeddingError(
                        f"OpenAI embeddings at {self.base_url} rejected the credentials ({problem}); "
                        "check OPENAI_API_KEY")
                if response.status_code not in _RETRY_STATUS:
                    raise EmbeddingError(f"OpenAI embeddings request for model {self.model!r} failed ({problem})")
                retry_after = _retry_after_seconds(response)
            if attempt >= self.max_retries:
                raise EmbeddingError(
                    f"OpenAI embeddings at {self.base_url} failed after {attempt + 1} attempts "
                    f"(last: {problem})")
            delay = min(self.backoff_max, retry_after if retry_after is not None
                        else self.backoff * (2 ** attempt) * (1 + 0.25 * random.random()))
            logger.warning("OpenAI embeddings attempt %d failed (%s); retrying in %.2fs",
                           attempt + 1, problem, delay)
            self._sleep(delay)
            attempt += 1

    def _parse(self, response: httpx.Response, expected: int) -> np.ndarray:
        try:
            data = response.json()["data"]
            items = sorted(data, key=lambda item: item["index"])
            vectors = np.asarray([item["embedding"] for item in items], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
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

    def _error_message(self, response: httpx.Response) -> str:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        return self._redact(str(message))

    def _redact(self, text: str) -> str:
        return redact_text(text, [self._api_key])


def _retry_after_seconds(response: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds; None when absent or a date."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
