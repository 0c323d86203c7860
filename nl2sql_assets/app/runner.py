"""Run the code location's definitions in process: what ``nl2sql-assets index`` and ``demo`` do.

Same definitions as the UI and the sensor: drift detection, then for every new structure a
new partition and an ``index_job`` run for it, recorded on the configured Dagster instance
(``DAGSTER_HOME``). The resources are created once per command and shared by all its runs,
so the embedding model loads once however many datasources changed.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import dagster as dg
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.config import DatasourceConfig, Settings, load_datasources
from nl2sql_assets.defs.definitions import build_definitions
from nl2sql_assets.defs.partitions import PARTITIONS_NAME
from nl2sql_assets.defs.planning import IndexRequest, plan_index, repair_request
from nl2sql_assets.errors import Nl2SqlError, UnknownDatasourceError
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

if TYPE_CHECKING:
    from nl2sql_assets.schema.protocol import SchemaStore

PACKAGED_DAGSTER_YAML = Path(__file__).with_name("dagster.yaml")
HOST_TAG = "nl2sql/host"
PID_TAG = "nl2sql/pid"
IndexStatus = Literal["new_version", "metadata_refresh", "repair", "unchanged", "failed"]


def prepare_instance(settings: Settings) -> dg.DagsterInstance:
    """The Dagster instance in ``settings.dagster_home``, created with the embedded default
    ``dagster.yaml`` when the folder has none; sets ``DAGSTER_HOME`` for this process."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        shutil.copyfile(PACKAGED_DAGSTER_YAML, target)
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.get()


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


class IndexResources:
    """The five resources for in-process runs, built from one Settings and shared by every run."""

    def __init__(self, settings: Settings, *, embeddings: EmbeddingsResource | None = None,
                 keep_versions: int | None = None) -> None:
        self.settings = settings
        self.datasources = DatasourcesResource(path=str(settings.datasources_path))
        self.schema_store = SchemaStoreResource(url=settings.schema_store_url)
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        self.embeddings = embeddings or EmbeddingsResource(
            provider=settings.embedding_provider, model=settings.embedding_model,
            openai_api_key=key, openai_base_url=settings.openai_base_url)
        self.vector_store = VectorStoreResource(chroma_host=settings.chroma_host, chroma_port=settings.chroma_port,
                                                keep_versions=keep_versions)
        self.llm = LLMResource(enrichment=settings.enrichment, openai_api_key=key,
                               openai_base_url=settings.openai_base_url)

    def as_dict(self) -> dict[str, dg.ConfigurableResource]:
        return {"datasources": self.datasources, "schema_store": self.schema_store,
                "embeddings": self.embeddings, "vector_store": self.vector_store, "llm": self.llm}

    def hardcoded(self) -> dict[str, dg.ResourceDefinition]:
        """The same objects for Dagster: not re-initialized per run (one model load per command)."""
        return {k: dg.ResourceDefinition.hardcoded_resource(v) for k, v in self.as_dict().items()}

    def close(self) -> None:
        for resource in (self.vector_store, self.embeddings, self.schema_store):
            resource.close()


class IndexResult(BaseModel):
    """One datasource's line of ``nl2sql-assets index``."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    status: IndexStatus
    schema_version: str | None = None
    partition_key: str | None = None
    run_id: str | None = None
    error: str | None = None
    seconds: float = 0.0

    def line(self) -> str:
        """
        >>> IndexResult(datasource_id="hr", status="failed", error="unreachable").line()
        'hr: failed: unreachable'
        """
        run = f" (run {self.run_id[:8]})" if self.run_id else ""
        if self.status == "new_version":
            return f"{self.datasource_id}: new version {self.schema_version}{run}"
        if self.status == "metadata_refresh":
            return f"{self.datasource_id}: metadata refresh of {self.schema_version}{run}"
        if self.status == "repair":
            return f"{self.datasource_id}: re-indexed {self.schema_version} (was not live){run}"
        if self.status == "unchanged":
            return f"{self.datasource_id}: unchanged ({self.schema_version})"
        where = f" ({self.partition_key})" if self.partition_key else ""
        return f"{self.datasource_id}: failed{where}: {self.error}"


def select_datasources(configs: Sequence[DatasourceConfig], wanted: Sequence[str]) -> list[DatasourceConfig]:
    """The named datasources in file order (all when none named). Raises UnknownDatasourceError."""
    if not wanted:
        return list(configs)
    known = {c.id for c in configs}
    for ds in wanted:
        if ds not in known:
            raise UnknownDatasourceError(ds, sorted(known))
    return [c for c in configs if c.id in set(wanted)]


def run_failure_message(result: dg.ExecuteInProcessResult) -> str:
    """Why a run failed: the first step failure's description and any failed blocking check."""
    messages: list[str] = []
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.event_specific_data
            if evaluation is not None and not evaluation.passed:  # type: ignore[union-attr]
                messages.append(f"check {evaluation.check_name} on "  # type: ignore[union-attr]
                                f"{evaluation.asset_key.to_user_string()} failed")  # type: ignore[union-attr]
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            user = data.user_failure_data
            if user is not None and user.description:
                messages.append(user.description)
            elif data.error is not None:
                messages.append(data.error.message.strip().splitlines()[-1] if data.error.message else "step failed")
    unique = list(dict.fromkeys(messages))
    return "; ".join(unique) if unique else "run failed"


def run_index(
    settings: Settings,
    datasource_ids: Sequence[str] = (),
    *,
    instance: dg.DagsterInstance,
    resources: IndexResources | None = None,
    now: datetime | None = None,
    repair: bool = True,
    extra_resources: Mapping[str, object] | None = None,
    log_level: str = "WARNING",
) -> list[IndexResult]:
    """Drift detection, then one in-process ``index_job`` run per new structure or metadata change.

    Args:
        settings: the configuration (datasources file, stores, provider).
        datasource_ids: only these datasources (all when empty).
        instance: the Dagster instance the runs are recorded on (:func:`prepare_instance`).
        resources: shared resources (created and closed here when None).
        now: the detection time (tests); default: the clock.
        repair: also re-run an unchanged datasource whose latest version is not live in Chroma
            (its last run failed after registration).
        extra_resources: resource overrides by key (tests).
        log_level: what Dagster's console logger prints (the event log keeps everything).

    Returns:
        One result per selected datasource, in datasource order.

    Raises:
        ConfigError: the datasources file is missing or invalid.
        UnknownDatasourceError: a named datasource is not in the file.
    """
    from nl2sql_assets.drift import check_drift

    configs = select_datasources(load_datasources(settings.datasources_path), datasource_ids)
    own = resources is None
    res = resources or IndexResources(settings)
    try:
        store = res.schema_store.get_store()
        plan = plan_index(check_drift(configs, store, now=now))
        results: dict[str, IndexResult] = {
            o.datasource_id: IndexResult(datasource_id=o.datasource_id, status=o.status,
                                         schema_version=o.schema_version, error=o.error)
            for o in plan.outcomes
        }
        requests: list[IndexRequest] = list(plan.requests)
        if repair:
            requests += _repairs(res, store, [r for r in results.values() if r.status == "unchanged"])
        if requests:
            release_dead_runs(instance)
            instance.add_dynamic_partitions(PARTITIONS_NAME, sorted({r.partition_key for r in requests}))
            overrides: dict[str, object] = dict(res.hardcoded())
            overrides.update(extra_resources or {})
            job = build_definitions(overrides).resolve_job_def("index_job")
            with sqlite_kept_open(instance):
                for request in requests:
                    results[request.datasource_id] = _execute(job, instance, request, log_level)
        order = {c.id: i for i, c in enumerate(configs)}
        return sorted(results.values(), key=lambda r: order.get(r.datasource_id, len(order)))
    finally:
        if own:
            res.close()


def _repairs(res: IndexResources, store: SchemaStore, unchanged: list[IndexResult]) -> list[IndexRequest]:
    if not unchanged:
        return []
    vectors = res.vector_store.get_store(res.embeddings.get_service())
    out = []
    for result in unchanged:
        if not result.schema_version:
            continue
        try:
            live = vectors.live_version(result.datasource_id)
        except Nl2SqlError:
            continue  # the run itself will report the vector store's failure next time
        if live == result.schema_version:
            continue
        snapshot = store.get_snapshot(result.datasource_id, result.schema_version)
        out.append(repair_request(result.datasource_id, result.schema_version, snapshot.fingerprint,
                                  snapshot.metadata_hash, attempt=str(int(time.time()))))
    return out


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


def release_dead_runs(instance: dg.DagsterInstance, pool: str = "nl2sql_index") -> list[str]:
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


def _execute(job: dg.JobDefinition, instance: dg.DagsterInstance, request: IndexRequest,
             log_level: str) -> IndexResult:
    started = time.perf_counter()
    result = job.execute_in_process(
        instance=instance, partition_key=request.partition_key, tags={**request.tags(), **process_tags()},
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
    )
    seconds = round(time.perf_counter() - started, 3)
    if result.success:
        return IndexResult(datasource_id=request.datasource_id, status=request.kind,
                           schema_version=request.schema_version, partition_key=request.partition_key,
                           run_id=result.run_id, seconds=seconds)
    return IndexResult(datasource_id=request.datasource_id, status="failed", schema_version=request.schema_version,
                       partition_key=request.partition_key, run_id=result.run_id,
                       error=run_failure_message(result), seconds=seconds)
