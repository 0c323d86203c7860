"""Two runs never write the same datasource's index at once.

In-process runs (``nl2sql-assets index``, this test) do not pass through the run queue, so
what queues them is the ``nl2sql_index`` pool of ``chroma_collection`` with the limit the
embedded dagster.yaml sets (1). Queued runs (sensor, UI) are additionally limited per
``datasource`` tag; that is exercised against the real daemon in test_dagster_ui.py.

Dagster's SQLite storage claims a slot with a read and an update SQLite does not lock, so two
runs that claim in the same millisecond can both get the one slot (seen in CI). The second
worker here starts once the first holds the slot, which is what the pool can promise; the
same-millisecond case is covered by the embedded store's own writer lock
(tests/integration/test_writer_lock.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import sys
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from tests.dagster.helpers import run_requests, tick

ROOT = Path(__file__).resolve().parents[2]
HOLD_S = 1.0
FIRST_HOLD_S = 10.0

pytestmark = pytest.mark.slow


def _window(instance: dg.DagsterInstance, run_id: str, step: str) -> tuple[float, float, list[str]]:
    start = end = None
    engine: list[str] = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.step_key != step:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            start = entry.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            end = entry.timestamp
        elif event.event_type == dg.DagsterEventType.ENGINE_EVENT:
            engine.append(entry.message)
    assert start is not None and end is not None, f"{step} did not run in {run_id}"
    return start, end, engine


def test_pool_serializes_chroma_writes_across_processes(instance: dg.DagsterInstance, settings) -> None:
    result = tick(instance)
    assert all(r.success for r in run_requests(instance, result))
    key = next(r.partition_key for r in result.run_requests if r.tags["datasource"] == "shop")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(settings.dagster_home)}

    def worker(hold_s: float) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-W", "ignore", "-m", "tests.dagster.pool_worker", key, str(hold_s)],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [worker(FIRST_HOLD_S)]  # long enough for the second to start up and ask for the slot
    deadline = time.monotonic() + 120
    while not instance.event_log_storage.get_concurrency_info("nl2sql_index").active_run_ids:
        assert time.monotonic() < deadline and procs[0].poll() is None, "the first worker never took the slot"
        time.sleep(0.05)
    procs.append(worker(HOLD_S))
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outputs]
    run_ids = [o[0].split()[0] for o in outputs]
    windows = sorted(_window(instance, run_id, "chroma_collection") for run_id in run_ids)
    (s1, e1, _), (s2, e2, _) = windows
    assert e1 - s1 >= FIRST_HOLD_S and e2 - s2 >= HOLD_S
    # the second chroma_collection step started before the first ended, but only wrote after it
    assert e1 <= s2 + 0.05, (
        f"overlapping writes: {datetime.fromtimestamp(s1)}-{datetime.fromtimestamp(e1)} and "
        f"{datetime.fromtimestamp(s2)}-{datetime.fromtimestamp(e2)}")
    blocked = [m for _, _, msgs in windows for m in msgs if "blocked by limit for pool nl2sql_index" in m]
    assert blocked, "no run waited for the nl2sql_index pool"
    limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    assert limits.get("nl2sql_index") == 1


def test_a_killed_run_does_not_hold_the_pool_forever(instance: dg.DagsterInstance, settings) -> None:
    from nl2sql_assets.app.instance import release_dead_runs
    from tests.dagster.helpers import execute

    result = tick(instance)
    assert all(r.success for r in run_requests(instance, result))
    key = next(r.partition_key for r in result.run_requests if r.tags["datasource"] == "shop")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(settings.dagster_home)}
    worker = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "tests.dagster.pool_worker", key, "300"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    storage = instance.event_log_storage
    try:
        deadline = time.monotonic() + 120
        while not storage.get_concurrency_info("nl2sql_index").active_run_ids:
            assert time.monotonic() < deadline and worker.poll() is None, "the worker never took the slot"
            time.sleep(0.5)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    (held,) = storage.get_concurrency_info("nl2sql_index").active_run_ids
    assert instance.get_run_by_id(held).status == dg.DagsterRunStatus.STARTED  # stuck as far as Dagster knows
    assert release_dead_runs(instance) == [held]
    assert instance.get_run_by_id(held).status == dg.DagsterRunStatus.FAILURE
    assert not storage.get_concurrency_info("nl2sql_index").active_run_ids
    started = time.monotonic()
    assert execute(instance, key).success
    assert time.monotonic() - started < 60
