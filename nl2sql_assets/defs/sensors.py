"""``schema_drift_sensor``: fingerprint every datasource on an interval and request index runs.

Like ``release_sensor`` in Dagster's dynamic-partitions example: it reads its cursor, returns
``SensorResult(run_requests, dynamic_partitions_requests=[...build_add_request(...)], cursor)``
or a ``SkipReason``. It registers nothing: ``schema_snapshot`` does, in the run. What it saw of
a datasource whose structure or documentation changed since the last tick becomes an observation
of that datasource's external asset (fingerprint, drift status), so the UI shows what was seen.
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at definition time.

from datetime import UTC, datetime

import dagster as dg

from nl2sql_assets.defs.catalog import drift_observations
from nl2sql_assets.defs.jobs import index_job
from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.drift import check_drift
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.pipeline.names import DRIFT_SENSOR
from nl2sql_assets.pipeline.planning import DriftCursor, describe, plan_index
from nl2sql_assets.pipeline.repairs import find_repairs
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

SENSOR_INTERVAL_S = 60


@dg.sensor(
    name=DRIFT_SENSOR,
    job=index_job,
    minimum_interval_seconds=SENSOR_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Fingerprints every datasource (structure only, no statistics): a new structure adds a "
        "partition and requests its run; a documentation-only change re-runs the current partition; "
        "an unchanged datasource whose vector store does not serve it as registered (a run that "
        "failed after registering) gets a repair run."
    ),
)
def schema_drift_sensor(
    context: dg.SensorEvaluationContext,
    datasources: DatasourcesResource,
    schema_store: SchemaStoreResource,
    embeddings: EmbeddingsResource,
    vector_store: VectorStoreResource,
) -> dg.SensorResult | dg.SkipReason:
    try:
        configs = datasources.load()
    except Nl2SqlError as exc:
        return dg.SkipReason(f"datasources file unusable: {exc}")
    if not configs:
        return dg.SkipReason("the datasources file lists no datasource")
    store = schema_store.get_store()
    previous = DriftCursor.parse(context.cursor)
    results = check_drift(configs, store, now=datetime.now(UTC))
    plan = plan_index(results, previous)
    observed = drift_observations(results, previous)
    requests = list(plan.requests)
    failed = list(plan.failed)
    try:
        repairs, unreadable = find_repairs(plan.outcomes, store, vector_store.get_store(embeddings.get_service()))
        requests += repairs
        failed += unreadable
    except Nl2SqlError as exc:  # the vector store cannot even be opened: drift still works
        context.log.warning(f"vector store unusable, no repair this tick: {exc}")
    for outcome in failed:
        context.log.warning(f"datasource '{outcome.datasource_id}' skipped this tick: {outcome.error}")
    for request in requests:
        context.log.info(f"datasource '{request.datasource_id}': {request.kind.replace('_', ' ')} "
                         f"{request.partition_key} (run key {request.run_key})")
    next_cursor = plan.cursor.to_json()
    if not requests:
        skip = dg.SkipReason(f"nothing to index: {describe([], plan.outcomes)}")
        if next_cursor == (context.cursor or DriftCursor().to_json()) and not observed:
            return skip
        return dg.SensorResult(skip_reason=skip, cursor=next_cursor, asset_events=observed)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=r.partition_key, run_key=r.run_key, tags=r.tags())
            for r in requests
        ],
        dynamic_partitions_requests=([datasource_versions_partitions.build_add_request(plan.partition_keys)]
                                     if plan.partition_keys else []),
        cursor=next_cursor,
        asset_events=observed,
    )
