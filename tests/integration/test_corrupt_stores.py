"""Damaged store files on disk: each store says what is wrong and how to recover, and nothing
passes a damaged store off as "nothing stored" or "unchanged".

Real files, really damaged (their pages overwritten with garbage): embedded Chroma
(``$NL2SQL_HOME/chroma/chroma.sqlite3``, derived: retrieval falls back to the schema store and
the error says to move the folder aside and index again), the embedding cache (disposable:
moved aside, indexing goes on) and the schema store (every snapshot: a clear error naming
the file, never a rebuild).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import nl2sql_assets.errors as errors
from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.errors import EmbeddingError, SchemaStoreError, VectorStoreError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embedding_cache import CACHE_FILE_NAME, EmbeddingCache
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.store import SqlSchemaStore, build_schema_store
from tests.chunk_samples import shop_snapshot
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GARBAGE = b"garbage!"
#: (where the garbage starts: bytes or a fraction of the file, how many bytes: None to the end).
#: The header page makes "file is not a database"; the pages after it "malformed"; Chroma meets
#: its log pages as an InvalidArgumentError and some pages make its Rust core panic.
DAMAGE = {
    "header pages": (0, 16384),
    "pages after the header": (4096, 16384),
    "second half": (0.6, None),
    "from 40 percent on": (0.4, None),
}


def damage(path: Path, start: float, length: int | None) -> None:
    """Overwrite part of a file with garbage, as a failing disk or a stray write would."""
    size = path.stat().st_size
    offset = int(size * start) // 4096 * 4096 if isinstance(start, float) else int(start)
    count = (size - offset) if length is None else length
    with path.open("r+b") as f:
        f.seek(offset)
        f.write((GARBAGE * (count // len(GARBAGE) + 1))[:count])


def embeddings() -> EmbeddingService:
    return EmbeddingService(HashEmbedder(384))  # type: ignore[arg-type]


@pytest.fixture
def indexed_home(nl2sql_home: Path) -> Settings:
    """A home whose schema store holds the shop snapshot and whose embedded Chroma serves it."""
    settings = Settings.from_env({"NL2SQL_HOME": str(nl2sql_home)})
    store = build_schema_store(settings)
    snapshot = store.register_snapshot(shop_snapshot()).snapshot
    store.close()
    vectors = build_vector_store(settings, embeddings())
    chunk_set = build_chunks(snapshot)
    vectors.refresh_schema_chunks(chunk_set.datasource_id, chunk_set.schema_version, chunk_set.chunks,
                                  tenant_id=chunk_set.tenant_id)
    vectors.close()
    return settings


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``nl2sql-assets ARGS`` in a process of its own, on the code of this checkout."""
    env = {**os.environ, "NL2SQL_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for var in ("CHROMA_HOST", "CHROMA_PORT", "SCHEMA_STORE_URL", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------------------------- embedded Chroma


@pytest.mark.parametrize("where", list(DAMAGE))
def test_a_damaged_chroma_file_raises_the_corrupt_error_with_the_way_out_on_every_call(
        indexed_home: Settings, where: str) -> None:
    damage(indexed_home.chroma_path / "chroma.sqlite3", *DAMAGE[where])
    store = build_vector_store(indexed_home, embeddings())
    for read in (lambda: store.live_version("shop"), store.index_states, lambda: store.index_state("shop")):
        with pytest.raises(errors.VectorStoreCorruptError) as caught:  # never None, never another error
            read()
        text = str(caught.value)
        assert str(indexed_home.chroma_path / "chroma.sqlite3") in text
        assert f"mv {indexed_home.chroma_path} {indexed_home.chroma_path}.corrupt" in text
        assert "nl2sql-assets index" in text and "schema store, which holds every snapshot" in text
    store.close()


def test_retrieval_answers_from_the_schema_store_when_chroma_is_damaged(indexed_home: Settings) -> None:
    damage(indexed_home.chroma_path / "chroma.sqlite3", *DAMAGE["second half"])
    schema_store = build_schema_store(indexed_home)
    service = embeddings()
    retriever = SchemaRetriever(schema_store, build_vector_store(indexed_home, service), service)
    for _ in range(2):  # the second call must not meet a different error
        result = retriever.retrieve("email address of a customer", datasource="shop")
        assert result.fallback == "vector_store_unavailable"
        assert {t.name for t in result.tables} == {t.name for t in shop_snapshot().tables}
        assert any("is corrupt" in w and "nl2sql-assets index" in w for w in result.warnings)
    schema_store.close()


@pytest.mark.parametrize("where", ["header pages", "second half"])
def test_the_retrieve_command_falls_back_with_a_warning_when_chroma_is_damaged(
        indexed_home: Settings, where: str) -> None:
    damage(indexed_home.chroma_path / "chroma.sqlite3", *DAMAGE[where])
    done = cli(indexed_home.home, "retrieve", "email address of a customer", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["datasource"] == "shop" and result["fallback"] == "vector_store_unavailable"
    assert result["tables"], "the full schema from the schema store"
    assert any("is corrupt" in w and f"mv {indexed_home.chroma_path}" in w for w in result["warnings"])


def test_after_moving_the_damaged_folder_aside_indexing_rebuilds_it(indexed_home: Settings, tmp_path: Path) -> None:
    damage(indexed_home.chroma_path / "chroma.sqlite3", *DAMAGE["header pages"])
    store = build_vector_store(indexed_home, embeddings())
    with pytest.raises(errors.VectorStoreCorruptError):
        store.index_states()
    indexed_home.chroma_path.rename(tmp_path / "chroma.corrupt")  # what the message says to do
    assert store.index_states() == {}  # the same store object opens the fresh folder
    store.close()


# ---------------------------------------------------------------------------------- embedding cache

MODEL = ModelIdentity(provider="hash", model="bag-of-words", dimension=384)
TEXTS = [f"table t{i}: column c{i} of the shop" for i in range(300)]


@pytest.mark.parametrize("where", ["header pages", "pages after the header"])
def test_a_damaged_embedding_cache_is_moved_aside_and_embedding_goes_on(
        nl2sql_home: Path, where: str, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(nl2sql_home)})
    path = settings.cache_path / CACHE_FILE_NAME
    with EmbeddingCache(path) as cache:
        cache.put_many(MODEL, TEXTS, HashEmbedder(384).embed(TEXTS))
    damage(path, *DAMAGE[where])

    service = EmbeddingService(HashEmbedder(384), EmbeddingCache(path))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="nl2sql_assets.indexing.embedding_cache"):
        first = service.embed_documents(TEXTS)
    assert first.embedded == len(TEXTS) and first.vectors.shape == (len(TEXTS), 384)
    assert any("is corrupt" in r.getMessage() and "moved it aside" in r.getMessage() for r in caplog.records)
    moved = sorted(p.name for p in path.parent.iterdir() if ".corrupt-" in p.name)
    assert moved and moved[0].startswith(f"{CACHE_FILE_NAME}.corrupt-")
    assert service.embed_documents(TEXTS).from_cache == len(TEXTS)  # the fresh cache works
    service.close()


def test_indexing_goes_on_over_a_damaged_embedding_cache(nl2sql_home: Path, tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, city TEXT)")
        conn.executemany("INSERT INTO customers VALUES (?, ?)", [(i, f"city {i % 7}") for i in range(50)])
    settings = Settings.from_env({"NL2SQL_HOME": str(nl2sql_home)})
    settings.cache_path.mkdir(parents=True)
    (settings.cache_path / CACHE_FILE_NAME).write_bytes(GARBAGE * 4096)  # not a database at all
    service = EmbeddingService(HashEmbedder(384), EmbeddingCache.in_folder(settings.cache_path))  # type: ignore[arg-type]
    store = build_schema_store(settings)
    outcome = index_datasource(DatasourceConfig(id="shop", url=f"sqlite:///{db}"), store,
                               build_vector_store(settings, service))
    assert outcome.status == "new" and outcome.refresh is not None and outcome.refresh.embedded > 0
    store.close()
    service.close()


def test_cache_errors_say_the_cache_may_be_deleted(tmp_path: Path) -> None:
    path = tmp_path / "cache" / CACHE_FILE_NAME
    path.mkdir(parents=True)  # a folder where the file should be: neither damage nor a lock
    with pytest.raises(EmbeddingError, match="only a cache: deleting the file is safe"):
        EmbeddingCache(path).get_many(MODEL, ["x"])


# ---------------------------------------------------------------------------------- schema store


@pytest.mark.parametrize("where", ["header pages", "pages after the header"])
def test_a_damaged_schema_store_names_the_file_and_what_it_holds(nl2sql_home: Path, where: str) -> None:
    path = nl2sql_home / "schema_store.db"
    store = SqlSchemaStore(f"sqlite:///{path}")
    for i in range(3):  # a few pages of snapshots
        store.register_snapshot(shop_snapshot(datasource_id=f"shop_{i}"))
    store.close()
    damage(path, *DAMAGE[where])
    store = SqlSchemaStore(f"sqlite:///{path}")
    for read in (store.list_datasources, lambda: store.get_latest("shop_0")):
        with pytest.raises(errors.SchemaStoreCorruptError) as caught:
            read()
        assert isinstance(caught.value, SchemaStoreError)
        text = str(caught.value)
        assert str(path) in text and "holds every schema snapshot" in text and "backup" in text
    store.close()


def test_drift_on_a_damaged_schema_store_fails_and_never_says_unchanged(nl2sql_home: Path, tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, total REAL)")
    (nl2sql_home / "datasources.yaml").write_text(f"datasources:\n  - id: shop\n    url: sqlite:///{db}\n")
    settings = Settings.from_env({"NL2SQL_HOME": str(nl2sql_home)})
    store = build_schema_store(settings)
    index_datasource(DatasourceConfig(id="shop", url=f"sqlite:///{db}"), store,
                     build_vector_store(settings, embeddings()))
    store.close()
    assert "shop: unchanged" in cli(nl2sql_home, "drift").stdout
    damage(nl2sql_home / "schema_store.db", *DAMAGE["header pages"])
    done = cli(nl2sql_home, "drift")
    assert "unchanged" not in done.stdout
    assert "shop: failed" in done.stdout and "holds every schema snapshot" in done.stdout


def test_vector_store_errors_stay_in_one_family() -> None:
    """What callers catch: the corrupt errors are the stores' own errors."""
    assert issubclass(errors.VectorStoreCorruptError, VectorStoreError)
    assert not issubclass(errors.VectorStoreCorruptError, errors.VectorStoreUnavailableError)
    assert issubclass(errors.SchemaStoreCorruptError, SchemaStoreError)
