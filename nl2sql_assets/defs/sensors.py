"""``schema_drift_sensor``: fingerprint every datasource on an interval and request index runs.

Like ``release_sensor`` in Dagster's dynamic-partitions example: it reads its cursor, returns
``SensorResult(run_requests, dynamic_partitions_requests=[...build_add_request(...)], cursor)``
or a ``SkipReason``. It registers nothing: ``schema_snapshot`` does, in the run.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at definition time.

from datetime import UTC, datetime

import dagster as dg

from nl2sql_assets.defs.jobs import index_job
from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.drift import check_drift
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.pipeline.names import DRIFT_SENSOR
from nl2sql_assets.pipeline.planning import DriftCursor, describe, plan_index
from resources.datasources import DatasourcesResource
from resources.schema_store import SchemaStoreResource

SENSOR_INTERVAL_S = 60


@dg.sensor(
    name=DRIFT_SENSOR,
    job=index_job,
    minimum_interval_seconds=SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Fingerprints every datasource (structure only, no statistics): a new structure adds a "
        "partition and requests its run; a documentation-only change re-runs the current partition."
    ),
)
def schema_drift_sensor(
    context: dg.SensorEvaluationContext,
    datasources: DatasourcesResource,
    schema_store: SchemaStoreResource,
) -> dg.SensorResult | dg.SkipReason:
    try:
        configs = datasources.load()
    except Nl2SqlError as exc:
        return dg.SkipReason(f"datasources file unusable: {exc}")
    if not configs:
        return dg.SkipReason("the datasources file lists no datasource")
    results = check_drift(configs, schema_store.get_store(), now=datetime.now(UTC))
    cursor = DriftCursor.parse(context.cursor)
    plan = plan_index(results, cursor)
    for outcome in plan.failed:
        context.log.warning(f"datasource '{outcome.datasource_id}' skipped this tick: {outcome.error}")
    for request in plan.requests:
        context.log.info(f"datasource '{request.datasource_id}': {request.kind.replace('_', ' ')} "
                         f"{request.partition_key} (run key {request.run_key})")
    next_cursor = plan.cursor.to_json()
    if not plan.requests:
        skip = dg.SkipReason(f"nothing to index: {describe([], plan.outcomes)}")
        if next_cursor == (context.cursor or DriftCursor().to_json()):
            return skip
        return dg.SensorResult(skip_reason=skip, cursor=next_cursor)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=r.partition_key, run_key=r.run_key, tags=r.tags())
            for r in plan.requests
        ],
        dynamic_partitions_requests=[datasource_versions_partitions.build_add_request(plan.partition_keys)],
        cursor=next_cursor,
    )
