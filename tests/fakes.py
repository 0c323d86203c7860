"""Small fakes for fast unit tests. Every behaviour is also tested with the real model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from nl2sql_assets.indexing.models import ModelIdentity


class HashEmbedder:
    """Deterministic bag-of-words hashing vectors: similar word sets give similar vectors."""

    def __init__(self, dimension: int = 64) -> None:
        self._identity = ModelIdentity(provider="hash", model="bag-of-words", dimension=dimension)
        self.calls = 0
        self.texts_embedded = 0

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_embedded += len(texts)
        dim = self._identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[i, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
            norm = float(np.linalg.norm(out[i]))
            out[i] = out[i] / norm if norm else out[i]
            if not norm:
                out[i, 0] = 1.0
        return out
