"""``index_job``: the four schema-index assets and their checks, for one partition per run.

In process: the embedding model is loaded once per run (a multiprocess executor would load it
in every step's process).
"""

from __future__ import annotations

import dagster as dg

from nl2sql_assets.pipeline.names import ASSET_GROUP, INDEX_JOB, JOB_TAG

index_job = dg.define_asset_job(
    name=INDEX_JOB,
    selection=dg.AssetSelection.groups(ASSET_GROUP),
    executor_def=dg.in_process_executor,
    tags={JOB_TAG: "index"},
    description="Snapshot, enrich, chunk and embed one (datasource, schema_version) partition into Chroma.",
)
