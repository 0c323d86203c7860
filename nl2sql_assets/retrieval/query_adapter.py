"""A linear map on the question's vectors, fitted so that questions land nearer the chunks they need.

The embedding model was trained to match sentences with sentences, not a user's question with the
description of a table or column. A fitted map on the query side (``v + v @ delta``, normalised)
moves a question toward the chunks that questions like it needed: held out by whole databases it
found more of the gold tables and columns, most for questions that share no word with the schema.
Only query texts (the question, evidence clauses, hints) are mapped, and only for searching a
datasource's schema: routing searches with the unmapped vectors (the map was fitted to tell one
database's chunks apart, and held out it routed worse). Chunks and the index are untouched, so
turning it on or off needs no re-index. The map belongs to one embedding model and is
used only with vectors of that model (``model``, a ``ModelIdentity.key``). It is fitted by
``benchmarks/fit_ranking_weights.py`` and shipped as data, like the within-table network.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from nl2sql_assets.errors import RetrievalError

SHIPPED_FILE = Path(__file__).with_name("query_adapter.json")


@dataclass(frozen=True)
class QueryAdapter:
    """``normalise(v + v @ delta)`` for vectors of the embedding model ``model``."""

    model: str
    delta: np.ndarray

    def fits(self, model_key: str) -> bool:
        """Whether vectors of ``model_key`` (``ModelIdentity.key``) are what this map was fitted on."""
        return model_key == self.model

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """The mapped, unit-length vectors (a zero vector stays zero)."""
        if not len(vectors):
            return vectors
        mapped = vectors + vectors @ self.delta
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        return (mapped / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    def to_json(self, **fitted: object) -> dict[str, object]:
        raw = np.ascontiguousarray(self.delta, dtype="<f4").tobytes()
        return {"model": self.model, "dimension": int(self.delta.shape[0]), "encoding": "float32-le-base64",
                "sha256": hashlib.sha256(raw).hexdigest(), "fitted": fitted,
                "delta": base64.b64encode(raw).decode("ascii")}

    @classmethod
    def load(cls, path: Path) -> QueryAdapter:
        """The map in ``path``, checked (size, checksum) before use."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            dim = int(data["dimension"])
            raw = base64.b64decode(data["delta"], validate=True)
            model, digest = str(data["model"]), str(data["sha256"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RetrievalError(f"query adapter file {path} cannot be read: {exc}") from exc
        if dim <= 0 or len(raw) != dim * dim * 4:
            raise RetrievalError(f"query adapter file {path} is malformed: {len(raw)} bytes for dimension {dim}")
        if hashlib.sha256(raw).hexdigest() != digest:
            raise RetrievalError(f"query adapter file {path} is damaged (checksum mismatch)")
        delta = np.frombuffer(raw, dtype="<f4").reshape(dim, dim).astype(np.float32)
        if not np.all(np.isfinite(delta)):
            raise RetrievalError(f"query adapter file {path} holds non-finite values")
        return cls(model=model, delta=delta)


@lru_cache(maxsize=1)
def shipped_adapter() -> QueryAdapter:
    """The map shipped with the package (read once per process)."""
    return QueryAdapter.load(SHIPPED_FILE)
