"""``nl2sql-assets index`` with ``ENRICHMENT=openai``, as a subprocess, against the local fake.

The command indexes two small SQLite datasources (one Dagster run each) while the fake chat
endpoint works, refuses, fails or hangs. Enrichment must never fail the command: the
``enriched_snapshot`` materialization says it was skipped and why. A hanging endpoint costs
the command one timeout: the ``llm`` resource is shared by the command's runs, and its
circuit breaker keeps the second run from calling the endpoint again. The hang case sets
``ENRICHMENT_TIMEOUT_S`` to 3 s (the default is 30 s), so it costs seconds, not half a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nl2sql_assets.app.instance import prepare_instance
from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.embeddings import build_embedding_service
from nl2sql_assets.indexing.llm_client import DEFAULT_LLM_MAX_RETRIES
from nl2sql_assets.indexing.vector_store import build_vector_store
from nl2sql_assets.pipeline import names
from nl2sql_assets.pipeline.keys import partition_key
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.store import build_schema_store
from tests.dagster.conftest import make_shop_db, run_sql, write_datasources
from tests.dagster.helpers import latest_metadata
from tests.openai_fake import CHAT, EMBEDDINGS, FakeOpenAI, Mode

pytestmark = pytest.mark.slow

SCRIPT = Path(sys.executable).parent / "nl2sql-assets"
API_KEY = "sk-test-Cli5ecretKey0123"
DATASOURCES = ("shop", "crm")
HANG_TIMEOUT_S = 3.0  # ENRICHMENT_TIMEOUT_S for the hanging endpoint (the default is 30 s)
#: Two more tables per datasource: five in all, so the runs have something to describe.
MORE_TABLES = """
CREATE TABLE suppliers (supplier_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT);
CREATE TABLE shipments (shipment_id INTEGER PRIMARY KEY, order_id INTEGER, shipped_at TEXT);
"""


@dataclass
class IndexRun:
    """One ``nl2sql-assets index`` command and what the fake saw of it."""

    settings: Settings
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    chat_requests: int
    embedding_requests: int

    def metadata(self, datasource_id: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
        """The latest ``enriched_snapshot`` materialization's metadata for the datasource."""
        version = self.snapshot(datasource_id).schema_version
        assert version is not None
        monkeypatch.setenv("DAGSTER_HOME", str(self.settings.dagster_home))  # the instance's dagster.yaml reads it
        instance = prepare_instance(self.settings)
        try:
            return latest_metadata(instance, names.ENRICHED_SNAPSHOT, partition_key(datasource_id, version))
        finally:
            instance.dispose()

    def snapshot(self, datasource_id: str) -> SchemaSnapshot:
        """The datasource's latest snapshot in the schema store (enriched or as read)."""
        store = build_schema_store(self.settings)
        try:
            snapshot = store.get_latest(datasource_id)
        finally:
            store.close()
        assert snapshot is not None, f"{datasource_id} was not registered"
        return snapshot


def _home(root: Path) -> dict[str, str]:
    """NL2SQL_HOME with the two datasources; the command's environment without OpenAI settings."""
    home = root / "home"
    entries = []
    for ds in DATASOURCES:
        url = make_shop_db(home / "data" / f"{ds}.db")
        run_sql(url, MORE_TABLES)
        entries.append({"id": ds, "url": url})
    write_datasources(home / "datasources.yaml", entries)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "NL2SQL_", "EMBEDDING_", "ENRICHMENT", "CHROMA_", "SCHEMA_STORE",
                                "DAGSTER_"))}
    env.update(NL2SQL_HOME=str(home), DAGSTER_HOME=str(root / "dagster"), ENRICHMENT="openai")
    return env


def index(root: Path, chat_mode: Mode = "ok", *, key: bool = True, env_extra: dict[str, str] | None = None) -> IndexRun:
    """Run ``nl2sql-assets index`` with the chat endpoint in ``chat_mode``.

    Embeddings go to the fake too (always working), except without a key, where the local
    model embeds (an OpenAI embedding provider needs the key).
    """
    env = {**_home(root), **(env_extra or {})}
    with FakeOpenAI() as fake:
        fake.modes[CHAT] = chat_mode
        env["OPENAI_BASE_URL"] = fake.base_url
        if key:
            env.update(OPENAI_API_KEY=API_KEY, EMBEDDING_PROVIDER="openai")
        started = time.perf_counter()
        proc = subprocess.run([str(SCRIPT), "index"], capture_output=True, text=True, env=env, timeout=240)
        seconds = time.perf_counter() - started
        chat, embeddings = fake.count(CHAT), fake.count(EMBEDDINGS)
    return IndexRun(Settings.from_env(env), proc.returncode, proc.stdout, proc.stderr, seconds, chat, embeddings)


def _assert_indexed(run: IndexRun) -> None:
    assert run.returncode == 0, run.stderr
    for ds in DATASOURCES:
        assert f"{ds}: new version" in run.stdout
    assert API_KEY not in run.stdout + run.stderr


def _reasons(run: IndexRun, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Both runs' ``enrichment_reason``: the run that called the endpoint first, then the other one
    (the command runs the datasources in partition-key order, not in file order)."""
    metadata = [run.metadata(ds, monkeypatch) for ds in DATASOURCES]
    assert [m["enrichment"] for m in metadata] == ["unavailable"] * len(DATASOURCES)
    reasons = sorted((str(m["enrichment_reason"]) for m in metadata), key=lambda r: r.startswith("not called"))
    return reasons[0], reasons[1]


@pytest.fixture(scope="module")
def normal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexRun]:
    """The command with a working endpoint: the baseline for the hang case's time."""
    yield index(tmp_path_factory.mktemp("normal"))


def test_normal_descriptions_reach_the_store_and_the_chunks(normal: IndexRun,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_indexed(normal)
    assert normal.chat_requests == len(DATASOURCES)  # five tables: one call per datasource
    for ds in DATASOURCES:
        metadata = normal.metadata(ds, monkeypatch)
        assert (metadata["enrichment"], metadata["enrichment_reason"]) == ("enriched", "")
        assert metadata["enrichment_model"] == "gpt-4o-mini"
        snapshot = normal.snapshot(ds)
        suppliers = snapshot.table("suppliers")
        assert suppliers is not None and suppliers.description == "Fake description of table suppliers"
        assert suppliers.column("country").synonyms == ["country synonym"]  # type: ignore[union-attr]
        assert snapshot.enrichment is not None and snapshot.enrichment.status == "enriched"
    service = build_embedding_service(normal.settings)
    vectors = build_vector_store(normal.settings, service)
    try:
        shop = normal.snapshot("shop")
        documents = [c.document for c in vectors.get_chunks("shop", shop.schema_version or "")]
    finally:
        vectors.close()
        service.close()
    assert any("Fake description of table suppliers" in d for d in documents)
    assert any("Fake description of column shipped_at" in d for d in documents)


def test_no_key_skips_enrichment_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = index(tmp_path, key=False)
    _assert_indexed(run)
    assert run.chat_requests == 0
    for ds in DATASOURCES:
        metadata = run.metadata(ds, monkeypatch)
        assert (metadata["enrichment"], metadata["enrichment_reason"]) == ("unavailable", "OPENAI_API_KEY is not set")
        assert run.snapshot(ds).table("suppliers").description is None  # type: ignore[union-attr]


def test_server_errors_skip_enrichment_and_stop_calling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = index(tmp_path, "server_error")
    _assert_indexed(run)
    assert run.chat_requests == 1 + DEFAULT_LLM_MAX_RETRIES  # the first run's call and its retries only
    first, second = _reasons(run, monkeypatch)
    assert first.startswith(f"chat endpoint {run.settings.openai_base_url} failed after 3 attempts (last: HTTP 500: ")
    assert second == f"not called: the chat endpoint failed earlier in this command ({first})"


def test_a_hanging_endpoint_costs_one_timeout(tmp_path: Path, normal: IndexRun,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    run = index(tmp_path, "hang", env_extra={"ENRICHMENT_TIMEOUT_S": str(HANG_TIMEOUT_S)})
    _assert_indexed(run)
    assert run.chat_requests == 1  # a timeout is not retried, and the breaker keeps the second run off
    assert run.embedding_requests > 0
    # the timeout ended the wait, not the default 30 s: one request is the count above, so the upper
    # bound only needs to tell 3 s from 30 s, with room for a loaded machine (a clean-clone run took
    # 11.7 s against 4.7 s for the normal command, 1 s over the former 2 x 3 s bound)
    assert HANG_TIMEOUT_S <= run.seconds < normal.seconds + HANG_TIMEOUT_S + 10.0, run.seconds
    first, second = _reasons(run, monkeypatch)
    assert first == f"chat endpoint {run.settings.openai_base_url} did not answer within {HANG_TIMEOUT_S:g} s"
    assert second == f"not called: the chat endpoint failed earlier in this command ({first})"
