"""Every outside call has a deadline: a server that accepts connections but does not answer, or
a table another session holds locked, costs a bounded wait and a clear outcome, never a hang.

Real servers: a ``chroma run`` process stopped with SIGSTOP (its socket still accepts), and
``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`` / ``LOCK TABLES ... WRITE`` held by another session
on PostgreSQL and MariaDB. Each slow call runs in a worker thread or a process of its own, so
code that does hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa

from nl2sql_assets.adapters.factory import open_adapter
from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.errors import DatasourceUnavailableError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.store import build_schema_store
from tests.chroma_server import ChromaServer, start_or_skip
from tests.chunk_samples import shop_snapshot
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
#: What a caller may wait for a Chroma server that does not answer (the client's opening
#: deadline, 10 s, plus starting a process and loading the model), and for a locked table.
CHROMA_DEADLINE_S = 25.0
LOCK_DEADLINE_S = 12.0


def finishes_within(seconds: float, fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` run in a daemon thread: its result and how long it took; fails the test when it
    does not finish in time (the thread is left behind, as a hung call would be)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    elapsed = time.monotonic() - started
    if worker.is_alive():
        pytest.fail(f"still waiting after {seconds:g} s: no deadline applied")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["result"], elapsed  # type: ignore[return-value]


# ---------------------------------------------------------------------------------- Chroma


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = start_or_skip(ChromaServer(tmp_path_factory.mktemp("hang-chroma") / "data"))
    yield server
    server.stop()


class Stopped:
    """SIGSTOP on the server's process group: connections are still accepted, nothing answers."""

    def __init__(self, server: ChromaServer) -> None:
        assert server._proc is not None and server.running
        self.pgid = server._proc.pid  # started with start_new_session: its own group

    def __enter__(self) -> Stopped:
        os.killpg(self.pgid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        os.killpg(self.pgid, signal.SIGCONT)


@pytest.fixture
def shop_home(nl2sql_home: Path) -> Path:
    """A home whose schema store holds the shop snapshot (retrieval's fallback source)."""
    store = build_schema_store(Settings.from_env({"NL2SQL_HOME": str(nl2sql_home)}))
    store.register_snapshot(shop_snapshot())
    store.close()
    return nl2sql_home


def cli(home: Path, server: ChromaServer, *args: str, timeout_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    """``nl2sql-assets ARGS`` against the Chroma server, in a process of its own (this checkout's code)."""
    env = {**os.environ, "NL2SQL_HOME": str(home), "PYTHONPATH": str(ROOT), "CHROMA_HOST": server.host,
           "CHROMA_PORT": str(server.port)}
    for var in ("SCHEMA_STORE_URL", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL"):
        env.pop(var, None)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nl2sql-assets {args[0]} still waiting after {timeout_s:g} s: no deadline applied")
    return done, time.monotonic() - started


@pytest.mark.server
def test_retrieve_falls_back_when_the_chroma_server_does_not_answer(
        chroma_server: ChromaServer, shop_home: Path) -> None:
    with Stopped(chroma_server):
        done, elapsed = cli(shop_home, chroma_server, "retrieve", "email address of a customer", "--json",
                            timeout_s=CHROMA_DEADLINE_S)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["datasource"] == "shop" and result["fallback"] == "vector_store_unavailable"
    assert {t["name"] for t in result["tables"]} == {t.name for t in shop_snapshot().tables}
    assert any("did not answer within" in w for w in result["warnings"]), result["warnings"]
    assert elapsed < CHROMA_DEADLINE_S


@pytest.mark.server
def test_retrieve_batch_falls_back_when_the_chroma_server_does_not_answer(
        chroma_server: ChromaServer, shop_home: Path, tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "question": q}) for i, q in enumerate(
        ["email address of a customer", "revenue per month", "orders shipped to which city"])) + "\n")
    with Stopped(chroma_server):
        done, elapsed = cli(shop_home, chroma_server, "retrieve", "--batch", str(source), "--out", str(out),
                            timeout_s=CHROMA_DEADLINE_S)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == [0, 1, 2]
    assert all(line["fallback"] == "vector_store_unavailable" and line["tables"] for line in lines)
    assert elapsed < CHROMA_DEADLINE_S


@pytest.mark.server
def test_a_server_that_stops_answering_later_gives_the_fallback_within_the_read_deadline(
        chroma_server: ChromaServer, shop_home: Path) -> None:
    """The client is built and has served; then the server stops: each request has its deadline."""
    settings = Settings.from_env({"NL2SQL_HOME": str(shop_home), "CHROMA_HOST": chroma_server.host,
                                  "CHROMA_PORT": str(chroma_server.port)})
    service = EmbeddingService(HashEmbedder(384))  # type: ignore[arg-type]
    collection = f"t_{uuid.uuid4().hex[:12]}"
    vectors = build_vector_store(settings, service, collection_name=collection)
    chunk_set = build_chunks(shop_snapshot())
    vectors.refresh_schema_chunks(chunk_set.datasource_id, chunk_set.schema_version, chunk_set.chunks,
                                  tenant_id=chunk_set.tenant_id)
    schema_store = build_schema_store(settings)
    retriever = SchemaRetriever(schema_store, vectors, service)
    assert retriever.retrieve("email address of a customer").fallback is None
    time.sleep(2.1)  # past the live versions' reuse time: the next question reads Chroma again
    with Stopped(chroma_server):
        result, elapsed = finishes_within(CHROMA_DEADLINE_S, lambda: retriever.retrieve("revenue per month"))
    assert result.fallback == "vector_store_unavailable" and result.tables
    assert any("timed out" in w.lower() or "timeout" in w.lower() for w in result.warnings), result.warnings
    assert elapsed < 20.0
    schema_store.close()


# ---------------------------------------------------------------------------------- locked tables


def snapshot_of(url: str, **config: object) -> Callable[[], SchemaSnapshot]:
    adapter = open_adapter(DatasourceConfig(id="locked", url=url, **config), stats_budget_s=30.0)  # type: ignore[arg-type]

    def read() -> SchemaSnapshot:
        try:
            return adapter.read_snapshot(datetime.now(UTC))
        finally:
            adapter.close()

    return read


def assert_locked_table_skipped(snapshot: SchemaSnapshot, locked: str, elapsed: float) -> None:
    tables = {t.name: t for t in snapshot.tables}
    assert tables[locked].row_count_status == "skipped"
    assert "locked by another session" in (tables[locked].stats_note or "")
    assert any(w.startswith("table ") and locked in w and "locked by another session" in w
               for w in snapshot.warnings), snapshot.warnings
    assert tables["free"].row_count == 3 and tables["free"].row_count_status == "exact"
    assert elapsed < LOCK_DEADLINE_S


@pytest.mark.server
def test_statistics_skip_a_table_locked_on_postgresql(pg_schema: str, postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".busy (id int PRIMARY KEY, name text)')
        conn.exec_driver_sql(f"INSERT INTO \"{pg_schema}\".busy VALUES (1, 'a'), (2, 'b')")
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".free (id int PRIMARY KEY, name text)')
        conn.exec_driver_sql(f"INSERT INTO \"{pg_schema}\".free VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    holder = engine.connect()
    try:
        holder.exec_driver_sql("BEGIN")
        holder.exec_driver_sql(f'LOCK TABLE "{pg_schema}".busy IN ACCESS EXCLUSIVE MODE')
        snapshot, elapsed = finishes_within(LOCK_DEADLINE_S, snapshot_of(postgres_url, schemas=[pg_schema]))
    finally:
        holder.exec_driver_sql("ROLLBACK")
        holder.close()
        engine.dispose()
    assert_locked_table_skipped(snapshot, "busy", elapsed)


@pytest.mark.server
def test_statistics_skip_a_table_locked_on_mariadb(mariadb_url: str) -> None:
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE busy (id int PRIMARY KEY, name varchar(20))")
        conn.exec_driver_sql("INSERT INTO busy VALUES (1, 'a'), (2, 'b')")
        conn.exec_driver_sql("CREATE TABLE free (id int PRIMARY KEY, name varchar(20))")
        conn.exec_driver_sql("INSERT INTO free VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    holder = engine.connect()
    try:
        holder.exec_driver_sql("LOCK TABLES busy WRITE")
        snapshot, elapsed = finishes_within(LOCK_DEADLINE_S, snapshot_of(mariadb_url))
    finally:
        holder.exec_driver_sql("UNLOCK TABLES")
        holder.close()
        engine.dispose()
    assert_locked_table_skipped(snapshot, "busy", elapsed)


@pytest.fixture
def private_pg_database(postgres_url: str) -> Iterator[str]:
    """A database of its own: its catalog can be locked without touching anyone else's."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.mark.server
def test_the_structure_read_fails_clearly_when_the_catalog_is_locked(private_pg_database: str) -> None:
    engine = sa.create_engine(private_pg_database, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (id int PRIMARY KEY)")
    holder = engine.connect()
    adapter = open_adapter(DatasourceConfig(id="locked", url=private_pg_database))
    try:
        holder.exec_driver_sql("BEGIN")  # what a long DDL transaction or a maintenance job does
        holder.exec_driver_sql("LOCK TABLE pg_catalog.pg_description IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(DatasourceUnavailableError, match="lock timeout"):
            finishes_within(LOCK_DEADLINE_S, adapter.read_structure)
    finally:
        holder.exec_driver_sql("ROLLBACK")
        holder.close()
        adapter.close()
        engine.dispose()
