"""Two processes writing one embedded Chroma store take turns (indexing/writer_lock.py).

Dagster's SQLite instance can hand its one ``nl2sql_index`` pool slot to two runs that claim it
in the same millisecond, and scripts bypass Dagster; the store's own lock is what keeps two
refreshes from planning against the same manifest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import SearchFilter
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.indexing.writer_lock import WriterLock
from tests.chunk_samples import CachingService, shop_snapshot
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _worker(home: Path, datasource: str, hold_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-W", "ignore", "-m", "tests.integration.writer_worker", str(home),
                             datasource, str(hold_s)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_until_it_writes(lock: WriterLock, worker: subprocess.Popen[str], datasource: str) -> None:
    deadline = time.monotonic() + 120
    while f"pid {worker.pid} " not in lock.holder() or f"refresh {datasource}@" not in lock.holder():
        assert worker.poll() is None, worker.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the worker never took the writer lock"
        time.sleep(0.05)


def _store(home: Path):  # noqa: ANN202 - a ChromaVectorStore
    return build_vector_store(Settings.from_env({"NL2SQL_HOME": str(home)}), CachingService(HashEmbedder(32)))  # type: ignore[arg-type]


def _index(home: Path, datasource: str):  # noqa: ANN202 - a RefreshReport
    chunks = build_chunks(shop_snapshot(datasource_id=datasource))
    return _store(home).refresh_schema_chunks(datasource, chunks.schema_version, chunks.chunks,
                                              tenant_id=chunks.tenant_id)


def test_a_second_process_waits_for_the_writer_and_both_indexes_are_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lock = WriterLock(Settings.from_env({"NL2SQL_HOME": str(home)}).chroma_path)
    worker = _worker(home, "alpha", 3.0)
    _wait_until_it_writes(lock, worker, "alpha")
    report = _index(home, "beta")  # in this process, while the worker embeds inside its refresh
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err[-2000:]
    first = json.loads(out)
    assert report.waited_s >= 1.0, "the second writer did not wait for the first"
    assert first["waited_s"] == 0.0

    fresh = _store(home)  # a reader that saw neither write
    expected = len(build_chunks(shop_snapshot()).chunks)
    for datasource in ("alpha", "beta"):
        state = fresh.index_state(datasource)
        assert state is not None and state.chunk_count == expected
        check = fresh.check_records(datasource)
        assert not check.orphaned and not check.leftovers
        hits = fresh.search("orders placed by customers", k=3, where=SearchFilter(datasource_ids=[datasource]))
        assert hits and all(h.datasource_id == datasource for h in hits)
    assert lock.holder().startswith(f"pid {os.getpid()} ")  # the last writer left its name


def test_a_killed_writer_does_not_block_the_next_and_leaves_nothing_live(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _index(home, "beta")
    lock = WriterLock(Settings.from_env({"NL2SQL_HOME": str(home)}).chroma_path)
    worker = _worker(home, "alpha", 300.0)
    try:
        _wait_until_it_writes(lock, worker, "alpha")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    started = time.monotonic()
    report = _index(home, "beta")
    assert time.monotonic() - started < 30 and report.waited_s < 1.0  # the kernel dropped the dead writer's lock
    store = _store(home)
    assert store.live_version("alpha") is None  # killed before its flip
    assert store.live_version("beta") == report.schema_version and report.unchanged == report.total
