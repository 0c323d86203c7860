"""The one partitions definition: ``datasource_versions``, keyed ``<datasource>@<schema_version>``.

The key codec lives in :mod:`nl2sql_assets.pipeline.keys`. A single
``DynamicPartitionsDefinition`` with composite keys, not a two-dimensional
``MultiPartitionsDefinition``: the latter would create every (datasource, version) cross
pair, and "materialize all" would build pairs that never existed. Keys are added only by
drift detection (the sensor, ``nl2sql-assets index``), after the structure was observed.
"""

from __future__ import annotations

import dagster as dg

from nl2sql_assets.pipeline.names import PARTITIONS_NAME

datasource_versions_partitions = dg.DynamicPartitionsDefinition(name=PARTITIONS_NAME)
