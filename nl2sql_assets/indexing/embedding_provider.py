"""The provider contract: what a model implements, and the checks every provider shares.

This module sits below both sides of the embedding seam: the providers (``onnx_minilm``,
``openai_embeddings``) implement :class:`EmbeddingProvider` and use :func:`check_texts`, and
``embeddings`` builds the service on top of them. Keeping the contract here, rather than in
``embeddings``, is what lets ``embeddings`` import the providers without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.models import ModelIdentity


class EmbeddingProvider(Protocol):
    """A model that turns texts into vectors; the service adds caching on top."""

    @property
    def identity(self) -> ModelIdentity: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of shape (len(texts), dimension), float32, L2-normalized. Raises EmbeddingError."""
        ...


class EmbedResult(BaseModel):
    """Vectors in input order, and how many texts the provider computed vs how many were reused.

    ``embedded + from_cache == len(vectors)``: ``embedded`` counts distinct texts the provider
    computed in this call, ``from_cache`` the inputs served without computing (persistent
    cache hits, and repeats of a text within the same call).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    vectors: np.ndarray
    embedded: int
    from_cache: int


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list; anything but a sequence of strings raises EmbeddingError.

    >>> check_texts(("a", "b"))
    ['a', 'b']
    """
    if isinstance(texts, str):
        raise EmbeddingError("expected a sequence of texts, got a single string")
    checked = list(texts)
    for position, text in enumerate(checked):
        if not isinstance(text, str):
            raise EmbeddingError(f"text #{position} is {type(text).__name__}, expected str")
    return checked
