"""The Dagster instance the CLI records its runs on, and the housekeeping around it.

The instance folder is ``settings.dagster_home``; the packaged ``dagster.yaml`` (the embedded
default: SQLite storage under ``DAGSTER_HOME``, queued runs, the ``nl2sql_index`` pool) is
copied there when the folder has none. Its storage section reads ``DAGSTER_HOME``, which the
CLI entry point sets (nothing here writes the environment).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import dagster as dg

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError, InstanceStorageError, StorageError
from nl2sql_assets.filesystem import INSTANCE_DATABASES, check_folder, sqlite_header_problem
from nl2sql_assets.pipeline.names import HOST_TAG, INDEX_POOL, PID_TAG

log = logging.getLogger(__name__)

PACKAGED_DAGSTER_YAML = Path(__file__).with_name("dagster.yaml")
#: Held while a command creates or opens the instance: two commands creating the SQLite
#: storages at once each stamped the schema version, and the instance was unusable after.
INIT_LOCK = ".nl2sql-instance.lock"
#: The instance's shared SQLite databases whose schema version Dagster stamps (per-run shards are per run).
STAMPED_DATABASES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def check_dagster_home(home: Path) -> None:
    """Refuse an unusable ``DAGSTER_HOME`` before any work starts: a file in its place, a
    read-only folder, a full disk, a ``dagster.yaml`` that is not a file, or a truncated or
    foreign instance database (Dagster would fail deep inside with a traceback). Creates nothing.

    A zero-length run database is not refused (SQLite and Dagster start it afresh), but when
    the event log still has content the lost run history is reported as a warning.

    Raises:
        StorageError: the folder is unusable.
        InstanceStorageError: an instance database is damaged (the message says how to recover).
    """
    check_folder(home, "DAGSTER_HOME")
    config = home / "dagster.yaml"
    if config.exists() and not config.is_file():
        raise StorageError("DAGSTER_HOME", home, f"{config} is not a file", f"remove {config} or point "
                           "DAGSTER_HOME at another folder")
    for relative in INSTANCE_DATABASES:
        path = home / relative
        if path.is_file():
            problem = sqlite_header_problem(path)
            if problem is not None:
                raise InstanceStorageError(path, problem)
    runs, events = home / INSTANCE_DATABASES[0], home / INSTANCE_DATABASES[1]
    if runs.is_file() and runs.stat().st_size == 0 and events.is_file() and events.stat().st_size > 0:
        log.warning("Dagster run database %s is empty but its event log is not: the run history was lost "
                    "(the indexes are intact, they live in the schema store and Chroma)", runs)


def prepare_instance(settings: Settings) -> dg.DagsterInstance:
    """The Dagster instance in ``settings.dagster_home``, created with the embedded default
    ``dagster.yaml`` when the folder has none; pool slots of runs whose process died are
    released first thing, so no command waits behind a killed one.

    Raises:
        ConfigError: ``DAGSTER_HOME`` names another folder than the settings do.
    """
    home = settings.dagster_home
    exported = os.environ.get("DAGSTER_HOME")
    if exported and Path(exported).expanduser().absolute() != home:
        raise ConfigError(f"is {exported!r}, but the settings name {str(home)!r}", source="environment",
                          field="DAGSTER_HOME")
    check_dagster_home(home)
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / INIT_LOCK):
        target = home / "dagster.yaml"
        if not target.exists():
            shutil.copyfile(PACKAGED_DAGSTER_YAML, target)
        repair_schema_stamps(home)
        instance = dg.DagsterInstance.from_config(str(home))  # creates and stamps the SQLite storages
    release_dead_runs(instance)
    return instance


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), released when the block ends or the process dies."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def dagster_schema_head() -> str | None:
    """The schema version this Dagster release stamps on new storages (None if it cannot tell)."""
    try:
        from alembic.script import ScriptDirectory
        from dagster._core.storage.runs.sqlite import sqlite_run_storage
        from dagster._core.storage.sql import get_alembic_config

        return ScriptDirectory.from_config(get_alembic_config(sqlite_run_storage.__file__)).get_current_head()
    except Exception:  # noqa: BLE001 - Dagster internals; without them the state is only reported
        return None


def repair_schema_stamps(home: Path) -> list[Path]:
    """Mend the state two concurrent first commands left before the lock existed.

    One created the storage at Dagster's current schema and stamped it; the other, finding
    tables but no stamp, stamped an older version too, and Dagster then failed with "more than
    one head present" on every command. When the current version is among the stamps, the
    tables are current and the others are dropped; otherwise the state is named with the way out.

    Returns:
        The databases mended.

    Raises:
        InstanceStorageError: a database holds several stamps that cannot be mended, or cannot be read.
    """
    mended: list[Path] = []
    for relative in STAMPED_DATABASES:
        path = home / relative
        if not path.is_file():
            continue
        try:
            with closing(sqlite3.connect(path, timeout=30)) as conn:
                if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone():
                    continue
                versions = sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))
                if len(versions) <= 1:
                    continue
                head = dagster_schema_head()
                if head not in versions:
                    raise InstanceStorageError(path, f"it is stamped with {len(versions)} schema versions "
                                                     f"({', '.join(versions)}; two commands created it at once)")
                with conn:
                    conn.execute("DELETE FROM alembic_version WHERE version_num != ?", (head,))
        except sqlite3.Error as exc:
            raise InstanceStorageError(path, f"it cannot be read ({exc})") from None
        log.warning("Dagster database %s was stamped with %d schema versions (two commands created it at "
                    "once); kept the current one, %s", path, len(versions), head)
        mended.append(path)
    return mended


def sqlite_instance_files(instance: dg.DagsterInstance) -> list[Path]:
    """The instance's shared SQLite files (runs, event-log index, schedules); [] on other storage."""
    found: list[Path] = []
    for storage in (instance.run_storage, instance.schedule_storage):
        conn_string = getattr(storage, "_conn_string", None)
        if isinstance(conn_string, str) and conn_string.startswith("sqlite:///"):
            found.append(Path(conn_string.removeprefix("sqlite:///")))
    path_for_shard = getattr(instance.event_log_storage, "path_for_shard", None)
    if callable(path_for_shard) and type(instance.event_log_storage).__name__.startswith("Sqlite"):
        found.append(Path(path_for_shard("index")))
    return [p for p in found if p.exists()]


@contextmanager
def sqlite_kept_open(instance: dg.DagsterInstance) -> Iterator[None]:
    """Hold one idle connection to each shared SQLite file of the instance while runs execute.

    Dagster's SQLite storages open a new connection for every read and write (``NullPool``) in
    WAL mode, and SQLite checkpoints the WAL and deletes it whenever the *last* connection to a
    file closes: with nobody else holding the file, every one of the ~150 storage calls of a
    run paid a checkpoint, two file deletions and their journal syncs (~5 ms each on this
    disk). An idle connection here makes every other close cheap; it holds no lock (no open
    transaction), so the daemon, the webserver and other commands read and write as before,
    and durability is unchanged (commits still sync the WAL). Nothing to do on PostgreSQL.
    """
    with ExitStack() as stack:
        for path in sqlite_instance_files(instance):
            try:
                conn = stack.enter_context(closing(sqlite3.connect(path, timeout=30)))
                # a read maps the WAL index: from here on this connection counts as open (no
                # transaction stays open: the sqlite3 module begins none for a SELECT)
                conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            except sqlite3.Error:
                continue  # only a speed-up: the runs work the same without it
        yield


def process_tags() -> dict[str, str]:
    """Where an in-process run executes, so a later command can tell when it died."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_dead_runs(instance: dg.DagsterInstance, pool: str = INDEX_POOL) -> list[str]:
    """Free pool slots held by runs that can no longer release them; returns their run ids.

    An in-process run killed hard (SIGKILL, power loss) keeps its ``nl2sql_index`` slot and
    stays "started" forever, and every later run would wait for the slot. A slot is released
    when its run is finished or gone, or when the run was executed on this host by a process
    that no longer exists (the run is then marked failed). Runs of other hosts, and runs
    launched by the daemon (whose run monitoring handles them), are left alone.
    """
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    info = storage.get_concurrency_info(pool)
    released: list[str] = []
    for run_id in sorted(info.active_run_ids | info.pending_run_ids | info.assigned_run_ids):
        run = instance.get_run_by_id(run_id)
        dead = run is None or run.is_finished
        if not dead and run is not None and run.tags.get(HOST_TAG) == socket.gethostname():
            pid = run.tags.get(PID_TAG, "")
            if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
                instance.report_run_failed(run, message=f"process {pid} that executed this run is gone")
                dead = True
        if dead:
            storage.free_concurrency_slots_for_run(run_id)
            released.append(run_id)
    return released
