"""Run the code location's definitions in process: what ``nl2sql-assets index`` and ``demo`` do.

Same definitions as the UI and the sensor: drift detection, then for every new structure a
new partition and an ``index_job`` run for it, recorded on the configured Dagster instance
(``DAGSTER_HOME``). The resources are built once per command by the same function the code
location uses (:func:`resources.build_resources`) and shared by all its runs, so the
embedding model loads once however many datasources changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from datetime import datetime
from typing import Literal

import dagster as dg
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.app.instance import process_tags, sqlite_kept_open
from nl2sql_assets.app.run_shards import RunShards, wal_sync_normal
from nl2sql_assets.config import DatasourceConfig, Settings, load_datasources
from nl2sql_assets.defs.definitions import build_definitions
from nl2sql_assets.drift import check_drift
from nl2sql_assets.errors import UnknownDatasourceError
from nl2sql_assets.pipeline.names import INDEX_JOB, PARTITIONS_NAME, RESOURCE_KEYS
from nl2sql_assets.pipeline.planning import IndexRequest, plan_index
from nl2sql_assets.pipeline.repairs import find_repairs
from resources import build_resources, close_resources, resolve_env_vars
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

log = logging.getLogger(__name__)
IndexStatus = Literal["new_version", "metadata_refresh", "repair", "pending_refresh", "unchanged", "failed"]


class IndexResources:
    """The five resources of one command, built by :func:`resources.build_resources` with their
    ``EnvVar`` secrets resolved, and shared by every run of the command."""

    datasources: DatasourcesResource
    schema_store: SchemaStoreResource
    embeddings: EmbeddingsResource
    vector_store: VectorStoreResource
    llm: LLMResource

    def __init__(self, settings: Settings, **overrides: dg.ConfigurableResource) -> None:
        unknown = set(overrides) - set(RESOURCE_KEYS)
        if unknown:
            raise TypeError(f"unknown resources: {sorted(unknown)}")
        built = {**build_resources(settings), **overrides}
        self._resources = {k: resolve_env_vars(r) for k, r in built.items()}
        for key, resource in self._resources.items():
            setattr(self, key, resource)

    def as_dict(self) -> dict[str, dg.ConfigurableResource]:
        return dict(self._resources)

    def hardcoded(self) -> dict[str, dg.ResourceDefinition]:
        """The same objects for Dagster: not re-initialized per run (one model load per command)."""
        return {k: dg.ResourceDefinition.hardcoded_resource(v) for k, v in self._resources.items()}

    def close(self) -> None:
        close_resources(self._resources)


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
        if self.status == "pending_refresh":
            return f"{self.datasource_id}: completed the pending refresh of {self.schema_version}{run}"
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
    progress: Callable[[str], None] | None = None,
) -> list[IndexResult]:
    """Drift detection, then one in-process ``index_job`` run per new structure or metadata change.

    Args:
        settings: the configuration (datasources file, stores, provider).
        datasource_ids: only these datasources (all when empty).
        instance: the Dagster instance the runs are recorded on (:func:`prepare_instance`).
        resources: shared resources (created and closed here when None).
        now: the detection time (tests); default: the clock.
        repair: also re-run an unchanged datasource whose vector store does not serve its latest
            version as registered (not live, or a documentation refresh not applied: its last
            run failed after registration); a vector store that cannot be read fails the datasource.
        extra_resources: resource overrides by key (tests).
        log_level: what Dagster's console logger prints (the event log keeps everything);
            ``CRITICAL`` keeps step failures off the console (the result line reports them).
        progress: called with one line per step of long work (``[2/5] hr: indexing ...``); the
            command line passes a writer to stderr only when stderr is a terminal.

    When runs were executed, the vector store's metrics (refresh counts and latencies, errors,
    breaker state) are written to ``settings.metrics_path`` in the Prometheus textfile format.

    Returns:
        One result per selected datasource, in datasource order.

    Raises:
        ConfigError: the datasources file is missing or invalid.
        UnknownDatasourceError: a named datasource is not in the file.
    """
    configs = select_datasources(load_datasources(settings.datasources_path), datasource_ids)
    own = resources is None
    res = resources or IndexResources(settings)
    try:
        store = res.schema_store.get_store()
        if progress is not None:
            progress(f"checking {len(configs)} datasource(s) for drift ...")
        plan = plan_index(check_drift(configs, store, now=now))
        results: dict[str, IndexResult] = {
            o.datasource_id: IndexResult(datasource_id=o.datasource_id, status=o.status,
                                         schema_version=o.schema_version, error=o.error)
            for o in plan.outcomes
        }
        requests: list[IndexRequest] = list(plan.requests)
        if repair:
            vectors = res.vector_store.get_store(res.embeddings.get_service())
            repairs, failed = find_repairs(plan.outcomes, store, vectors, attempt=str(int(time.time())))
            requests += repairs
            results.update({o.datasource_id: IndexResult(datasource_id=o.datasource_id, status="failed",
                                                         schema_version=o.schema_version, error=o.error)
                            for o in failed})
        if requests:
            instance.add_dynamic_partitions(PARTITIONS_NAME, sorted({r.partition_key for r in requests}))
            overrides: dict[str, object] = dict(res.hardcoded())
            overrides.update(extra_resources or {})
            by_id = {c.id: c for c in configs}
            shards = RunShards(instance)
            with sqlite_kept_open(instance), closing(shards), wal_sync_normal(instance):
                for number, request in enumerate(requests, start=1):
                    if progress is not None:
                        progress(f"[{number}/{len(requests)}] {request.datasource_id}: indexing "
                                 f"{request.schema_version} ({request.kind.replace('_', ' ')}) ...")
                    job = run_job(overrides, settings, by_id[request.datasource_id])
                    results[request.datasource_id] = _execute(job, instance, request, log_level, shards)
                    if progress is not None:
                        done = results[request.datasource_id]
                        progress(f"[{number}/{len(requests)}] {request.datasource_id}: {done.status.replace('_', ' ')} "
                                 f"in {done.seconds:.1f} s")
            res.vector_store.metrics.write_textfile(settings.metrics_path)
            log.info("metrics written to %s", settings.metrics_path)
        order = {c.id: i for i, c in enumerate(configs)}
        return sorted(results.values(), key=lambda r: order.get(r.datasource_id, len(order)))
    finally:
        if own:
            res.close()


def run_job(resources: Mapping[str, object], settings: Settings, config: DatasourceConfig) -> dg.JobDefinition:
    """``index_job`` for one datasource's run: the code location's definitions with only that
    datasource's external asset upstream of ``schema_snapshot``.

    Dagster reads the latest event of every upstream asset of a step when it runs (for data
    provenance): with every datasource upstream, each run of a command read one record per
    datasource, and one command over N new datasources read N² of them, which dominated an
    ``index`` of many small datasources. The run's partition, assets, checks and resources are
    the code location's; its recorded provenance names the datasource it read, the only one that
    matters to it. Building it costs a few tens of milliseconds.
    """
    return build_definitions(resources, settings=settings, datasources=[config]).resolve_job_def(INDEX_JOB)


def _execute(job: dg.JobDefinition, instance: dg.DagsterInstance, request: IndexRequest,
             log_level: str, shards: RunShards) -> IndexResult:
    started = time.perf_counter()
    run_id = shards.new_run_id()
    with shards.ready(run_id):
        result = job.execute_in_process(
            instance=instance, partition_key=request.partition_key, tags={**request.tags(), **process_tags()},
            raise_on_error=False, run_id=run_id,
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
