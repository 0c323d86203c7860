"""A documentation refresh whose Chroma step failed is completed by the next ``index`` and tick.

The run registers the new documentation in the schema store before it writes Chroma, so
after a failure drift detection sees nothing new; the repair comes from comparing what the
vector store serves with what the schema store implies.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.app.audit import build_audit
from nl2sql_assets.app.runner import IndexResources
from nl2sql_assets.config import Settings
from nl2sql_assets.errors import EmbeddingError
from tests.chroma_server import ChromaServer, start_or_skip
from tests.dagster.conftest import HashEmbeddingService, HashEmbeddingsResource, make_shop_db, write_datasources
from tests.dagster.helpers import execute, run_requests, tick

ROOT = Path(__file__).resolve().parents[2]


class BrokenEmbeddingService(HashEmbeddingService):
    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        raise EmbeddingError("injected: the embedding provider is down")


class BrokenEmbeddingsResource(HashEmbeddingsResource):
    def get_service(self) -> HashEmbeddingService:  # type: ignore[override]
        if self._service is None:
            self._service = BrokenEmbeddingService(self.dimension)  # type: ignore[assignment]
        return self._service  # type: ignore[return-value]


def _document(home: Path, text: str) -> None:
    path = home / "datasources.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in doc["datasources"]:
        if entry["id"] == "shop":
            entry["annotations"] = {"tables": {"orders": text}, "synonyms": {"orders": ["purchases"]}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def _consistent(settings: Settings, instance: dg.DagsterInstance) -> bool:
    resources = IndexResources(settings, embeddings=HashEmbeddingsResource())
    try:
        return build_audit(settings, instance, ["shop"], resources=resources).consistent
    finally:
        resources.close()


def test_the_next_tick_completes_a_failed_documentation_refresh(instance: dg.DagsterInstance, settings: Settings,
                                                              shop_home: Path) -> None:
    first = tick(instance)
    assert all(r.success for r in run_requests(instance, first))
    _document(shop_home, "Every purchase a customer made.")
    second = tick(instance, first.cursor)
    (refresh,) = second.run_requests
    assert refresh.tags["nl2sql/request"] == "metadata_refresh"
    failed = execute(instance, refresh.partition_key, refresh.tags, embeddings=BrokenEmbeddingsResource())
    assert not failed.success
    assert not _consistent(settings, instance)  # the schema store has the new text, Chroma the old one

    third = tick(instance, second.cursor)  # drift sees nothing new: the repair comes from the vector store
    (repair,) = third.run_requests
    assert repair.tags["nl2sql/request"] == "pending_refresh" and repair.partition_key == refresh.partition_key
    assert all(r.success for r in run_requests(instance, third))
    assert _consistent(settings, instance)
    fourth = tick(instance, third.cursor)
    assert not (isinstance(fourth, dg.SensorResult) and fourth.run_requests)  # nothing left to do


CLI = str(Path(sys.executable).with_name("nl2sql-assets"))


def _env(home: Path, chroma: ChromaServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NL2SQL_", "DAGSTER_", "CHROMA_"))}
    env.update({"NL2SQL_HOME": str(home), "CHROMA_HOST": chroma.host, "CHROMA_PORT": str(chroma.port)})
    return env


def _cli(home: Path, chroma: ChromaServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=_env(home, chroma), capture_output=True, text=True, timeout=600)


def _shop_home(tmp_path: Path) -> Path:
    """An NL2SQL_HOME whose datasources file lists one small SQLite shop."""
    home = tmp_path / "home"
    home.mkdir()
    write_datasources(home / "datasources.yaml", [{"id": "shop", "url": make_shop_db(home / "data" / "shop.db")}])
    return home


@pytest.mark.server
@pytest.mark.slow
def test_index_completes_a_refresh_that_died_with_the_chroma_server(tmp_path: Path) -> None:
    home = _shop_home(tmp_path)
    chroma = start_or_skip(ChromaServer(tmp_path / "chroma"))
    try:
        first = _cli(home, chroma, "index")
        assert first.returncode == 0 and "shop: new version" in first.stdout, first.stdout + first.stderr
        _document(home, "Every purchase a customer made.")
        chroma.stop()
        down = _cli(home, chroma, "index")
        assert down.returncode == 1 and "shop: failed" in down.stdout, down.stdout + down.stderr
        chroma.start()
        again = _cli(home, chroma, "index")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "shop: completed the pending refresh of" in again.stdout, again.stdout
        audit = _cli(home, chroma, "audit")
        assert audit.returncode == 0 and audit.stdout.rstrip().endswith("audit: consistent"), audit.stdout
        assert ": unchanged (" in _cli(home, chroma, "index").stdout
    finally:
        chroma.stop()


def _registered_text(home: Path) -> bool:
    """Whether the schema store already holds the new documentation (the run passed registration)."""
    try:
        with sqlite3.connect(home / "schema_store.db", timeout=5) as conn:
            rows = conn.execute("SELECT snapshot_json FROM nl2sql_schema_versions").fetchall()
    except sqlite3.Error:
        return False
    return any("Every purchase" in str(r[0]) for r in rows)


@pytest.mark.server
@pytest.mark.slow
def test_a_killed_index_leaves_no_stuck_run_and_the_next_index_finishes_its_refresh(tmp_path: Path) -> None:
    home = _shop_home(tmp_path)
    chroma = start_or_skip(ChromaServer(tmp_path / "chroma"))
    try:
        assert _cli(home, chroma, "index").returncode == 0
        _document(home, "Every purchase a customer made.")
        assert chroma._proc is not None
        os.killpg(chroma._proc.pid, signal.SIGSTOP)  # the refresh will hang in its Chroma step
        victim = subprocess.Popen([CLI, "index"], env=_env(home, chroma),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while not _registered_text(home):
            assert victim.poll() is None and time.monotonic() < deadline, "the run never registered the text"
            time.sleep(0.2)
        time.sleep(0.5)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        os.killpg(chroma._proc.pid, signal.SIGCONT)
        started = time.monotonic()
        again = _cli(home, chroma, "index")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "shop: completed the pending refresh of" in again.stdout or "shop: metadata refresh" in again.stdout
        assert time.monotonic() - started < 120  # no wait for the dead run's pool slot
        runs = sqlite3.connect(home / "dagster" / "history" / "runs.db").execute(
            "SELECT status FROM runs").fetchall()
        assert ("STARTED",) not in runs, runs
        audit = _cli(home, chroma, "audit")
        assert audit.returncode == 0, audit.stdout + audit.stderr
    finally:
        if chroma._proc is not None and chroma._proc.poll() is None:
            os.killpg(chroma._proc.pid, signal.SIGCONT)
        chroma.stop()
