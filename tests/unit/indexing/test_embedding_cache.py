"""The persistent content-addressed cache, on a real SQLite file."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embedding_cache import CACHE_FILE_NAME, EmbeddingCache, text_key
from nl2sql_assets.indexing.models import ModelIdentity

MODEL_A = ModelIdentity(provider="local", model="a", dimension=4)
MODEL_B = ModelIdentity(provider="local", model="b", dimension=4)


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)


def test_put_then_get_returns_the_same_vectors_in_input_order(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite3") as cache:
        vectors = _vectors(3)
        cache.put_many(MODEL_A, ["x", "y", "z"], vectors)
        got = cache.get_many(MODEL_A, ["z", "missing", "x", "z"])
    assert got[1] is None
    assert np.array_equal(got[0], vectors[2]) and np.array_equal(got[3], vectors[2])
    assert np.array_equal(got[2], vectors[0])


def test_entries_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite3"
    with EmbeddingCache(path) as cache:
        cache.put_many(MODEL_A, ["x"], _vectors(1))
    with EmbeddingCache(path) as cache:
        assert cache.count(MODEL_A) == 1
        assert np.array_equal(cache.get_many(MODEL_A, ["x"])[0], _vectors(1)[0])


def test_model_identity_is_part_of_the_key(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite3") as cache:
        cache.put_many(MODEL_A, ["x"], _vectors(1, seed=1))
        assert cache.get_many(MODEL_B, ["x"]) == [None]
        cache.put_many(MODEL_B, ["x"], _vectors(1, seed=2))
        assert cache.count() == 2
        assert not np.array_equal(cache.get_many(MODEL_A, ["x"])[0], cache.get_many(MODEL_B, ["x"])[0])


def test_wrong_shape_is_refused(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite3") as cache, pytest.raises(EmbeddingError, match="shape"):
        cache.put_many(MODEL_A, ["x", "y"], _vectors(1))


def test_many_texts_are_looked_up_in_chunks(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(1_234)]
    with EmbeddingCache(tmp_path / "c.sqlite3") as cache:
        cache.put_many(MODEL_A, texts[::2], np.ones((617, 4), dtype=np.float32))
        got = cache.get_many(MODEL_A, texts)
    assert sum(v is not None for v in got) == 617
    assert all((v is not None) == (i % 2 == 0) for i, v in enumerate(got))


def test_unreadable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EmbeddingError, match="cannot be opened"):
        EmbeddingCache(blocker / "c.sqlite3").count()


def test_in_folder_uses_the_standard_file_name(tmp_path: Path) -> None:
    assert EmbeddingCache.in_folder(tmp_path).path == tmp_path / CACHE_FILE_NAME


def test_text_key_is_content_addressed() -> None:
    assert text_key("orders") == text_key("orders") != text_key("orders ")


def _writer(path: str, start: int) -> None:
    with EmbeddingCache(path) as cache:
        for i in range(start, start + 40):
            cache.put_many(MODEL_A, [f"t{i}", "shared"], np.full((2, 4), float(i), dtype=np.float32))


def test_two_processes_can_create_and_write_the_same_file(tmp_path: Path) -> None:
    """Two processes opening a file neither has created yet: one converts it to WAL and creates
    the table while the other can be told "locked" at once (SQLite does not wait where waiting
    could deadlock); it must retry, not fail. Eight rounds, because the race is rare: without the
    retry about one round in eight failed here."""
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(8):
        path = str(tmp_path / f"c{round_}.sqlite3")
        procs = [ctx.Process(target=_writer, args=(path, s)) for s in (0, 1000)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0], f"round {round_}"
        with EmbeddingCache(path) as cache:
            assert cache.count(MODEL_A) == 81
