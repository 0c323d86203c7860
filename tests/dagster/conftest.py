"""Fixtures for the Dagster tests: a small real SQLite datasource, an isolated instance, a fast embedder.

The embedder here is the hash fake (tests/fakes.py) behind the ``embeddings`` resource, for
speed; the end-to-end tests use the real ONNX model.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import yaml

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.embeddings import EmbedResult
from nl2sql_assets.indexing.models import ModelIdentity
from resources.embeddings import EmbeddingsResource
from tests.fakes import HashEmbedder

SHOP_DDL = """
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT,
    country TEXT
);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    ordered_at TEXT NOT NULL,
    status TEXT NOT NULL,
    total NUMERIC(10, 2) NOT NULL
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    price NUMERIC(10, 2)
);
"""


class HashEmbeddingService:
    """The EmbeddingService surface the vector store uses, over the hash fake; counts embeds."""

    def __init__(self, dimension: int = 64) -> None:
        self._embedder = HashEmbedder(dimension)
        self.documents_embedded = 0

    @property
    def identity(self) -> ModelIdentity:
        return self._embedder.identity

    def embed_documents(self, texts: Sequence[str]) -> EmbedResult:
        self.documents_embedded += len(texts)
        return EmbedResult(vectors=self._embedder.embed(list(texts)), embedded=len(texts), from_cache=0)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embedder.embed([text])[0]


class HashEmbeddingsResource(EmbeddingsResource):
    """``embeddings`` resource with the hash fake instead of the ONNX model (unit speed)."""

    dimension: int = 64

    def get_service(self) -> HashEmbeddingService:  # type: ignore[override]
        if self._service is None:
            self._service = HashEmbeddingService(self.dimension)  # type: ignore[assignment]
        return self._service  # type: ignore[return-value]


def make_shop_db(path: Path, *, rows: bool = True) -> str:
    """A small SQLite shop database; returns its URL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(SHOP_DDL)
        if rows:
            conn.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", [
                (i, f"Customer {i}", f"c{i}@example.com", ["DE", "FR", "NL"][i % 3]) for i in range(1, 31)])
            conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?)", [
                (i, 1 + i % 30, f"2025-0{1 + i % 9}-1{i % 9}", ["paid", "open"][i % 2], 10.5 * i)
                for i in range(1, 61)])
            conn.executemany("INSERT INTO products VALUES (?, ?, ?)", [
                (i, f"Product {i}", 2.5 * i) for i in range(1, 11)])
    return f"sqlite:///{path}"


def write_datasources(path: Path, entries: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump({"datasources": entries}, sort_keys=False), encoding="utf-8")
    return path


def run_sql(url: str, sql: str) -> None:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.executescript(sql)


@pytest.fixture(autouse=True)
def _default_asset_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default group and no owners, whatever the developer's shell exports."""
    monkeypatch.delenv("NL2SQL_ASSET_OWNERS", raising=False)
    monkeypatch.delenv("NL2SQL_ASSET_GROUP", raising=False)


@pytest.fixture
def shop_home(nl2sql_home: Path) -> Path:
    """NL2SQL_HOME with two small SQLite datasources (``shop``, ``crm``) in its datasources file."""
    shop = make_shop_db(nl2sql_home / "data" / "shop.db")
    crm = make_shop_db(nl2sql_home / "data" / "crm.db", rows=False)
    write_datasources(nl2sql_home / "datasources.yaml", [
        {"id": "shop", "url": shop, "description": "Orders and customers of the web shop",
         "domains": ["commerce"], "example_questions": ["Revenue by month?"]},
        {"id": "crm", "url": crm, "tenant": "other"},
    ])
    return nl2sql_home


@pytest.fixture
def dagster_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A DAGSTER_HOME on tmpfs where there is one: the real SQLite instance and dagster.yaml,
    without paying the disk's fsync latency on every event (the suite stays fast)."""
    shm = Path("/dev/shm")
    home = Path(tempfile.mkdtemp(prefix="dagster_home_", dir=shm if shm.is_dir() else None))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def settings(shop_home: Path, dagster_home: Path) -> Settings:
    return Settings.from_env()


@pytest.fixture
def instance(settings: Settings) -> Iterator[object]:
    """The Dagster instance in ``settings.dagster_home``, created from the embedded dagster.yaml."""
    from nl2sql_assets.app.instance import prepare_instance

    inst = prepare_instance(settings)
    try:
        yield inst
    finally:
        inst.dispose()
