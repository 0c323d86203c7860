"""The Dagster instance the CLI records its runs on, and the housekeeping around it.

The instance folder is ``settings.dagster_home``; the packaged ``dagster.yaml`` (the embedded
default: SQLite storage under ``DAGSTER_HOME``, queued runs, the ``nl2sql_index`` pool) is
copied there when the folder has none. Its storage section reads ``DAGSTER_HOME``, which the
CLI entry point sets (nothing here writes the environment).
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import dagster as dg

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError
from nl2sql_assets.pipeline.names import HOST_TAG, INDEX_POOL, PID_TAG

PACKAGED_DAGSTER_YAML = Path(__file__).with_name("dagster.yaml")


def prepare_instance(settings: Settings) -> dg.DagsterInstance:
    """The Dagster instance in ``settings.dagster_home``, created with the embedded default
    ``dagster.yaml`` when the folder has none.

    Raises:
        ConfigError: ``DAGSTER_HOME`` names another folder than the settings do.
    """
    home = settings.dagster_home
    exported = os.environ.get("DAGSTER_HOME")
    if exported and Path(exported).expanduser().absolute() != home:
        raise ConfigError(f"is {exported!r}, but the settings name {str(home)!r}", source="environment",
                          field="DAGSTER_HOME")
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        shutil.copyfile(PACKAGED_DAGSTER_YAML, target)
    return dg.DagsterInstance.from_config(str(home))


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
