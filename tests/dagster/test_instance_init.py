"""The Dagster instance is created once, under a lock, however many commands start on a new home.

Two first commands creating the SQLite storages at once each stamped the schema version, and
every later command failed with "more than one head present". Now the instance is created
under an exclusive lock, and an instance already left in that state is mended (identical
stamps) or named with the way out (different stamps).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.dagster.conftest import make_shop_db, write_datasources

pytestmark = pytest.mark.slow
CLI = str(Path(sys.executable).with_name("nl2sql-assets"))
TRIALS = 2


def _home(root: Path) -> tuple[Path, dict[str, str]]:
    home = root / "home"
    home.mkdir(parents=True)
    write_datasources(home / "datasources.yaml", [{"id": "shop", "url": make_shop_db(home / "shop.db", rows=False)}])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NL2SQL_", "DAGSTER_", "CHROMA_"))}
    env.update({"NL2SQL_HOME": str(home), "EMBEDDING_MODEL": "all-MiniLM-L6-v2"})
    return home, env


def _stamps(home: Path) -> list[int]:
    out = []
    for relative in ("history/runs.db", "history/runs/index.db", "schedules/schedules.db"):
        with sqlite3.connect(home / "dagster" / relative) as conn:
            out.append(conn.execute("SELECT count(*) FROM alembic_version").fetchone()[0])
    return out


def test_concurrent_first_commands_leave_one_usable_instance(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    for trial in range(TRIALS):
        home, env = _home(tmp_path / str(trial))
        procs = [subprocess.Popen([CLI, "audit"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(3)]
        outputs = [p.communicate(timeout=300) for p in procs]
        assert all("more than one head" not in out + err for out, err in outputs), outputs
        assert _stamps(home) == [1, 1, 1]
    # the stamps are what broke later commands; one later command on the last home shows it works
    later = subprocess.run([CLI, "index"], env=env, capture_output=True, text=True, timeout=300)
    assert later.returncode == 0, later.stdout + later.stderr


def test_a_command_waits_for_the_instance_lock(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    (home / "dagster").mkdir()
    with open(home / "dagster" / ".nl2sql-instance.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        proc = subprocess.Popen([CLI, "audit"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert proc.poll() is None and not (home / "dagster" / "history").exists()  # waiting, created nothing
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    out, err = proc.communicate(timeout=300)
    assert (home / "dagster" / "history" / "runs.db").is_file(), out + err


def test_a_doubly_stamped_instance_is_mended_and_a_conflicting_one_is_named(tmp_path: Path) -> None:
    home, env = _home(tmp_path)
    assert subprocess.run([CLI, "index"], env=env, capture_output=True, text=True, timeout=300).returncode == 0
    runs_db = home / "dagster" / "history" / "runs.db"
    with sqlite3.connect(runs_db) as conn:  # the state two unlocked first commands left behind
        conn.execute("INSERT INTO alembic_version VALUES ('5771160a95ad')")  # an older Dagster schema
    mended = subprocess.run([CLI, "index"], env=env, capture_output=True, text=True, timeout=300)
    assert mended.returncode == 0 and "shop: unchanged" in mended.stdout, mended.stdout + mended.stderr
    assert "stamped with 2 schema versions" in mended.stderr and _stamps(home)[0] == 1
    with sqlite3.connect(runs_db) as conn:  # a stamp that is not Dagster's current one: not mendable
        conn.execute("UPDATE alembic_version SET version_num = '0000deadbeef'")
        conn.execute("INSERT INTO alembic_version VALUES ('5771160a95ad')")
    refused = subprocess.run([CLI, "index"], env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert f"Dagster instance database {runs_db}" in refused.stderr
    assert "Move the instance folder aside" in refused.stderr
