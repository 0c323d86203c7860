"""Helpers for the Dagster tests: execute a partition, read its metadata, tick the sensor."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from nl2sql_assets.defs.definitions import build_definitions, default_resources
from nl2sql_assets.defs.sensors import schema_drift_sensor
from tests.dagster.conftest import HashEmbeddingsResource


def definitions(**resources: object) -> dg.Definitions:
    """The real definitions with the hash embedder (unless overridden)."""
    return build_definitions({"embeddings": HashEmbeddingsResource(), **resources})


def execute(instance: dg.DagsterInstance, key: str, tags: Mapping[str, str] | None = None,
            **resources: object) -> dg.ExecuteInProcessResult:
    job = definitions(**resources).resolve_job_def("index_job")
    return job.execute_in_process(instance=instance, partition_key=key, tags=dict(tags or {}),
                                  raise_on_error=False)


def tick(instance: dg.DagsterInstance, cursor: str | None = None) -> dg.SensorResult | dg.SkipReason:
    resources = {**default_resources(), "embeddings": HashEmbeddingsResource()}
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
        return schema_drift_sensor(context)


def apply_sensor_result(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys or []))


def run_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> list[dg.ExecuteInProcessResult]:
    """Add the tick's partitions and execute its run requests in process, as the daemon would launch them."""
    apply_sensor_result(instance, result)
    return [execute(instance, r.partition_key, r.tags) for r in result.run_requests or []]


def latest_metadata(instance: dg.DagsterInstance, asset: str, key: str) -> dict[str, object]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1).records
    assert records, f"no materialization of {asset} for {key}"
    metadata = records[0].asset_materialization.metadata  # type: ignore[union-attr]
    return {k: getattr(v, "value", v) for k, v in metadata.items()}


def failure_text(result: dg.ExecuteInProcessResult) -> str:
    from nl2sql_assets.app.runner import run_failure_message

    return run_failure_message(result)
