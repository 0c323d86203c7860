"""Shared fixtures: real databases, an isolated NL2SQL_HOME, server detection.

SQLite and DuckDB are always available. PostgreSQL and MariaDB are expected on 127.0.0.1
(override with TEST_POSTGRES_URL / TEST_MARIADB_URL); where none answers the tests skip
with the reason, except under CI=true, where a missing server fails the test.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
MARIADB_URL = os.environ.get("TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")
IN_CI = os.environ.get("CI", "").lower() == "true"
FIXTURES = Path(__file__).parent / "fixtures"


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_server(url: str, what: str) -> None:
    """Skip (or, under CI=true, fail) when the server behind ``url`` does not answer."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 0
    if port_open(host, port):
        return
    message = f"{what} is not answering on {host}:{port}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true requires it)")
    pytest.skip(message)


@pytest.fixture
def nl2sql_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh NL2SQL_HOME with every contract variable cleared."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("NL2SQL_DATASOURCES", "DAGSTER_HOME", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL",
                "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENRICHMENT", "CHROMA_HOST", "CHROMA_PORT",
                "SCHEMA_STORE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NL2SQL_HOME", str(home))
    return home


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL whose search path is a fresh schema, dropped afterwards.

    Yields the server URL; the schema name is in ``request.node.pg_schema`` style via the
    ``pg_schema`` fixture. Most tests want :func:`pg_schema` instead.
    """
    require_server(POSTGRES_URL, "PostgreSQL")
    yield POSTGRES_URL


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A fresh PostgreSQL schema name (created, dropped afterwards)."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        engine.dispose()


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A URL of a fresh MariaDB database (created, dropped afterwards)."""
    import sqlalchemy as sa

    require_server(MARIADB_URL, "MariaDB")
    name = f"t_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(MARIADB_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    base = MARIADB_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}?charset=utf8mb4"
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'db.sqlite'}"


@pytest.fixture
def duckdb_url(tmp_path: Path) -> str:
    return f"duckdb:///{tmp_path / 'db.duckdb'}"


@pytest.fixture(scope="session")
def local_embedder():
    """The real local embedding model (all-MiniLM-L6-v2 ONNX), loaded once per test session."""
    from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder

    embedder = OnnxMiniLMEmbedder()
    embedder.load()
    return embedder
