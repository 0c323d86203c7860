"""SQLAlchemy-backed SchemaStore: versioned snapshots in SQLite (default) or any SQLAlchemy URL.

Two tables: ``nl2sql_schema_datasources`` (one row per datasource: tenant and latest version,
also the per-datasource write lock) and ``nl2sql_schema_versions`` (one row per version: the
snapshot as canonical JSON plus its fingerprint, metadata hash and registration ``seq``).
Unique constraints on (datasource_id, schema_version) and (datasource_id, seq) make a
duplicate impossible; every write runs in one transaction that first locks the datasource
row (``SELECT ... FOR UPDATE``; on SQLite ``BEGIN IMMEDIATE``), and conflicts, locks and
deadlocks are retried, so concurrent processes serialize per datasource.

PostgreSQL schema: put the tables in a schema other than ``public`` through the URL, e.g.
``postgresql+psycopg2://user@host/db?options=-csearch_path%3Dnl2sql`` (the schema must exist).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from nl2sql_assets.config import Settings, redact_text, url_password, url_secrets
from nl2sql_assets.errors import ConfigError, SchemaStoreCorruptError, SchemaStoreError, SchemaVersionNotFoundError
from nl2sql_assets.schema.fingerprint import canonical_json, make_schema_version, parse_schema_version
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.protocol import RegisterResult, RegisterStatus, SchemaStore, VersionInfo
from nl2sql_assets.sqlite_health import guard_sqlite_engine

__all__ = [
    "RegisterResult", "RegisterStatus", "SchemaStore", "SqlSchemaStore", "VersionInfo", "build_schema_store",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_WRITE_OPTION = "nl2sql_schema_store_write"
_RETRY_SQLSTATES = {"40001", "40P01", "55P03"}  # serialization failure, deadlock, lock not available
_RETRY_MYSQL_CODES = {1205, 1213}  # lock wait timeout, deadlock
_RETRY_SQLITE_TEXT = ("database is locked", "database table is locked", "database is busy")


class _Tables(NamedTuple):
    metadata: sa.MetaData
    datasources: sa.Table
    versions: sa.Table


def _build_tables() -> _Tables:
    md = sa.MetaData()
    long_text = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
    stamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    datasources = sa.Table(
        "nl2sql_schema_datasources", md,
        sa.Column("datasource_id", sa.String(128), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("latest_seq", sa.Integer, nullable=False),
        sa.Column("latest_version", sa.String(32), nullable=False),
        sa.Column("updated_at", stamp, nullable=False),
    )
    versions = sa.Table(
        "nl2sql_schema_versions", md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("datasource_id", sa.String(128), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("schema_version", sa.String(32), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("metadata_hash", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("captured_at", stamp, nullable=False),
        sa.Column("registered_at", stamp, nullable=False),
        sa.Column("updated_at", stamp, nullable=False),
        sa.Column("snapshot_json", long_text, nullable=False),
        sa.UniqueConstraint("datasource_id", "schema_version", name="uq_nl2sql_schema_versions_version"),
        sa.UniqueConstraint("datasource_id", "seq", name="uq_nl2sql_schema_versions_seq"),
    )
    return _Tables(md, datasources, versions)


def _naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _is_retryable(exc: sa.exc.DBAPIError) -> bool:
    if isinstance(exc, sa.exc.IntegrityError):
        return True  # a concurrent writer took the seq/version/datasource row first: re-read and retry
    orig = exc.orig
    if getattr(orig, "pgcode", None) in _RETRY_SQLSTATES:
        return True
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int) and args[0] in _RETRY_MYSQL_CODES:
        return True
    text = str(orig).lower()
    return any(marker in text for marker in _RETRY_SQLITE_TEXT)


class SqlSchemaStore:
    """A :class:`SchemaStore` on any SQLAlchemy URL; tables are created on first use.

    Args:
        url: SQLAlchemy URL. ``sqlite:///path.db`` (parent folder created on first use),
            ``sqlite://`` for a private in-memory store (single-threaded tests), ``postgresql+psycopg2://...``
            (add ``?options=-csearch_path%3D<schema>`` to use a schema other than ``public``),
            ``mysql+pymysql://...?charset=utf8mb4``.
        max_attempts: how often a write is tried when it meets a conflict, lock or deadlock.
        busy_timeout_s: how long SQLite waits for another process's write lock.

    Raises:
        SchemaStoreError: the URL is malformed or its driver is missing (password masked).
    """

    def __init__(self, url: str, *, max_attempts: int = 30, busy_timeout_s: float = 30.0) -> None:
        self._url = url
        self._secrets: list[str] = url_secrets(url)  # userinfo password, ?password=, ...: written and decoded
        self.safe_url = redact_text(url, self._secrets)
        self._max_attempts = max(1, max_attempts)
        self._ready = False
        self._ready_lock = threading.Lock()
        self._t = _build_tables()
        try:
            parsed = sa.engine.make_url(url)
        except Exception as exc:  # noqa: BLE001 - any parse failure is a bad URL (its text may quote the password)
            why = "percent-encode '@', ':' and '/' in the password" if url_password(url) else self._redact(exc)
            raise SchemaStoreError(f"not a valid SQLAlchemy URL ({why})", store=self.safe_url) from None
        if parsed.host and "@" in parsed.host:  # the driver would print this "host": the password's tail
            raise SchemaStoreError("its host holds '@': percent-encode '@' in the password (%40)", store=self.safe_url)
        self._sqlite_path: Path | None = None
        try:
            if parsed.get_backend_name() == "sqlite":
                self._engine = self._sqlite_engine(parsed, busy_timeout_s)
            else:
                self._engine = sa.create_engine(parsed, pool_pre_ping=True)
        except (ImportError, sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
            raise SchemaStoreError(f"cannot create an engine: {self._redact(exc)}", store=self.safe_url) from None

    # -- engine --------------------------------------------------------------------------

    def _sqlite_engine(self, parsed: sa.URL, busy_timeout_s: float) -> Engine:
        database = parsed.database or ""
        in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
        if in_memory:
            engine = sa.create_engine(parsed, poolclass=StaticPool,
                                      connect_args={"check_same_thread": False, "timeout": busy_timeout_s})
        else:
            self._sqlite_path = Path(database).expanduser()
            engine = sa.create_engine(parsed, connect_args={"timeout": busy_timeout_s})

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            # Let SQLAlchemy's "begin" hook issue BEGIN itself, so writes can take the lock up front.
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
                if not in_memory:
                    try:
                        cursor.execute("PRAGMA journal_mode = WAL")
                        cursor.execute("PRAGMA synchronous = NORMAL")
                    except Exception:  # noqa: BLE001 - WAL is an optimisation (readers never wait)
                        logger.debug("schema store: WAL journal mode unavailable, using the default")
            finally:
                cursor.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get(_WRITE_OPTION, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        if not in_memory:  # a damaged file: a clear error (it holds every snapshot), never "nothing stored"
            guard_sqlite_engine(engine, lambda problem: SchemaStoreCorruptError(
                str(self._sqlite_path), problem, store=self.safe_url))
        return engine

    def _redact(self, exc: BaseException | str) -> str:
        return redact_text(str(exc), self._secrets)

    def _ensure_ready(self) -> None:
        """Create the parent folder (SQLite) and the tables, once; safe against concurrent creators."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            if self._sqlite_path is not None:
                try:
                    self._sqlite_path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise SchemaStoreError(f"cannot create the folder {self._sqlite_path.parent}: {exc}",
                                           store=self.safe_url) from None
            last: Exception | None = None
            for attempt in range(5):
                try:
                    with self._engine.connect() as conn:
                        conn.execution_options(**{_WRITE_OPTION: True})
                        with conn.begin():
                            self._t.metadata.create_all(conn, checkfirst=True)
                    self._ready = True
                    return
                except (sa.exc.ProgrammingError, sa.exc.IntegrityError, sa.exc.OperationalError) as exc:
                    # Another process may have created the same table a moment ago; look again.
                    last = exc
                    if not (_is_retryable(exc) or "already exists" in str(exc).lower()):
                        break
                    time.sleep(0.05 * (attempt + 1) + random.random() * 0.05)
                except sa.exc.SQLAlchemyError as exc:
                    last = exc
                    break
            raise SchemaStoreError(f"cannot open or create its tables: {self._redact(_cause(last))}",
                                   store=self.safe_url) from None

    def _run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction; retry conflicts and locks, wrap every other DB error."""
        self._ensure_ready()
        last: Exception | None = None
        for attempt in range(self._max_attempts):
            try:
                with self._engine.connect() as conn:
                    if write:
                        conn.execution_options(**{_WRITE_OPTION: True})
                    with conn.begin():
                        return fn(conn)
            except sa.exc.DBAPIError as exc:
                if not _is_retryable(exc):
                    raise SchemaStoreError(self._redact(_cause(exc)), store=self.safe_url) from None
                last = exc
                logger.debug("schema store: retrying after a conflict (attempt %d)", attempt + 1)
                time.sleep(min(0.5, 0.01 * 2 ** min(attempt, 6)) * (0.5 + random.random()))
            except sa.exc.SQLAlchemyError as exc:
                raise SchemaStoreError(self._redact(_cause(exc)), store=self.safe_url) from None
        raise SchemaStoreError(f"gave up after {self._max_attempts} attempts: {self._redact(_cause(last))}",
                               store=self.safe_url)

    # -- reads ---------------------------------------------------------------------------

    def _latest_row(self, conn: Connection, datasource_id: str) -> sa.Row | None:
        v = self._t.versions
        return conn.execute(
            sa.select(v).where(v.c.datasource_id == datasource_id).order_by(v.c.seq.desc()).limit(1)
        ).first()

    def _version_row(self, conn: Connection, datasource_id: str, schema_version: str) -> sa.Row | None:
        v = self._t.versions
        return conn.execute(
            sa.select(v).where(v.c.datasource_id == datasource_id, v.c.schema_version == schema_version)
        ).first()

    def _snapshot_of(self, row: sa.Row) -> SchemaSnapshot:
        try:
            return SchemaSnapshot.model_validate_json(row.snapshot_json)
        except ValueError as exc:
            raise SchemaStoreError(
                f"stored snapshot of '{row.datasource_id}' version '{row.schema_version}' is unreadable: "
                f"{str(exc).splitlines()[0]}", store=self.safe_url) from None

    def propose_version(self, datasource_id: str, fingerprint: str, captured_at: datetime) -> str:
        """The version a snapshot with ``fingerprint`` captured at ``captured_at`` would get now.

        The latest version when it has this fingerprint; otherwise a new
        ``YYYYMMDDhhmmss_<fp8>`` whose time is moved forward second by second until it is
        later than the latest version's, so versions sort in registration order. Pure read.
        """
        row = self._run(lambda conn: self._latest_row(conn, datasource_id), write=False)
        return _propose(row, fingerprint, captured_at)

    def get_snapshot(self, datasource_id: str, schema_version: str | None = None) -> SchemaSnapshot:
        """A stored snapshot with ``schema_version`` set (None: the latest).

        Raises:
            SchemaVersionNotFoundError: no such datasource or version.
        """
        def read(conn: Connection) -> sa.Row | None:
            if schema_version is None:
                return self._latest_row(conn, datasource_id)
            return self._version_row(conn, datasource_id, schema_version)

        row = self._run(read, write=False)
        if row is None:
            raise SchemaVersionNotFoundError(datasource_id, schema_version)
        return self._snapshot_of(row)

    def get_latest(self, datasource_id: str) -> SchemaSnapshot | None:
        """The latest snapshot, or None when the datasource has never been registered."""
        row = self._run(lambda conn: self._latest_row(conn, datasource_id), write=False)
        return None if row is None else self._snapshot_of(row)

    def list_versions(self, datasource_id: str) -> list[VersionInfo]:
        """Every stored version of the datasource, oldest to newest (empty when unknown)."""
        return self._versions(datasource_id).get(datasource_id, [])

    def all_versions(self) -> dict[str, list[VersionInfo]]:
        """Every datasource's versions, oldest to newest, in one query."""
        return self._versions(None)

    def _versions(self, datasource_id: str | None) -> dict[str, list[VersionInfo]]:
        v = self._t.versions
        query = sa.select(*[c for c in v.c if c.name != "snapshot_json"]).order_by(v.c.datasource_id, v.c.seq)
        if datasource_id is not None:
            query = query.where(v.c.datasource_id == datasource_id)
        rows = self._run(lambda conn: conn.execute(query).all(), write=False)
        out: dict[str, list[VersionInfo]] = {}
        for r in rows:
            out.setdefault(r.datasource_id, []).append(VersionInfo(**{
                **r._asdict(), "captured_at": _aware(r.captured_at), "registered_at": _aware(r.registered_at),
                "updated_at": _aware(r.updated_at)}))
        return out

    def list_datasources(self, tenant: str | None = None) -> list[str]:
        """Registered datasource ids, sorted; with ``tenant``, only those whose latest version belongs to it."""
        d = self._t.datasources
        query = sa.select(d.c.datasource_id).order_by(d.c.datasource_id)
        if tenant is not None:
            query = query.where(d.c.tenant == tenant)
        return list(self._run(lambda conn: conn.execute(query).scalars().all(), write=False))

    def datasource_tenant(self, datasource_id: str) -> str | None:
        """The tenant of the datasource's latest version; None when it is not registered."""
        d = self._t.datasources
        return self._run(lambda conn: conn.execute(
            sa.select(d.c.tenant).where(d.c.datasource_id == datasource_id)).scalar(), write=False)

    # -- writes --------------------------------------------------------------------------

    def register_snapshot(self, snapshot: SchemaSnapshot, schema_version: str | None = None) -> RegisterResult:
        """Store ``snapshot``; idempotent per structure.

        - an existing ``schema_version`` with the same fingerprint, or (without one) a latest
          version with the same fingerprint: that version is kept; if the metadata hash
          differs, its stored snapshot is replaced (``metadata_updated``), else ``unchanged``
          (the stored snapshot is returned). A requested but absent ``schema_version`` whose
          structure equals the latest also resolves to the latest version: check
          ``result.schema_version``.
        - a new structure (including one equal to an older, non-latest version) gets a new
          version: ``schema_version`` when given, else :meth:`propose_version`.

        ``schema_version`` defaults to ``snapshot.schema_version``, so a stored snapshot that
        was enriched and registered again updates exactly its own version.

        Raises:
            SchemaStoreError: ``schema_version`` is malformed, does not end with the
                snapshot's fingerprint prefix, names a stored version of another
                structure, or is not later than the latest version.
        """
        fp = snapshot.fingerprint
        if schema_version is None:
            schema_version = snapshot.schema_version
        if schema_version is not None:
            try:
                parse_schema_version(schema_version)
            except ValueError as exc:
                raise SchemaStoreError(str(exc), store=self.safe_url) from None
            if not schema_version.endswith("_" + fp[:8]):
                raise SchemaStoreError(
                    f"version '{schema_version}' of '{snapshot.datasource_id}' does not match the snapshot's "
                    f"fingerprint {fp[:8]}", store=self.safe_url)
        result = self._run(lambda conn: self._register(conn, snapshot, schema_version), write=True)
        logger.info("schema store: %s %s -> %s", snapshot.datasource_id, result.schema_version, result.status)
        return result

    def _lock_datasource(self, conn: Connection, datasource_id: str) -> sa.Row | None:
        d = self._t.datasources
        return conn.execute(sa.select(d).where(d.c.datasource_id == datasource_id).with_for_update()).first()

    def _register(self, conn: Connection, snapshot: SchemaSnapshot, requested: str | None) -> RegisterResult:
        v, d = self._t.versions, self._t.datasources
        ds_id = snapshot.datasource_id
        ds_row = self._lock_datasource(conn, ds_id)
        latest = self._latest_row(conn, ds_id)
        previous = latest.schema_version if latest is not None else None
        now = _naive_utc(datetime.now(UTC))

        target = None
        if requested is not None:
            target = self._version_row(conn, ds_id, requested)
            if target is not None and target.fingerprint != snapshot.fingerprint:
                raise SchemaStoreError(
                    f"version '{requested}' of '{ds_id}' is stored with another structure "
                    f"(fingerprint {target.fingerprint[:8]}...)", store=self.safe_url)
        if target is None and latest is not None and latest.fingerprint == snapshot.fingerprint:
            target = latest
        if target is not None:
            return self._refresh(conn, target, snapshot, is_latest=latest is not None and target.seq == latest.seq,
                                 previous=previous, now=now)

        if requested is not None:
            version = requested
            if latest is not None and parse_schema_version(requested)[0] <= parse_schema_version(previous)[0]:
                raise SchemaStoreError(
                    f"version '{requested}' of '{ds_id}' is not later than the latest version '{previous}' "
                    "(the datasource moved on; run the drift check again)", store=self.safe_url)
        else:
            version = _propose(latest, snapshot.fingerprint, snapshot.captured_at)
        stored = snapshot.with_version(version)
        seq = (latest.seq if latest is not None else 0) + 1
        conn.execute(sa.insert(v).values(
            datasource_id=ds_id, seq=seq, schema_version=version, fingerprint=snapshot.fingerprint,
            metadata_hash=snapshot.metadata_hash, tenant=snapshot.datasource.tenant,
            captured_at=_naive_utc(snapshot.captured_at), registered_at=now, updated_at=now,
            snapshot_json=_to_json(stored),
        ))
        values = {"tenant": snapshot.datasource.tenant, "latest_seq": seq, "latest_version": version,
                  "updated_at": now}
        if ds_row is None:
            conn.execute(sa.insert(d).values(datasource_id=ds_id, **values))
        else:
            conn.execute(sa.update(d).where(d.c.datasource_id == ds_id).values(**values))
        return RegisterResult(schema_version=version, status="new", previous_version=previous, snapshot=stored)

    def _refresh(self, conn: Connection, row: sa.Row, snapshot: SchemaSnapshot, *, is_latest: bool,
                 previous: str | None, now: datetime) -> RegisterResult:
        if row.metadata_hash == snapshot.metadata_hash:
            return RegisterResult(schema_version=row.schema_version, status="unchanged",
                                  previous_version=previous, snapshot=self._snapshot_of(row))
        v, d = self._t.versions, self._t.datasources
        stored = snapshot.with_version(row.schema_version)
        conn.execute(sa.update(v).where(v.c.id == row.id).values(
            metadata_hash=snapshot.metadata_hash, tenant=snapshot.datasource.tenant,
            captured_at=_naive_utc(snapshot.captured_at), updated_at=now, snapshot_json=_to_json(stored),
        ))
        if is_latest:
            conn.execute(sa.update(d).where(d.c.datasource_id == row.datasource_id).values(
                tenant=snapshot.datasource.tenant, updated_at=now))
        return RegisterResult(schema_version=row.schema_version, status="metadata_updated",
                              previous_version=previous, snapshot=stored)

    def apply_retention(self, datasource_id: str, keep: int) -> list[str]:
        """Delete all but the newest ``keep`` versions; return the evicted versions, oldest first.

        Raises:
            ConfigError: ``keep`` is smaller than 1 (the latest version is never evicted).
        """
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"must be an integer >= 1, got {keep!r}", entry=datasource_id, field="keep")
        v = self._t.versions

        def evict(conn: Connection) -> list[str]:
            self._lock_datasource(conn, datasource_id)
            rows = conn.execute(
                sa.select(v.c.id, v.c.schema_version).where(v.c.datasource_id == datasource_id)
                .order_by(v.c.seq.desc()).offset(keep)
            ).all()
            if rows:
                conn.execute(sa.delete(v).where(v.c.id.in_([r.id for r in rows])))
            return [r.schema_version for r in reversed(rows)]

        evicted = self._run(evict, write=True)
        if evicted:
            logger.info("schema store: %s evicted %d version(s)", datasource_id, len(evicted))
        return evicted

    def close(self) -> None:
        """Release pooled connections; the store can still be used afterwards (it reconnects)."""
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"SqlSchemaStore({self.safe_url!r})"


def build_schema_store(settings: Settings) -> SqlSchemaStore:
    """The store configured by ``SCHEMA_STORE_URL`` (default: ``$NL2SQL_HOME/schema_store.db``)."""
    return SqlSchemaStore(settings.schema_store_url)


def _propose(latest: sa.Row | None, fingerprint: str, captured_at: datetime) -> str:
    if latest is not None and latest.fingerprint == fingerprint:
        return str(latest.schema_version)
    when = _aware(captured_at).replace(microsecond=0)
    if latest is not None:
        latest_time = parse_schema_version(latest.schema_version)[0]
        if when <= latest_time:
            when = latest_time + timedelta(seconds=1)
    return make_schema_version(when, fingerprint)


def _to_json(snapshot: SchemaSnapshot) -> str:
    return canonical_json(snapshot.model_dump(mode="json"))


def _cause(exc: BaseException | None) -> str:
    """The driver's message (first line) rather than SQLAlchemy's wrapper with SQL and links."""
    if exc is None:
        return "unknown error"
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__
