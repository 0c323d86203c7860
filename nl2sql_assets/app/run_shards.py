"""Per-run event-log shards of a SQLite Dagster instance, made ready before each in-process run.

On the embedded instance every run writes its events (about fifty for an ``index_job`` run) to
a SQLite file of its own, ``history/runs/<run_id>.db``. Dagster creates that file on the run's
first event (tables, indexes and an alembic stamp: a dozen synced commits) and opens a new
connection for every event; with nobody else holding the file, SQLite checkpoints the WAL and
deletes it at every close. For a command that executes one run per datasource, that was the
larger part of what is not indexing work. :class:`RunShards` builds one initialized shard per
command (a template, outside the instance folder), copies it into place under the run id
before the run starts and holds an idle connection to it while the run executes, so each
event is one insert and one commit. Durability is unchanged (every commit still syncs the
WAL); the run's records are the ones Dagster writes itself. Nothing to do on PostgreSQL, and
any failure here only costs the speed-up: the run then creates its shard as before.

Dagster's SQLite event log also builds a new SQLAlchemy engine for every connection it opens
(``create_engine``, about fifty times per run: about 0.3 s of CPU per run, measured with cProfile
on 10 runs of small datasources). While a command runs, :class:`RunShards` keeps one engine per shard instead: the same
``NullPool`` engine, so every use still opens and closes its own SQLite connection, under the
storage's own lock, exactly as Dagster does; only the engine is built once. Its ``has_table``
(another new engine and a catalog read, asked hundreds of times per command, whether partitions
or asset checks are supported) remembers the tables it found: tables are never dropped while a
command runs.

:func:`wal_sync_normal` lets the command's own connections to the instance's SQLite files
commit with ``synchronous=NORMAL`` (WAL mode), as the schema store does: a commit no longer
waits for its own fsync (the WAL is synced at checkpoints). A killed process loses nothing; a
power loss can lose the last events of the run in progress, never the indexes (schema store and
Chroma, which the next command compares against) and never the database's integrity.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy as sa

log = logging.getLogger(__name__)


class RunShards:
    """Ready-made event-log shards for the runs of one command (a no-op off SQLite)."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._storage = instance.event_log_storage
        self._folder: Path | None = None
        self._template: Path | None = None
        self._engines: dict[str, sa.engine.Engine] = {}
        self._patched = False
        if not type(self._storage).__name__.startswith("Sqlite"):
            return
        try:
            self._template = self._build_template()
        except Exception as exc:  # noqa: BLE001 - only a speed-up: runs create their own shards
            log.debug("no run-shard template (%s): runs create their shards themselves", exc)
            self.close()
            return
        try:
            from dagster._core.storage.sql import create_engine
            from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
        except ImportError:  # another Dagster layout: its own connections, as before
            return
        self._create_engine, self._busy_timeout = create_engine, SQLITE_BUSY_TIMEOUT_SECONDS
        if all(hasattr(self._storage, a) for a in ("_db_lock", "_initdb", "_initialized_dbs",
                                                   "conn_string_for_shard", "has_table")):
            found: set[str] = set()
            has_table = self._storage.has_table  # type: ignore[attr-defined]

            def remembered(table_name: str) -> bool:
                if table_name not in found and has_table(table_name):
                    found.add(table_name)
                return table_name in found

            self._storage._connect = self._connect  # type: ignore[attr-defined]  # shadows the method
            self._storage.has_table = remembered  # type: ignore[attr-defined]
            self._patched = True

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Any]:
        """Dagster's ``SqliteEventLogStorage._connect`` with one engine per shard (see the module docstring)."""
        from sqlalchemy.pool import NullPool

        storage: Any = self._storage
        with storage._db_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = self._engines[shard] = self._create_engine(
                    storage.conn_string_for_shard(shard), poolclass=NullPool,
                    connect_args={"timeout": self._busy_timeout})
            if shard not in storage._initialized_dbs:
                storage._initdb(engine)
                storage._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _build_template(self) -> Path:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self._folder = Path(tempfile.mkdtemp(prefix="nl2sql-run-shard-"))
        template = self._folder / "template.db"
        engine = create_engine(f"sqlite:///{template}", poolclass=NullPool)
        try:
            self._storage._initdb(engine)  # type: ignore[attr-defined]  # Dagster's own schema + stamp
        finally:
            engine.dispose()
        return template

    @property
    def enabled(self) -> bool:
        return self._template is not None

    @staticmethod
    def new_run_id() -> str:
        """A run id in Dagster's format (a UUID4), chosen before the run so its shard can be made."""
        return str(uuid.uuid4())

    @contextmanager
    def ready(self, run_id: str) -> Iterator[None]:
        """The shard of ``run_id`` in place and held open while the block (the run) executes."""
        if self._template is None:
            yield
            return
        conn: sqlite3.Connection | None = None
        try:
            path = Path(self._storage.path_for_shard(run_id))  # type: ignore[attr-defined]
            if not path.exists():
                shutil.copyfile(self._template, path)
                initialized = getattr(self._storage, "_initialized_dbs", None)
                if isinstance(initialized, set):
                    initialized.add(run_id)  # stamped at head: Dagster's init check would find nothing to do
            conn = sqlite3.connect(path, timeout=30)
            # a read maps the WAL index: from here on this connection counts as open, and
            # Dagster's per-event connections close without a checkpoint (no lock is held)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except (OSError, sqlite3.Error) as exc:
            log.debug("run shard of %s not prepared (%s)", run_id, exc)
        try:
            with closing(conn) if conn is not None else _nothing():
                yield
        finally:
            with getattr(self._storage, "_db_lock", _nothing()):
                engine = self._engines.pop(run_id, None)
            if engine is not None:
                engine.dispose()

    def close(self) -> None:
        """Restore the storage's own connections and remove the template; safe to call twice."""
        if self._patched:
            self._patched = False
            self._storage.__dict__.pop("_connect", None)
            self._storage.__dict__.pop("has_table", None)
        engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.dispose()
        folder, self._folder, self._template = self._folder, None, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def wal_sync_normal(instance: dg.DagsterInstance) -> Iterator[None]:
    """While the block runs, new connections of this process to SQLite files under the
    instance's root commit with ``synchronous=NORMAL`` (see the module docstring)."""
    root = getattr(instance, "root_directory", None)
    if not root or not type(instance.event_log_storage).__name__.startswith("Sqlite"):
        yield
        return
    prefix = str(Path(root).resolve()) + "/"

    def on_connect(dbapi_conn: object, _record: object) -> None:
        if not isinstance(dbapi_conn, sqlite3.Connection):
            return
        try:
            row = dbapi_conn.execute("PRAGMA database_list").fetchone()
            if row and row[2] and str(Path(row[2]).resolve()).startswith(prefix):
                dbapi_conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error:
            return  # only a speed-up

    sa.event.listen(sa.engine.Engine, "connect", on_connect)
    try:
        yield
    finally:
        sa.event.remove(sa.engine.Engine, "connect", on_connect)


@contextmanager
def _nothing() -> Iterator[None]:
    yield
