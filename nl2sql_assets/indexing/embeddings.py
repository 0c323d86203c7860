"""The embedding seam: providers turn texts into normalized float32 vectors.

``EmbeddingProvider`` is what a model implements (local ONNX, OpenAI); ``EmbeddingService``
adds the content-addressed cache and counts what was embedded vs taken from cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.indexing.models import ModelIdentity


class EmbeddingProvider(Protocol):
    @property
    def identity(self) -> ModelIdentity: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dimension), float32, L2-normalized. Raises EmbeddingError."""
        ...


class EmbedResult(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    vectors: np.ndarray
    embedded: int
    from_cache: int
