"""``index_job``: the four schema-index assets and their checks, for one partition per run.

In process: the embedding model is loaded once per run (a multiprocess executor would load it
in every step's process). The selection names the four assets (their checks come with them), not
the group: the group is configurable and also holds the datasource and status assets, which
have nothing to execute.
"""

from __future__ import annotations

import dagster as dg

from nl2sql_assets.pipeline.names import ASSET_NAMES, INDEX_JOB, JOB_TAG

index_job = dg.define_asset_job(
    name=INDEX_JOB,
    selection=dg.AssetSelection.assets(*ASSET_NAMES),
    executor_def=dg.in_process_executor,
    tags={JOB_TAG: "index"},
    description="Snapshot, enrich, chunk and embed one (datasource, schema_version) partition into Chroma.",
)
